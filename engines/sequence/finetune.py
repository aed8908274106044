"""ULMFiT's fine-tuning tools (Howard & Ruder 2018), on the tiny LM, with torch.optim's own pieces.

- Layer groups (`layer_groups`): the embeddings (tokens and positions), each Transformer block, then
  the top (final LayerNorm and whatever head sits on it): L groups, numbered l = 1 … L from the input.
- Discriminative learning rates (`discriminative_lrs`): η_l = η_L / 2.6^(L−l), one torch.optim
  param group per layer group (`param_groups`). Lower layers hold the general features the
  pretraining learned; they move less.
- The slanted triangular schedule (`stlr_factor`, `slanted_triangular`): with T steps,
  cut = ⌊T · cut_frac⌋ and
      p = t / cut                                     for t < cut
      p = 1 − (t − cut) / (cut · (1/cut_frac − 1))     after,
      η_t = η_max · (1 + p (ratio − 1)) / ratio,
  a short linear rise, then a long linear decay, to η_max/ratio (cut_frac 0.1, ratio 32). Two
  guards for short runs: cut is at least 1, and p stops at 0 (where the floor makes cut · 10 < T,
  the decay would otherwise pass η_max/ratio before the end). As a
  `torch.optim.lr_scheduler.LambdaLR`, whose factor multiplies every group's own rate.
- Gradual unfreezing (`GradualUnfreezing`): training starts with only the top group; every
  `every` steps the next group down joins, until all train. A frozen group has requires_grad
  False: no gradient, no Adam step, and the backward pass stops above it.
- `Classifier`: a TinyLM's body and a new head on concat pooling [last, max, mean] of the final
  hidden states over the real (unpadded) bytes, as ULMFiT pools.

tests/test_finetuning.py checks the rates and the schedule against these formulas exactly.
"""
import math
from collections.abc import Callable

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from engines.sequence.attention import init_seeded
from engines.sequence.lm import TinyLM

FACTOR = 2.6
CUT_FRAC, RATIO = 0.1, 32


def discriminative_lrs(top_lr: float, groups: int, factor: float = FACTOR) -> list[float]:
    """η_l = η_L / factor^(L−l) for l = 1 … L (the first entry is the input's group)."""
    return [top_lr / factor ** (groups - level) for level in range(1, groups + 1)]


def stlr_factor(step: int, total: int, cut_frac: float = CUT_FRAC, ratio: float = RATIO) -> float:
    """η_t / η_max of the slanted triangular schedule at step t (0-based) of `total`."""
    cut = max(1, math.floor(total * cut_frac))
    if step < cut:
        p = step / cut
    else:
        p = 1 - (step - cut) / (cut * (1 / cut_frac - 1))
    return (1 + max(0.0, p) * (ratio - 1)) / ratio


def slanted_triangular(optimizer: torch.optim.Optimizer, total: int, cut_frac: float = CUT_FRAC,
                       ratio: float = RATIO) -> LambdaLR:
    return LambdaLR(optimizer, lambda step: stlr_factor(step, total, cut_frac, ratio))


def layer_groups(model: nn.Module) -> list[list[nn.Parameter]]:
    """[embeddings, block 1 … block n, top]: a TinyLM, or a Classifier (its head joins the top)."""
    body = model.body if isinstance(model, Classifier) else model
    top = list(body.norm.parameters()) + list((model.head if isinstance(model, Classifier) else body.head).parameters())
    return [[body.tokens.weight, body.positions.weight], *[list(b.parameters()) for b in body.blocks], top]


def param_groups(model: nn.Module, top_lr: float, discriminative: bool = True) -> list[dict]:
    """torch.optim param groups, one per layer group, at η_L / 2.6^(L−l) (or all at η_L)."""
    groups = layer_groups(model)
    rates = discriminative_lrs(top_lr, len(groups)) if discriminative else [top_lr] * len(groups)
    return [{"params": params, "lr": lr} for params, lr in zip(groups, rates)]


class GradualUnfreezing:
    """Top group first; one more group from the top every `every` steps (`step` is called per step)."""

    def __init__(self, groups: list[list[nn.Parameter]], every: int) -> None:
        self.groups, self.every = groups, max(1, every)
        self.unfrozen = 0
        self.step(0)

    def trainable_at(self, step: int) -> int:
        return min(len(self.groups), 1 + step // self.every)

    def step(self, step: int) -> None:
        wanted = self.trainable_at(step)
        if wanted == self.unfrozen:
            return
        for index, params in enumerate(self.groups):
            for p in params:
                p.requires_grad_(index >= len(self.groups) - wanted)
        self.unfrozen = wanted


def unfreeze_every(steps: int, groups: int) -> int:
    """ULMFiT unfreezes a group per epoch, then trains all to the end: here L + 1 equal stretches."""
    return max(1, steps // (groups + 1))


class Classifier(nn.Module):
    """A TinyLM's body (its read-out unused) and a head on [last, max, mean] of the final states."""

    def __init__(self, body: TinyLM, classes: int, seed: int) -> None:
        super().__init__()
        self.body = body
        self.head = nn.Linear(3 * body.spec.d_model, classes)
        init_seeded(self.head, seed)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        body = self.body
        h = body.tokens(ids) + body.positions.weight[: ids.shape[1]]
        for block in body.blocks:
            h = block(h)
        h = body.norm(h)  # (batch, seq, d)
        real = (torch.arange(ids.shape[1])[None, :] < lengths[:, None])[..., None]  # (batch, seq, 1)
        last = h[torch.arange(len(ids)), lengths - 1]
        peak = h.masked_fill(~real, float("-inf")).amax(1)
        mean = (h * real).sum(1) / lengths[:, None]
        return self.head(torch.cat([last, peak, mean], -1))


def scheduled(objective: Callable, unfreezing: GradualUnfreezing | None) -> Callable:
    """The objective, with the unfreezing advanced to the step about to run (counted by calls)."""
    calls = [0]

    def wrapped(batch, logging: bool):
        if unfreezing is not None:
            unfreezing.step(calls[0])
        calls[0] += 1
        return objective(batch, logging)
    return wrapped
