"""Exploding gradients in a recurrent net, and torch's two clipping rules.

An RNN applies the same recurrent matrix W at every time step: h_t = f(W h_{t−1} + U x_t).
Back-propagating through T steps multiplies the gradient by Wᵀ·diag f' T times, so with a
spectral radius ρ(W) > 1 (and f' ≈ 1: a linear RNN, or tanh near 0) it grows like ρ^T:
1.2^50 ≈ 9100 (Pascanu, Mikolov & Bengio 2013). W here is ρ times a random orthogonal
matrix, so every eigenvalue has modulus exactly ρ.

Clipping acts between backward and the optimizer step, on every step:
- `clip_grad_norm_(c)`: scales all gradients by min(1, c/(‖g‖ + 1e-6)), ‖g‖ the global norm
  over every parameter, so the direction is kept and the norm becomes min(‖g‖, c);
- `clip_grad_value_(v)`: clamps each coordinate to [−v, v], which also turns the direction.

`Clipper` is registered as an optimizer step pre-hook, so it clips before every `step()`. On
a logged step the training loop's `on_log` runs first (it sees this step's raw gradients):
there the clipper clips and measures the global norm before and after; the hook then skips
that step, so each step is clipped exactly once.
"""
import math
from collections.abc import Iterator
from typing import Literal

import torch
from torch import nn

from engines.loop.records import Diverged, StepRecord
from engines.loop.schedules import Decay, build_scheduler, lr_at
from engines.loop.training import train

Mode = Literal["none", "norm", "value"]
HIDDEN, INPUTS, BATCH, RECENT = 32, 4, 32, 5


class RNN(nn.Module):
    """h_t = f(W h_{t−1} + U x_t), h_0 = 0, prediction v·h_T; W = ρ·(orthogonal)."""

    def __init__(self, radius: float, activation: Literal["linear", "tanh"], seed: int) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        orthogonal, _ = torch.linalg.qr(torch.randn(HIDDEN, HIDDEN, generator=generator))
        self.W = nn.Parameter(radius * orthogonal)
        self.U = nn.Parameter(torch.randn(HIDDEN, INPUTS, generator=generator) / math.sqrt(INPUTS))
        self.v = nn.Parameter(torch.randn(HIDDEN, generator=generator) / math.sqrt(HIDDEN))
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        driven = (x @ self.U.T).unbind(dim=1)  # T × (batch, hidden): every U x_t in one matmul
        recurrent = self.W.T
        h = x.new_zeros(x.shape[0], HIDDEN)  # (batch, hidden)
        for u_x in driven:
            z = torch.addmm(u_x, h, recurrent)  # W h + U x_t
            h = torch.tanh(z) if self.activation == "tanh" else z
        return h @ self.v  # (batch,)


def sequence_batches(length: int, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Gaussian sequences (batch, length, inputs); the target is a fixed linear read of the last 5 inputs."""
    generator = torch.Generator().manual_seed(seed)
    weights = torch.randn(INPUTS, generator=generator)
    while True:
        x = torch.randn(BATCH, length, INPUTS, generator=generator)
        yield x, (x[:, -RECENT:] @ weights).sum(dim=1)


class Clipper:
    """Clips the parameters' gradients once per optimizer step, by torch's own rule for `mode`."""

    def __init__(self, params: list[nn.Parameter], mode: Mode, threshold: float) -> None:
        self.params, self.mode, self.threshold = params, mode, threshold
        self.clipped = False  # this step's gradients are already clipped (by `clip` from on_log)

    def clip(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Clip now; the global gradient norm before and after."""
        grads = [p.grad for p in self.params if p.grad is not None]
        if self.mode == "norm":
            before = nn.utils.clip_grad_norm_(self.params, self.threshold)
        else:
            before = nn.utils.get_total_norm(grads)
            if self.mode == "value":
                nn.utils.clip_grad_value_(self.params, self.threshold)
        self.clipped = True
        return before, nn.utils.get_total_norm(grads)

    def __call__(self, optimizer, args, kwargs) -> None:
        """The step pre-hook: clip unless `clip` already did on this step."""
        if not self.clipped:
            self.clip()
        self.clipped = False


def clip_arm(mode: Mode, threshold: float, radius: float, length: int, activation: Literal["linear", "tanh"],
             lr: float, steps: int, seed: int, *, decay: Decay = "constant", warmup_steps: int = 0,
             log_every: int = 1) -> Iterator[StepRecord | Diverged | None]:
    """SGD on the RNN: `grad_norm` (global, before clipping), `clipped_norm`, `clip_coef` = their
    ratio, and `lr_closed_form`. Same weights and sequences for every mode."""
    model = RNN(radius, activation, seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    clipper = Clipper(list(model.parameters()), mode, threshold)
    handle = optimizer.register_step_pre_hook(clipper)
    scheduler = build_scheduler(optimizer, warmup_steps, steps, decay)

    def objective(batch, logging: bool) -> torch.Tensor:
        x, y = batch
        return (model(x) - y).square().mean()

    def measure(step: int) -> dict:
        before, after = clipper.clip()
        return {"grad_norm": before, "clipped_norm": after, "clip_coef": after / before,
                "lr_closed_form": lr_at(step, lr, warmup_steps, steps, decay)}
    try:
        yield from train(model, optimizer, sequence_batches(length, seed + 1), objective, steps,
                         log_every=log_every, scheduler=scheduler, on_log=measure)
    finally:
        handle.remove()
