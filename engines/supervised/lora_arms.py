"""A LoRA rank sweep trained together: every rank's adapters padded to the largest rank, one batched model.

The arms of `engines.supervised.lora.Sweep.arm` share the frozen base, the task, the batches
and Adam's settings; they differ in r (and so in s). Shapes differ, so each arm's A (r × d_in)
and B (d_out × r) sit in the top-left corner of a (R × d_in) and (d_out × R) block, R the
largest rank, and a mask (K, R) zeroes the rest in the forward pass. The padding cannot leak:
the padded rows of A x are 0, so B's padded columns get the gradient gᵀ·0 = 0, and A's padded
rows get Bᵀg with B's padded columns 0, so 0 too; Adam keeps a weight whose gradient was always
0 at 0. Arm k then computes peft's forward, W₀x + b + B(A x)·s_k, with R − r_k zero terms added
to each sum: equal to the unpadded arm to float32 rounding (tests/test_batched_scenarios.py compares
each arm with peft's on its own). peft itself is not imported: it costs ~4 s, and the per-arm
A init below is what `lora.add_lora` draws.
"""
import math
from collections.abc import Iterator, Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from engines.loop.batched import ArmItems, train_arms
from engines.loop.records import Diverged, StepRecord
from engines.loop.stacked import arm_linear
from engines.supervised.lora import BATCH, FrozenBase, Sweep, similarity_metrics, singular_value_metrics
from engines.supervised.lora_rules import WIDTH, arm_name, lora_scale


class PaddedLoRA(nn.Module):
    """K LoRA adapters of ranks r_k on the Linears `targets` of one frozen base: (K, batch, width) out."""

    def __init__(self, base: FrozenBase, ranks: Sequence[int], alpha_rule: str, targets: tuple[str, ...],
                 seeds: Sequence[int]) -> None:
        super().__init__()
        self.base, self.ranks, self.targets, self.alpha_rule = base, list(ranks), targets, alpha_rule
        top = max(ranks)
        self.mask = (torch.arange(top) < torch.tensor(self.ranks)[:, None]).float()  # (K, R): 1 up to r_k
        self.scale = torch.tensor([lora_scale(r, alpha_rule) for r in ranks])[:, None, None]  # (K, 1, 1): peft's s
        a_blocks = {t: torch.zeros(len(ranks), top, WIDTH) for t in targets}
        for k, (rank, seed) in enumerate(zip(ranks, seeds)):
            generator = torch.Generator().manual_seed(seed)
            for t in targets:  # `lora.add_lora`'s draws, target by target, from the arm's own seed
                nn.init.kaiming_uniform_(a_blocks[t][k, :rank], a=math.sqrt(5), generator=generator)
        self.lora_A = nn.ParameterDict({t: nn.Parameter(a_blocks[t]) for t in targets})  # (K, R, d_in)
        self.lora_B = nn.ParameterDict({t: nn.Parameter(torch.zeros(len(ranks), WIDTH, top)) for t in targets})

    def adapted(self, name: str, x: Tensor) -> Tensor:
        """peft's `result + lora_B(lora_A(x)) * scaling`, per arm; x (batch, d) shared or (K, batch, d)."""
        result = getattr(self.base, name)(x)
        if name not in self.targets:
            return result
        arms = len(self.ranks)
        flat = x.expand(arms, -1, -1) if x.dim() == 2 else x
        a = self.lora_A[name] * self.mask[:, :, None]  # the padded rows are 0 whatever they hold
        b = self.lora_B[name] * self.mask[:, None, :]
        return result + arm_linear(arm_linear(flat, a), b) * self.scale

    def forward(self, x: Tensor) -> Tensor:
        return self.adapted("fc2", self.base.act(self.adapted("fc1", x)))

    def a_of(self, arm: int, name: str) -> Tensor:
        return self.lora_A[name][arm, :self.ranks[arm]].detach()  # (r, d_in): the unpadded A

    def delta_weight(self, arm: int, name: str) -> Tensor:
        """ΔW = s·B A of one arm's adapted Linear, from its unpadded blocks, as `lora.delta_weight` computes it."""
        rank = self.ranks[arm]
        b = self.lora_B[name][arm, :, :rank].detach()  # (d_out, r)
        return lora_scale(rank, self.alpha_rule) * b @ self.a_of(arm, name)


def arm_mse(outputs: Tensor, targets: Tensor) -> Tensor:
    """`F.mse_loss(output_k, targets)` per arm: (K,)."""
    return F.mse_loss(outputs, targets.expand_as(outputs), reduction="none").flatten(1).mean(1)


def rank_arms(sweep: Sweep, ranks: Sequence[int], alpha_rule: str, targets: tuple[str, ...], steps: int, lr: float,
              log_every: int) -> Iterator[ArmItems | None]:
    """`sweep.arm(rank, ...)` for every rank at once: the steps, then per arm the held-out loss, its shape and
    ΔW's singular values at the last step, then φ of the sweep's pair under the larger rank of it."""
    eval_x, eval_y, base_loss = sweep.held_out
    sweep.task.generator.manual_seed(sweep.seed + 2)  # the batches every arm sees
    names = [arm_name(r) for r in ranks]
    model = PaddedLoRA(sweep.base, ranks, alpha_rule, targets, [sweep.seed * 1000 + r for r in ranks])
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=lr)  # elementwise: one Adam per arm, as `Sweep.arm` builds it

    def shape(k: int) -> dict[str, float]:  # `lora.shape_metrics`: trainable params r·(d_in + d_out) per target
        return {"trainable_params": float(ranks[k] * 2 * WIDTH * len(targets)), "rank": float(ranks[k]),
                "scale": float(lora_scale(ranks[k], alpha_rule))}

    alive = set(names)
    for items in train_arms(names, params, optimizer, sweep.task.batches(BATCH),
                            lambda batch, logging: arm_mse(model(batch[0]), batch[1]), steps, log_every=log_every):
        out: ArmItems = []
        for name, item in items or []:
            if isinstance(item, Diverged):  # its weights say nothing; keep only what does not depend on them
                out.append((name, StepRecord(item.step, shape(names.index(name)))))
                alive.discard(name)
            out.append((name, item))
        yield out or None
    with torch.no_grad():
        eval_losses = [F.mse_loss(output, eval_y).item() for output in model(eval_x)]
    finals = []
    for k, name in enumerate(names):
        if name in alive:
            metrics = {"final/eval_loss": eval_losses[k], "final/relative_loss": eval_losses[k] / base_loss,
                       "final/base_loss": base_loss, **shape(k)}
            for t in targets:
                metrics.update(singular_value_metrics(model.delta_weight(k, t), t, sweep.k))
            finals.append((name, StepRecord(steps - 1, metrics)))
    yield finals
    pair = sweep.pair
    if pair is not None and all(arm_name(r) in alive for r in pair):
        small, large = ({t: model.a_of(ranks.index(r), t) for t in targets} for r in pair)
        yield [(arm_name(pair[1]), StepRecord(steps - 1, similarity_metrics(small, large, top=min(sweep.k, pair[0]))))]
