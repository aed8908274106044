"""Mixed-precision training on CPU: autocast, GradScaler, and weights with and without an fp32 master copy.

One small tanh MLP, one seed and one batch stream for every arm; only the arithmetic differs.
Under `torch.autocast("cpu", dtype=...)` the matmuls and activations run in bf16 or fp16 (the
cross-entropy in fp32), so the backward pass carries fp16 gradients: entries below fp16's
smallest subnormal (2⁻²⁴) flush to 0. `torch.amp.GradScaler` multiplies the loss by S (2¹⁶ at
first) before backward and divides the fp32 weight gradients by S before Adam steps; a step
whose scaled gradients hold an inf or NaN is skipped and S halves, and after
`growth_interval` clean steps S doubles (Micikevicius et al. 2018).

The weights the optimizer updates are fp32 (master weights) in every arm but the last. The
"pure 16-bit" arm stores its weights in 16 bits: after each Adam step every weight is rounded
to fp16 or bf16, so an update smaller than half the spacing at w (|δ| < |w|·2⁻¹¹ in fp16) is
lost. This is emulated: the weights are fp32 tensors holding only 16-bit values, and Adam's
moments stay fp32 (a real pure-16-bit run would round those too).

`loss_weight` multiplies the loss — as a term of a larger objective or a mean over many tokens
does — to move the gradients toward fp16's underflow. Adam divides the gradient by its own RMS,
so in fp32 (ε = 1e-16) training is the same for any weight; only fp16 notices.
"""
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import accuracy, train
from engines.supervised.data import TeacherTask
from engines.supervised.models import DeepMLP

N_FEATURES, N_CLASSES, WIDTH, DEPTH, BATCH, TEST_SIZE = 16, 4, 32, 2, 64, 512
ADAM_EPS = 1e-16  # small enough that ε never competes with √v, even at loss_weight 1e-8
HIST_EDGES = list(range(-48, 1, 2))  # log2 |g| bins of the gradient histogram
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class Precision:
    compute: str | None   # autocast dtype ("fp16", "bf16"), or None for plain fp32
    scaling: bool = False  # GradScaler
    master: bool = True    # fp32 weights kept between steps; False: rounded to `compute` after each step


class Stepper:
    """What the loop calls its optimizer: Adam on the fp32 weights, through GradScaler when
    scaling; the weights rounded to 16 bits after each step when there is no master copy.
    It counts, per step, the updates Adam made that left the stored weight unchanged."""

    def __init__(self, params: list[torch.nn.Parameter], lr: float, scaler: "torch.amp.GradScaler | None",
                 storage: torch.dtype | None) -> None:
        self.params, self.scaler, self.storage = params, scaler, storage
        self.adam = torch.optim.Adam(params, lr=lr, eps=ADAM_EPS, foreach=True)
        self.param_groups = self.adam.param_groups
        self.skipped = 0
        self._counts = torch.zeros(4, dtype=torch.float64)  # intended, lost, lost if fp16, lost if bf16

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.adam.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        with torch.no_grad():
            before = self._flat()
            if self.scaler is None:
                self.adam.step()
            else:
                scale = self.scaler.get_scale()
                self.scaler.step(self.adam)  # unscales; skips the step if a gradient is inf/NaN
                self.scaler.update()
                self.skipped += self.scaler.get_scale() < scale
            intended = self._flat()  # after Adam, before any rounding
            if self.storage is not None:
                torch._foreach_copy_(self.params, [p.to(self.storage) for p in self.params])  # no fp32 copy survives
            stored = self._flat() if self.storage is not None else intended
            moved = intended != before
            self._counts += torch.stack([moved.sum(), (moved & (stored == before)).sum(),
                                         *((moved & (intended.to(d) == before.to(d))).sum() for d in DTYPES.values())])

    def _flat(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self.params])  # a copy: every weight, one vector

    def lost_since_last(self) -> dict[str, torch.Tensor]:
        """Shares of the updates since the last call that rounding lost: in the weights as stored,
        and as they would have been in fp16 / bf16. Empty when no weight was meant to move."""
        intended, *lost = self._counts
        self._counts = torch.zeros(4, dtype=torch.float64)
        if intended == 0:
            return {}
        return {name: count / intended for name, count in zip(("lost_updates", "lost_if_fp16", "lost_if_bf16"), lost)}


def gradient_histogram(params: list[torch.nn.Parameter]) -> dict[str, torch.Tensor]:
    """Counts of weight-gradient entries per log2|g| bin (`grad_log2_hist/bin_XX`, bin i covers
    [HIST_EDGES[i], HIST_EDGES[i+1])); zeros in `grad_log2_hist/zero`."""
    grads = torch.cat([p.grad.detach().reshape(-1).double() for p in params if p.grad is not None])
    logs = torch.log2(grads.abs()[grads != 0])
    counts = torch.histogram(logs.clamp(HIST_EDGES[0], HIST_EDGES[-1] - 1e-9), torch.tensor(HIST_EDGES, dtype=torch.float64))
    return {**{f"grad_log2_hist/bin_{i:02d}": c for i, c in enumerate(counts.hist)},
            "grad_log2_hist/zero": (grads == 0).sum().double()}


def train_arm(precision: Precision, *, lr: float, loss_weight: float, steps: int, growth_interval: int, seed: int,
              log_every: int, histogram: bool = False) -> Iterator[StepRecord | Diverged | None]:
    """One arm: the same initial weights and batches as every other arm."""
    model = DeepMLP(N_FEATURES, WIDTH, DEPTH, N_CLASSES, activation="tanh", seed=seed)
    task = TeacherTask(N_FEATURES, N_CLASSES, seed=seed + 1)
    test_x, test_y = task.batch(TEST_SIZE)  # drawn first: every arm holds out the same examples
    params = list(model.parameters())
    scaler = torch.amp.GradScaler("cpu", growth_interval=growth_interval) if precision.scaling else None
    storage = None if precision.master else DTYPES[precision.compute]
    if storage is not None:
        with torch.no_grad():
            for p in params:
                p.copy_(p.to(storage))  # a 16-bit model starts from the 16-bit copy of the same weights
    stepper = Stepper(params, lr, scaler, storage)
    autocast = (lambda: torch.autocast("cpu", dtype=DTYPES[precision.compute])) if precision.compute else nullcontext

    def objective(batch, logging: bool):
        x, y = batch
        with autocast():
            logits = model(x)  # (batch, classes), in the autocast dtype
        loss = F.cross_entropy(logits.float(), y)
        weighted = loss * loss_weight
        scaled = scaler.scale(weighted) if scaler is not None else weighted
        # The loop records this tensor's value and backpropagates it: its value is the
        # cross-entropy, its gradient that of GradScaler's scaled loss S·loss_weight·CE.
        out = loss.detach() + (scaled - scaled.detach())
        return (out, accuracy(logits.detach().float(), y)) if logging else out

    def on_log(step: int) -> dict[str, float | torch.Tensor]:
        grads = [p.grad for p in params if p.grad is not None]
        zeros = sum((g == 0).sum() for g in grads)
        with torch.no_grad(), autocast():
            test_loss = F.cross_entropy(model(test_x).float(), test_y)  # the weights as this arm holds them
        measured = {"test_loss": test_loss, "grad_zero_frac": zeros.double() / sum(g.numel() for g in grads),
                    "skipped_steps": float(stepper.skipped), **stepper.lost_since_last()}
        if scaler is not None:
            measured["loss_scale"] = scaler.get_scale()
        if histogram and step == 0:
            measured.update(gradient_histogram(params))
        return measured

    yield from train(model, stepper, task.batches(BATCH), objective, steps, log_every=log_every, on_log=on_log)
