"""torch.optim's own optimizers, three ways: on a 2-D surface, on a small MLP, on a weight the task ignores.

**On a surface you can see.** A 2-parameter float64 tensor is trained by the shared loop
(`train(None, ...)`, the objective ignores its batch) on one of two losses:

- the ill-conditioned quadratic f(x, y) = ½(x² + κ·y²), Hessian diag(1, κ). Gradient descent
  multiplies the y-coordinate by (1 − lr·κ) per step, so it is stable iff lr < 2/κ = 2/λ_max
  (exact), and along x, the flat direction, it crawls at (1 − lr) per step;
- Rosenbrock's valley f(x, y) = (1 − x)² + 100·(y − x²)², minimum at (1, 1).

Every logged step records the point (x, y) the step started from, so the records are the
trajectory; step 0 also records λ_max, the Hessian's largest eigenvalue at the minimum
(`torch.autograd.functional.hessian`).

**On a real net.** The same optimizers train a small ReLU MLP on a linear-teacher task,
with a `LayerProbe` measuring each layer's update-to-weight ratio ‖ΔW‖/‖W‖ per step.

**Decoupled decay.** A weight that no task touches (its gradient is exactly 0: not None,
which an optimizer would skip) under AdamW follows p_t = p_0·(1 − lr·λ)^t exactly: torch
multiplies by (1 − lr·λ) before the Adam step, and the Adam step of a zero gradient is 0.
Adam with `weight_decay` (L2) adds λp to the gradient instead, which Adam then normalizes:
the weight moves by ≈ lr per step whatever λ is.
"""
import itertools
from collections.abc import Callable, Iterator
from typing import Literal

import torch
import torch.nn.functional as F

from engines.loop.probes import LayerProbe
from engines.loop.records import Diverged, StepRecord
from engines.loop.training import log_every_for, supervised, train
from engines.supervised.data import TeacherTask
from engines.supervised.models import DeepMLP

Kind = Literal["sgd", "momentum", "nesterov", "adam", "adamw", "adam_l2"]
Surface = Literal["quadratic", "rosenbrock"]

N_FEATURES, N_CLASSES, WIDTH, DEPTH, BATCH = 16, 4, 64, 3, 64
MINIMUM = {"quadratic": (0.0, 0.0), "rosenbrock": (1.0, 1.0)}
RecordStream = Iterator[StepRecord | Diverged | None]


def build_optimizer(kind: Kind, params, lr: float, momentum: float = 0.9, weight_decay: float = 0.0
                    ) -> torch.optim.Optimizer:
    """torch.optim's optimizer for `kind`: nothing here updates a weight by hand."""
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if kind == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=momentum)
    if kind == "nesterov":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, nesterov=True)
    if kind == "adam":
        return torch.optim.Adam(params, lr=lr)
    if kind == "adam_l2":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)  # g ← g + λp, then Adam
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)  # p ← p·(1 − lr·λ), then Adam
    raise ValueError(f"optimizer kind must be one of {list(Kind.__args__)}, got {kind!r}")


# --- on a surface -------------------------------------------------------------------------------
def surface_fn(surface: Surface, kappa: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """The loss of one point p = (x, y)."""
    if surface == "quadratic":
        return lambda p: 0.5 * (p[0] ** 2 + kappa * p[1] ** 2)
    if surface == "rosenbrock":
        return lambda p: (1 - p[0]) ** 2 + 100 * (p[1] - p[0] ** 2) ** 2
    raise ValueError(f"surface must be one of {list(Surface.__args__)}, got {surface!r}")


def start_of(surface: Surface, kappa: float) -> tuple[float, float]:
    """Quadratic: where both directions add the same loss (2 each); Rosenbrock: his own (−1.2, 1)."""
    return (-2.0, 2.0 / kappa ** 0.5) if surface == "quadratic" else (-1.2, 1.0)


def lambda_max(surface: Surface, kappa: float) -> float:
    """The largest eigenvalue of the Hessian at the minimum: κ, or ≈ 1001.6 for Rosenbrock."""
    point = torch.tensor(MINIMUM[surface], dtype=torch.float64)
    hessian = torch.autograd.functional.hessian(surface_fn(surface, kappa), point)  # (2, 2)
    return float(torch.linalg.eigvalsh(hessian).max())


def surface_arm(kind: Kind, surface: Surface, kappa: float, lr: float, momentum: float, weight_decay: float,
                steps: int, log_every: int = 1) -> RecordStream:
    """One optimizer from the surface's start: `x`, `y` (the point each logged step started
    from), the loss, and at step 0 `lambda_max`."""
    f = surface_fn(surface, kappa)
    point = torch.tensor(start_of(surface, kappa), dtype=torch.float64, requires_grad=True)
    optimizer = build_optimizer(kind, [point], lr, momentum, weight_decay)
    curvature = lambda_max(surface, kappa)

    def where(step: int) -> dict:
        here = point.detach().clone()  # a copy: the values are read after this step's update
        return {"x": here[0], "y": here[1], **({"lambda_max": curvature} if step == 0 else {})}
    yield from train(None, optimizer, itertools.repeat(None), lambda batch, logging: f(point), steps,
                     log_every=log_every, on_log=where)


# --- on a small MLP -----------------------------------------------------------------------------
def mlp_arm(kind: Kind, lr: float, momentum: float, weight_decay: float, steps: int, seed: int) -> RecordStream:
    """The same initial weights and batches for every optimizer; per-layer `update_ratio/layer_XX`."""
    model = DeepMLP(N_FEATURES, WIDTH, DEPTH, N_CLASSES, activation="relu", init="he", seed=seed)
    task = TeacherTask(N_FEATURES, N_CLASSES, seed=seed + 1)
    optimizer = build_optimizer(kind, model.parameters(), lr, momentum, weight_decay)
    with LayerProbe([*model.linears, model.head]) as probe:
        yield from train(model, optimizer, task.batches(BATCH), supervised(model, F.cross_entropy), steps,
                         probe=probe, log_every=log_every_for(steps))


# --- a weight the task does not touch -----------------------------------------------------------
def idle_weight_arm(kind: Kind, lr: float, weight_decay: float, steps: int, log_every: int = 1) -> RecordStream:
    """`weight` (from 1.0, gradient exactly 0) and `closed_form` = (1 − lr·λ)^t at each logged step t."""
    weight = torch.ones(1, dtype=torch.float64, requires_grad=True)
    optimizer = build_optimizer(kind, [weight], lr, weight_decay=weight_decay)

    def measure(step: int) -> dict:
        return {"weight": weight.detach().clone()[0], "closed_form": (1 - lr * weight_decay) ** step}
    yield from train(None, optimizer, itertools.repeat(None), lambda batch, logging: (weight * 0.0).sum(), steps,
                     log_every=log_every, on_log=measure)
