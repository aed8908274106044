"""A small Transformer encoder, a reverse-the-sequence task, and a per-block probe.

Post-LN (the original Transformer) normalizes after each residual add,
x ← LN(x + F(x)); Pre-LN normalizes inside the branch, x ← x + F(LN(x)). In Post-LN
every path from the loss back to the weights crosses a LayerNorm per layer, and the
gradient of the last layers is large at initialization (Xiong et al. 2020): at a large
learning rate Adam's first full-size steps (≈ lr·sign(g), see engines/loop/schedules.py)
knock the network into a state where it predicts the uniform distribution and the loss
sits at ln(vocab). Pre-LN keeps an identity path from output to input and trains anyway.

Everything is seeded through local generators: the model is built on the meta device
(no draw from the global RNG) and every parameter is initialized from `seed`, with
PyTorch's own default rules, so each layer gets its own weights (nn.TransformerEncoder
alone deep-copies one layer, giving identical layers at init).
"""
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import LRScheduler

from engines.loop.records import Diverged, StepRecord
from engines.loop.schedules import Decay, build_scheduler
from engines.loop.training import supervised, train
from engines.supervised.models import init_linear

Optimizer = Literal["adam", "adamw", "radam"]
BETAS = (0.9, 0.98)  # the Transformer paper's Adam betas (Vaswani et al. 2017)


class ReverseTask:
    """Random token sequences; the target is the sequence reversed.

    Every output position must read a different input position, so the task needs
    attention; a model that has not learned it predicts uniformly: loss ln(vocab).
    """

    def __init__(self, vocab: int, length: int, seed: int) -> None:
        self.vocab, self.length = vocab, length
        self.generator = torch.Generator().manual_seed(seed)

    def batch(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randint(0, self.vocab, (batch_size, self.length), generator=self.generator)  # (batch, seq)
        return x, x.flip(1)

    def batches(self, batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            yield self.batch(batch_size)


class SeqTransformer(nn.Module):
    """Token + learned position embeddings, `layers` encoder blocks, a linear read-out per position."""

    def __init__(self, vocab: int, length: int, *, layers: int = 4, d_model: int = 32, heads: int = 2,
                 ffn: int = 64, norm_first: bool = False, seed: int = 0) -> None:
        super().__init__()
        meta = {"device": "meta"}  # allocate nothing and draw nothing until `_init` below
        block = nn.TransformerEncoderLayer(d_model, heads, ffn, dropout=0.0, batch_first=True,
                                           norm_first=norm_first, **meta)
        # Pre-LN ends with one more LayerNorm (its residual stream is never normalized otherwise)
        self.encoder = nn.TransformerEncoder(block, layers, norm=nn.LayerNorm(d_model, **meta) if norm_first else None,
                                             enable_nested_tensor=False)
        self.tokens = nn.Embedding(vocab, d_model, **meta)
        self.positions = nn.Embedding(length, d_model, **meta)
        self.head = nn.Linear(d_model, vocab, **meta)
        self.to_empty(device="cpu")
        self._init(torch.Generator().manual_seed(seed))

    @property
    def blocks(self) -> list[nn.Module]:
        return list(self.encoder.layers)

    def _init(self, generator: torch.Generator) -> None:
        """PyTorch's default init for every parameter, drawn from `generator`."""
        with torch.no_grad():
            for embedding in (self.tokens, self.positions):
                nn.init.normal_(embedding.weight, generator=generator)  # nn.Embedding: N(0, 1)
            for block in self.blocks:
                attention = block.self_attn
                nn.init.xavier_uniform_(attention.in_proj_weight, generator=generator)  # as nn.MultiheadAttention
                nn.init.zeros_(attention.in_proj_bias)
                nn.init.kaiming_uniform_(attention.out_proj.weight, a=math.sqrt(5), generator=generator)
                nn.init.zeros_(attention.out_proj.bias)
                init_linear(block.linear1, "pytorch-default", generator)
                init_linear(block.linear2, "pytorch-default", generator)
            for norm in [m for m in self.modules() if isinstance(m, nn.LayerNorm)]:
                nn.init.ones_(norm.weight)
                nn.init.zeros_(norm.bias)
            init_linear(self.head, "pytorch-default", generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.tokens(x) + self.positions.weight  # (batch, seq, d_model)
        return self.head(self.encoder(h))  # (batch, seq, vocab)


def sequence_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over every position: ln(vocab) for a uniform prediction."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


class BlockProbe:
    """Per encoder block, over all of the block's parameters: ‖∂L/∂θ‖ and ‖Δθ‖/‖θ‖ of a step.

    Has the interface engines.loop.training.train uses from a LayerProbe (`armed`,
    `grad_norms`, `activation_stats`, `snapshot`, `update_ratios`); a block is many
    matrices, so each statistic sums squares over the block before the square root.
    """

    def __init__(self, blocks: list[nn.Module]) -> None:
        self.params = [p for block in blocks for p in block.parameters()]
        self._values = [p.detach() for p in self.params]  # aliases: in-place optimizer steps show through
        counts = [len(list(block.parameters())) for block in blocks]
        self._owner = torch.repeat_interleave(torch.arange(len(blocks)), torch.tensor(counts))  # param -> block
        self._n_blocks = len(blocks)
        self._before: list[torch.Tensor] | None = None
        self.armed = False

    def _per_block(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        """√(Σ over a block's tensors of ‖t‖²), for every block at once."""
        squares = torch.stack(torch._foreach_norm(tensors, 2, dtype=torch.float64)) ** 2
        return torch.zeros(self._n_blocks, dtype=torch.float64).index_add_(0, self._owner, squares).sqrt()

    def grad_norms(self) -> torch.Tensor:
        return self._per_block([p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params])

    def activation_stats(self) -> dict[str, torch.Tensor]:
        return {}

    def snapshot(self) -> None:
        self._before = torch._foreach_mul(self._values, 1.0)  # one fused copy

    def update_ratios(self) -> torch.Tensor:
        if self._before is None:
            raise RuntimeError("update_ratios() needs a snapshot() before the optimizer step")
        ratios = self._per_block(torch._foreach_sub(self._values, self._before)) / self._per_block(self._before)
        self._before = None
        return ratios

    def close(self) -> None:
        self._before = None


@dataclass(frozen=True)
class ArmSpec:
    """One arm: the model, the optimizer and its schedule. Arms differ only here, never in seed."""

    norm_first: bool = False       # False: Post-LN, True: Pre-LN
    optimizer: Optimizer = "adam"  # "radam" rectifies the adaptive rate: warmup inside the optimizer
    lr: float = 2e-2
    warmup_steps: int = 0          # 0: no warmup
    decay: Decay = "constant"      # after warmup: hold lr, or cosine decay to 0 at the last step
    layers: int = 4
    vocab: int = 8
    length: int = 8
    batch: int = 32
    seed: int = 0


def build_optimizer(model: nn.Module, spec: ArmSpec, steps: int) -> tuple[torch.optim.Optimizer, LRScheduler]:
    classes = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "radam": torch.optim.RAdam}
    # foreach: one fused kernel per op over all tensors (on CPU the default is a Python loop, ~3x slower here)
    optimizer = classes[spec.optimizer](model.parameters(), lr=spec.lr, betas=BETAS, foreach=True)
    return optimizer, build_scheduler(optimizer, spec.warmup_steps, steps, spec.decay)


def token_accuracy(logits: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
    """The share of output tokens predicted right."""
    return {"accuracy": (logits.argmax(dim=-1) == targets).float().mean()}


def train_arm(spec: ArmSpec, steps: int, log_every: int = 1) -> Iterator[StepRecord | Diverged | None]:
    """One arm on the seeded task, one item per step: loss, token accuracy, lr, the global and
    per-block grad norm, the per-block update ratio."""
    model = SeqTransformer(spec.vocab, spec.length, layers=spec.layers, norm_first=spec.norm_first, seed=spec.seed)
    task = ReverseTask(spec.vocab, spec.length, seed=spec.seed + 1)  # same batches in every arm
    parameters = list(model.parameters())

    def global_grad_norm(step: int) -> dict[str, torch.Tensor]:
        # on_log runs after backward, before the optimizer step: the gradients are this step's
        grads = [p.grad.to(torch.float64) for p in parameters if p.grad is not None]  # summed in float64
        return {"grad_norm_global": torch.nn.utils.get_total_norm(grads)}

    optimizer, scheduler = build_optimizer(model, spec, steps)
    yield from train(model, optimizer, task.batches(spec.batch), supervised(model, sequence_loss, token_accuracy), steps,
                     probe=BlockProbe(model.blocks), log_every=log_every, scheduler=scheduler, on_log=global_grad_norm)
