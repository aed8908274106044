"""LoRA on our own small modules: a rank sweep against a task of known intrinsic rank.

The base model is a frozen two-layer MLP (`fc1 -> tanh -> fc2`, width 64). The task is
the base model with every Linear shifted by a rank-k update ΔW* = σ·U Vᵀ (U, V with k
orthonormal columns): fine-tuning has to find ΔW*, and ΔW* has exactly k directions.

LoRA (Hu et al., ICLR 2022) learns ΔW = s·B A with B (d_out × r) and A (r × d_in), via
peft's `LoraConfig` / `get_peft_model` on these very modules:
- A starts like an `nn.Linear` weight, B at 0, so the adapted model equals the base at
  init (exactly);
- s = lora_alpha / r, or lora_alpha / √r with `use_rslora` (Kalajdzievski 2023);
- trainable parameters per adapted Linear: r·(d_in + d_out); rank(ΔW) ≤ r.

A full fine-tune of the same weights is the reference arm, and the singular values of its
ΔW show the low-rank hypothesis directly. Hu et al.'s Eq. 4 compares what two ranks
learned: φ(A_i, A_j; p, q) = ‖U_iᵀ[:p] U_j[:, :q]‖_F² / min(p, q) ∈ [0, 1] with U the
right singular vectors of A.

`Sweep` holds what the arms of one sweep share (the base, the task, the held-out batch and
the A matrices Eq. 4 compares); `Sweep.arm(rank, ...)` trains one arm through the shared
`train()` loop and yields its records, then one record of what the trained arm shows.
The alpha rules and arm names live in the torch-free `engines.supervised.lora_rules`.
"""
import copy
import math
from collections.abc import Iterator
from functools import cached_property

import torch
from torch import nn
from torch.nn import functional as F

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import supervised, train
from engines.supervised.lora_rules import FULL, LAYERS, WIDTH, comparison_ranks, lora_kwargs, lora_scale
from engines.supervised.models import init_linear

__all__ = ["FULL", "FrozenBase", "LowRankShiftTask", "Sweep", "add_lora", "delta_weight", "lora_layer", "lora_scale",
           "subspace_similarity", "trainable_params"]

SHIFT_SIZE = 1.0    # σ: each singular value of the task's ΔW* (‖W‖₂ of the base is ≈ 1.1)
BATCH = 128
EVAL_SAMPLES = 2048


class FrozenBase(nn.Module):
    """The 'pretrained' model: fc1 -> tanh -> fc2, seeded from a local generator."""

    def __init__(self, seed: int, width: int = WIDTH) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, width)
        self.act = nn.Tanh()
        self.fc2 = nn.Linear(width, width)
        generator = torch.Generator().manual_seed(seed)
        for layer in (self.fc1, self.fc2):
            init_linear(layer, "pytorch-default", generator)
        self.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))  # (batch, width)


class LowRankShiftTask:
    """Inputs x ~ N(0, I); targets from the base with each Linear shifted by ΔW* = σ·U Vᵀ of rank k."""

    def __init__(self, base: FrozenBase, k: int, seed: int) -> None:
        self.generator = torch.Generator().manual_seed(seed)
        self.teacher = copy.deepcopy(base)
        self.shifts: dict[str, torch.Tensor] = {}
        width = base.fc1.in_features
        for name in LAYERS:
            u, _ = torch.linalg.qr(torch.randn(width, k, generator=self.generator))  # (d_out, k) orthonormal
            v, _ = torch.linalg.qr(torch.randn(width, k, generator=self.generator))  # (d_in, k) orthonormal
            self.shifts[name] = SHIFT_SIZE * u @ v.T  # (d_out, d_in), singular values all σ
            getattr(self.teacher, name).weight.add_(self.shifts[name])
        self.width = width

    def batch(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(batch_size, self.width, generator=self.generator)  # (batch, width)
        with torch.no_grad():
            return x, self.teacher(x)

    def batches(self, batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            yield self.batch(batch_size)


def add_lora(base: nn.Module, rank: int, alpha_rule: str, targets: tuple[str, ...], seed: int) -> nn.Module:
    """Wrap a copy of `base` with peft LoRA adapters; A re-drawn from a local generator (peft uses the global RNG)."""
    from peft import LoraConfig, get_peft_model  # ~4 s to import: only when a LoRA arm runs

    model = get_peft_model(copy.deepcopy(base), LoraConfig(**lora_kwargs(rank, alpha_rule, targets)))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name in targets:
            layer = lora_layer(model, name)
            # Same law as peft's default (nn.Linear's kaiming_uniform_(a=√5)); B stays 0.
            nn.init.kaiming_uniform_(layer.lora_A["default"].weight, a=math.sqrt(5), generator=generator)
    return model


def lora_layer(model: nn.Module, name: str) -> nn.Module:
    return model.get_submodule(f"base_model.model.{name}")


def delta_weight(model: nn.Module, name: str) -> torch.Tensor:
    """ΔW = s·B A of one adapted Linear, (d_out, d_in)."""
    layer = lora_layer(model, name)
    a, b = layer.lora_A["default"].weight, layer.lora_B["default"].weight  # (r, d_in), (d_out, r)
    return layer.scaling["default"] * b @ a


def trainable_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def subspace_similarity(a_small: torch.Tensor, a_large: torch.Tensor) -> torch.Tensor:
    """Hu et al. Eq. 4 for every (p, q): ‖U_smallᵀ[:p] U_large[:, :q]‖_F² / min(p, q), (r_small, r_large)."""
    u_small = torch.linalg.svd(a_small.double(), full_matrices=False).Vh  # (r_small, d_in): right singular vectors
    u_large = torch.linalg.svd(a_large.double(), full_matrices=False).Vh  # (r_large, d_in)
    overlap = (u_small @ u_large.T) ** 2  # (r_small, r_large): squared cosines between directions
    cumulative = overlap.cumsum(0).cumsum(1)  # ‖·‖_F² of the top-left p × q block
    p = torch.arange(1, overlap.shape[0] + 1, dtype=torch.float64)[:, None]
    q = torch.arange(1, overlap.shape[1] + 1, dtype=torch.float64)[None, :]
    return cumulative / torch.minimum(p, q)


class Sweep:
    """What the arms of one sweep share, built by the first arm that asks: the frozen base, the
    task, the held-out batch (drawn before any training batch), and the A matrices of the two
    ranks Eq. 4 compares (kept by whichever of them runs first)."""

    def __init__(self, k: int, ranks: tuple[int, ...], seed: int) -> None:
        self.k, self.seed = k, seed
        self.pair = comparison_ranks(ranks, k)
        self.kept_a: dict[int, dict[str, torch.Tensor]] = {}

    @cached_property
    def base(self) -> FrozenBase:
        return FrozenBase(self.seed)

    @cached_property
    def task(self) -> LowRankShiftTask:
        return LowRankShiftTask(self.base, self.k, seed=self.seed + 1)

    @cached_property
    def held_out(self) -> tuple[torch.Tensor, torch.Tensor, float]:
        x, y = self.task.batch(EVAL_SAMPLES)  # held out: training batches restart from seed + 2
        with torch.no_grad():
            return x, y, F.mse_loss(self.base(x), y).item()

    def items(self, rank: int | None, steps: int) -> int:
        """How many records `arm` yields: one per step, the final one, and φ for the pair's larger rank."""
        return steps + 1 + int(self.pair is not None and rank == self.pair[1])

    def arm(self, rank: int | None, alpha_rule: str, targets: tuple[str, ...], steps: int, lr: float,
            log_every: int) -> Iterator[StepRecord | Diverged | None]:
        """One arm (the full fine-tune for `rank=None`): Adam on the task's batches, then the
        held-out loss, the parameter count and ΔW's singular values at the last step."""
        eval_x, eval_y, base_loss = self.held_out
        self.task.generator.manual_seed(self.seed + 2)  # every arm sees the same batches
        if rank is None:
            model = copy.deepcopy(self.base)
            for target in targets:
                getattr(model, target).weight.requires_grad_(True)  # weights only, as LoRA's bias="none"
        else:
            model = add_lora(self.base, rank, alpha_rule, targets, seed=self.seed * 1000 + rank)
        optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
        objective = supervised(model, F.mse_loss, metric_fn=None)
        for item in train(model, optimizer, self.task.batches(BATCH), objective, steps, log_every=log_every):
            if isinstance(item, Diverged):  # its weights say nothing; keep only what does not depend on them
                yield StepRecord(item.step, shape_metrics(model, rank, targets))
                yield item
                return
            yield item
        yield StepRecord(steps - 1, final_metrics(model, self.base, rank, targets, self.k, eval_x, eval_y, base_loss))
        if self.pair is not None and rank in self.pair:
            self.kept_a[rank] = {t: lora_layer(model, t).lora_A["default"].weight.detach().clone() for t in targets}
            if len(self.kept_a) == 2:
                small, large = (self.kept_a[r] for r in self.pair)
                yield StepRecord(steps - 1, similarity_metrics(small, large, top=min(self.k, self.pair[0])))


def shape_metrics(model: nn.Module, rank: int | None, targets: tuple[str, ...]) -> dict[str, float]:
    """What an arm is, whatever it learned: trainable parameters, rank, and peft's scale s."""
    scale = lora_layer(model, targets[0]).scaling["default"] if rank is not None else 1.0
    return {"trainable_params": float(trainable_params(model)), "rank": float(rank if rank is not None else WIDTH),
            "scale": float(scale)}


@torch.no_grad()
def final_metrics(model: nn.Module, base: FrozenBase, rank: int | None, targets: tuple[str, ...], k: int,
                  eval_x: torch.Tensor, eval_y: torch.Tensor, base_loss: float) -> dict[str, float]:
    """Held-out loss, the arm's shape, and the singular values of each adapted layer's ΔW."""
    eval_loss = F.mse_loss(model(eval_x), eval_y).item()
    metrics = {
        "final/eval_loss": eval_loss,
        "final/relative_loss": eval_loss / base_loss,  # 1 = no better than the base model
        "final/base_loss": base_loss,
        **shape_metrics(model, rank, targets),
    }
    for target in targets:
        delta = (getattr(model, target).weight - getattr(base, target).weight if rank is None
                 else delta_weight(model, target))
        metrics.update(singular_value_metrics(delta, target, k))
    return metrics


def singular_value_metrics(delta: torch.Tensor, target: str, k: int) -> dict[str, float]:
    """ΔW's singular values (`delta_sv/<layer>/index_II`) and the share of ‖ΔW‖²_F in its top k (`top_k_energy/<layer>`)."""
    singular_values = torch.linalg.svdvals(delta.double())
    energy = singular_values ** 2
    # Share of ‖ΔW‖²_F in the top k directions: 1 for an update of rank ≤ k.
    metrics = {f"top_k_energy/{target}": (energy[:k].sum() / energy.sum().clamp_min(1e-300)).item()}
    for i, value in enumerate(singular_values.tolist()):
        metrics[f"delta_sv/{target}/index_{i + 1:02d}"] = value
    return metrics


def similarity_metrics(a_small: dict[str, torch.Tensor], a_large: dict[str, torch.Tensor],
                       top: int) -> dict[str, float]:
    """φ(p, q) per adapted layer (`subspace/<layer>/i_PP/j_QQ`), and φ(top, top) as `subspace_top_k/<layer>`."""
    metrics = {}
    for target, a in a_small.items():
        phi = subspace_similarity(a, a_large[target]).tolist()
        metrics[f"subspace_top_k/{target}"] = phi[top - 1][top - 1]
        for p, row in enumerate(phi):
            for q, value in enumerate(row):
                metrics[f"subspace/{target}/i_{p + 1:02d}/j_{q + 1:02d}"] = value
    return metrics
