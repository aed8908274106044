"""Learning-rate schedules from torch.optim.lr_scheduler, and why Adam's first steps need one.

Adam divides the first moment by the square root of the second. On step 1, with bias
correction, both are built from the same single gradient g, so the update is

    Δθ = −lr · ĝ/(√v̂ + ε) = −lr · g/(|g| + ε) ≈ −lr · sign(g)

for every coordinate, whatever the gradient's size: a tiny gradient moves its weight as
far as a large one. Early steps are full-size steps in a random-looking direction, and the
variance of Adam's adaptive rate is largest exactly then (Liu et al. 2020). Warmup shrinks
those steps; RAdam's rectifier does the same from inside the optimizer.

Schedules here (`decay` after `warmup_steps` of linear warmup):
- constant:            lr
- linear warmup:       lr · min(1, (t+1)/W)   — lr/W at step 0, lr from step W−1
- warmup + cosine:     then lr · ½(1 + cos(π (t−W)/(T−W)))

`engines.loop.training.train(..., scheduler=...)` steps the schedule after each optimizer step.
"""
import math
from typing import Literal

import torch
from torch.optim.lr_scheduler import CosineAnnealingLR, LambdaLR, LinearLR, LRScheduler, SequentialLR

Decay = Literal["constant", "cosine"]


def lr_at(step: int, lr: float, warmup_steps: int, total_steps: int, decay: Decay = "constant") -> float:
    """The schedule in closed form: what `build_scheduler` must reproduce step by step."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if decay == "constant":
        return lr
    decay_steps = max(1, total_steps - warmup_steps)
    return lr * 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / decay_steps))


def build_scheduler(optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int,
                    decay: Decay = "constant") -> LRScheduler:
    """Linear warmup over `warmup_steps` (0: none), then constant or cosine decay to 0 at `total_steps`."""
    if decay not in ("constant", "cosine"):
        raise ValueError(f"decay must be 'constant' or 'cosine', got {decay!r}")
    if warmup_steps < 0 or total_steps < 1:
        raise ValueError(f"need warmup_steps >= 0 and total_steps >= 1, got {warmup_steps}, {total_steps}")
    after = (CosineAnnealingLR(optimizer, T_max=max(1, total_steps - warmup_steps), eta_min=0.0)
             if decay == "cosine" else LambdaLR(optimizer, lambda _: 1.0))
    if warmup_steps <= 1:  # W = 1 warms up for zero steps: lr·(0+1)/1 = lr at once
        return after
    # factor(t) = 1/W + (1 − 1/W)·t/(W−1) = (t+1)/W, reaching 1 at t = W−1
    warmup = LinearLR(optimizer, start_factor=1 / warmup_steps, end_factor=1.0, total_iters=warmup_steps - 1)
    return SequentialLR(optimizer, [warmup, after], milestones=[warmup_steps])


def adam_first_step(grad: torch.Tensor, lr: float, eps: float = 1e-8) -> torch.Tensor:
    """Adam's first update, bias-corrected: m̂ = g, v̂ = g², so Δθ = −lr·g/(|g| + ε) ≈ −lr·sign(g)."""
    return -lr * grad / (grad.abs() + eps)


def radam_rho_inf(beta2: float) -> float:
    """RAdam's ρ∞ = 2/(1−β2) − 1: the length of the SMA that approximates Adam's EMA of g²."""
    return 2 / (1 - beta2) - 1
