"""Batch size and gradient noise: one MLP trained at several batch sizes, and the noise measured.

A mini-batch gradient ĝ_B is the mean of B per-example gradients. Drawn i.i.d. (with
replacement) from a pool whose per-example gradients g_i have mean G and covariance Σ,
E‖ĝ_B − G‖² = tr(Σ)/B exactly: the variance falls as 1/B. McCandlish et al. (2018) call
B_simple = tr(Σ)/|G|² the simple noise scale: below it a bigger batch buys almost a
proportionally better step, far above it almost nothing.

`noise_records` measures both from per-example gradients computed in one call with
`torch.func.vmap(grad(...))`: the pool's G and tr(Σ), then for each batch size the mean
squared distance from G of `repeats` mini-batch gradients drawn from the pool. Records are
indexed by the batch size (`step` = B); step 0 holds tr(Σ), |G|² and B_simple.

`batch_arm` trains the MLP with plain SGD at one batch size, fresh i.i.d. batches every step,
and records the loss on a fixed held-out set (the batch loss is as noisy as the batch is
small), the examples seen so far, and the schedule's closed-form rate beside the one used.
"""
import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from engines.loop.records import Diverged, StepRecord
from engines.loop.schedules import Decay, build_scheduler, lr_at
from engines.loop.training import supervised, train
from engines.supervised.data import TeacherTask
from engines.supervised.models import DeepMLP

N_FEATURES, N_CLASSES, WIDTH, DEPTH = 16, 4, 32, 2
REFERENCE_BATCH = 32   # the batch size at which `lr` is the rate itself
POOL, EVAL_SIZE = 4096, 2048
NOISE_BATCHES = (8, 16, 32, 64, 128, 256, 512, 1024)
RecordStream = Iterator[StepRecord | Diverged | None]


def make_model(seed: int) -> DeepMLP:
    return DeepMLP(N_FEATURES, WIDTH, DEPTH, N_CLASSES, activation="relu", init="he", seed=seed)


def scaled_lr(lr: float, batch: int, scaling: str) -> float:
    """lr at `batch`: fixed, ×B/32 (linear, Goyal et al. 2017) or ×√(B/32)."""
    ratio = batch / REFERENCE_BATCH
    return lr * {"fixed": 1.0, "linear": ratio, "sqrt": math.sqrt(ratio)}[scaling]


def per_example_grads(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(examples, parameters): each row the gradient of one example's loss, by vmap over grad."""
    params = {name: p.detach() for name, p in model.named_parameters()}

    def loss_of_one(p: dict, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(model, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))
    grads = vmap(grad(loss_of_one), in_dims=(None, 0, 0))(params, x, y)
    return torch.cat([g.reshape(len(x), -1) for g in grads.values()], dim=1)


def minibatch_grads(per_example: torch.Tensor, batch: int, repeats: int, generator: torch.Generator) -> torch.Tensor:
    """(repeats, parameters): means of `batch` rows drawn with replacement, as counts @ rows."""
    picks = torch.randint(0, len(per_example), (repeats, batch), generator=generator)
    counts = torch.zeros(repeats, len(per_example)).scatter_add_(1, picks, torch.ones(repeats, batch))
    return counts @ per_example / batch


def noise_records(model: torch.nn.Module, seed: int, repeats: int = 32) -> Iterator[StepRecord]:
    """Step 0: `trace_cov` tr(Σ), `grad_sq` |G|², `noise_scale` B_simple; step B: `grad_var`."""
    task = TeacherTask(N_FEATURES, N_CLASSES, seed=seed)
    x, y = task.batch(POOL)
    per_example = per_example_grads(model, x, y)  # (pool, parameters)
    mean = per_example.mean(dim=0)
    trace = float(((per_example - mean) ** 2).sum(dim=1).mean())  # tr Σ of the pool (divided by N)
    grad_sq = float(mean.square().sum())
    yield StepRecord(0, {"trace_cov": trace, "grad_sq": grad_sq, "noise_scale": trace / grad_sq})
    generator = torch.Generator().manual_seed(seed + 1)
    for batch in NOISE_BATCHES:
        estimates = minibatch_grads(per_example, batch, repeats, generator)
        yield StepRecord(batch, {"grad_var": float(((estimates - mean) ** 2).sum(dim=1).mean()),
                                 "grad_var_theory": trace / batch})


def batch_arm(batch: int, lr: float, steps: int, seed: int, *, decay: Decay = "constant", warmup_steps: int = 0,
              log_every: int = 1, keep: dict | None = None) -> RecordStream:
    """SGD at one batch size: `eval_loss` on a fixed held-out set, `examples` seen, `lr_closed_form`.
    The trained model is left in `keep["model"]` for a later phase."""
    model = make_model(seed)
    task = TeacherTask(N_FEATURES, N_CLASSES, seed=seed + 1)
    held_out = TeacherTask(N_FEATURES, N_CLASSES, seed=seed + 1)
    held_out.generator.manual_seed(seed + 7)  # the same teacher, other inputs
    x_eval, y_eval = held_out.batch(EVAL_SIZE)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = build_scheduler(optimizer, warmup_steps, steps, decay)

    def evaluate(step: int) -> dict:
        with torch.no_grad():
            eval_loss = F.cross_entropy(model(x_eval), y_eval)
        return {"eval_loss": eval_loss, "examples": float(step * batch),
                "lr_closed_form": lr_at(step, lr, warmup_steps, steps, decay)}
    yield from train(model, optimizer, task.batches(batch), supervised(model, F.cross_entropy), steps,
                     log_every=log_every, scheduler=scheduler, on_log=evaluate)
    if keep is not None:
        keep["model"] = model
