"""The optimizers' arms trained together, one batched model per optimizer family.

SGD, SGD + momentum and Nesterov are one rule, `torch.optim.SGD`, at momentum 0 or μ and with
or without the look-ahead; Adam, AdamW and Adam + L2 are one rule, `torch.optim.Adam`, with no
decay, decoupled decay or L2. So each family's arms are one model whose weights lead with the arm
(a point (K, 2) on the surface, a `StackedMLP`, a weight (K, 1)) and one stacked optimizer
(engines/loop/stacked_optim.py) with each arm's settings as per-arm numbers: bit for bit
`build_optimizer(kind)` per arm. Each arm's records equal `surface_arm` / `mlp_arm` /
`idle_weight_arm`'s for it alone (tests/test_batched_scenarios.py; several seeds: tests/test_seeded.py).
"""
import itertools
from collections.abc import Iterator, Sequence

import torch
from torch import Tensor

from engines.loop.batched import ArmItems, train_arms
from engines.loop.stacked import ArmProbe, StackedMLP, arm_accuracy, arm_cross_entropy, stacked
from engines.loop.stacked_optim import StackedAdam, StackedSGD
from engines.loop.training import log_every_for
from engines.supervised.data import TeacherTask
from engines.supervised.models import DeepMLP
from engines.supervised.optimizers import (BATCH, DEPTH, N_CLASSES, N_FEATURES, WIDTH, Kind, Surface, lambda_max,
                                           start_of)

SGD_KINDS, ADAM_KINDS = ("sgd", "momentum", "nesterov"), ("adam", "adamw", "adam_l2")


def families(kinds: Sequence[Kind]) -> list[list[int]]:
    """The arms' indices grouped by the rule they step with: SGD's kinds, then Adam's."""
    groups = [[i for i, kind in enumerate(kinds) if kind in family] for family in (SGD_KINDS, ADAM_KINDS)]
    return [group for group in groups if group]


def stacked_optimizer(kinds: Sequence[Kind], params: list[Tensor], lr: float, momentum: float = 0.9,
                      weight_decay: float = 0.0) -> torch.optim.Optimizer:
    """`build_optimizer(kind, ...)` for each arm of one family, as one optimizer over stacked parameters."""
    arms = len(kinds)
    if all(kind in SGD_KINDS for kind in kinds):
        return StackedSGD(params, arms, lr, momentum=[0.0 if kind == "sgd" else momentum for kind in kinds],
                          nesterov=[kind == "nesterov" for kind in kinds])
    if all(kind in ADAM_KINDS for kind in kinds):
        return StackedAdam(params, arms, lr, weight_decay=[0.0 if kind == "adam" else weight_decay for kind in kinds],
                           decoupled=[kind == "adamw" for kind in kinds])
    raise ValueError(f"one stacked optimizer steps one family, {SGD_KINDS} or {ADAM_KINDS}; got {list(kinds)}")


def surface_loss(surface: Surface, kappa: float, points: Tensor) -> Tensor:
    """`optimizers.surface_fn` per arm: points (K, 2) -> losses (K,)."""
    x, y = points[:, 0], points[:, 1]
    if surface == "quadratic":
        return 0.5 * (x ** 2 + kappa * y ** 2)
    return (1 - x) ** 2 + 100 * (y - x ** 2) ** 2


def surface_arms(names: Sequence[str], kinds: Sequence[Kind], surface: Surface, kappa: float, lr: float,
                 momentum: float, weight_decay: float, steps: int, log_every: int = 1) -> Iterator[ArmItems | None]:
    """`surface_arm` for one family's arms at once: every arm from the surface's start."""
    points = torch.tensor([start_of(surface, kappa)] * len(names), dtype=torch.float64, requires_grad=True)  # (K, 2)
    optimizer = stacked_optimizer(kinds, [points], lr, momentum, weight_decay)
    curvature = lambda_max(surface, kappa)

    def where(step: int, alive: Tensor) -> dict:
        here = points.detach().clone()  # a copy: the values are read after this step's update
        return {"x": here[:, 0], "y": here[:, 1], **({"lambda_max": curvature} if step == 0 else {})}
    yield from train_arms(names, [points], optimizer, itertools.repeat(None),
                          lambda batch, logging: surface_loss(surface, kappa, points), steps, log_every=log_every,
                          on_log=where)


def seeded_batches(seeds: Sequence[int]) -> Iterator[tuple[Tensor, Tensor]]:
    """Each arm's batches from its seed's task, as its `mlp_arm` draws them: one stream per seed (arms of one
    seed read the same batch), stacked per arm (K, batch, ...); one seed's batches as they are."""
    tasks = {seed: TeacherTask(N_FEATURES, N_CLASSES, seed=seed + 1) for seed in dict.fromkeys(seeds)}
    if len(tasks) == 1:
        yield from next(iter(tasks.values())).batches(BATCH)
    while True:
        drawn = {seed: task.batch(BATCH) for seed, task in tasks.items()}
        yield torch.stack([drawn[s][0] for s in seeds]), torch.stack([drawn[s][1] for s in seeds])


def mlp_arms(names: Sequence[str], kinds: Sequence[Kind], lr: float, momentum: float, weight_decay: float, steps: int,
             seed: int | Sequence[int]) -> Iterator[ArmItems | None]:
    """`mlp_arm` for one family's arms at once: each arm's initial weights and batches from its seed (one
    for all, or one per arm), each layer's `grad_norm` and `update_ratio` per arm."""
    seeds = [seed] * len(names) if isinstance(seed, int) else list(seed)
    nets = [DeepMLP(N_FEATURES, WIDTH, DEPTH, N_CLASSES, activation="relu", init="he", seed=s) for s in seeds]
    model = StackedMLP([[*net.linears, net.head] for net in nets])
    params = list(model.parameters())
    optimizer = stacked_optimizer(kinds, params, lr, momentum, weight_decay)
    probe = ArmProbe([*(linear.weight for linear in model.linears), model.head.weight])

    def objective(batch: tuple[Tensor, Tensor], logging: bool):  # `supervised(model, F.cross_entropy)` per arm
        x, y = batch
        logits = model(x)  # (K, batch, classes)
        loss = arm_cross_entropy(logits, y, exact_value=logging)
        return (loss, {"accuracy": arm_accuracy(logits.detach(), y)}) if logging else loss
    yield from train_arms(names, params, optimizer, seeded_batches(seeds), objective, steps, probe=probe,
                          log_every=log_every_for(steps))


def idle_weight_arms(names: Sequence[str], kinds: Sequence[Kind], lr: float, weight_decay: float, steps: int,
                     log_every: int = 1) -> Iterator[ArmItems | None]:
    """`idle_weight_arm` for one family's arms at once: weights (K, 1) from 1.0, gradients exactly 0."""
    weights = stacked([torch.ones(1, dtype=torch.float64)] * len(names))  # (K, 1)
    optimizer = stacked_optimizer(kinds, [weights], lr, weight_decay=weight_decay)

    def measure(step: int, alive: Tensor) -> dict:
        return {"weight": weights.detach().clone()[:, 0], "closed_form": (1 - lr * weight_decay) ** step}
    yield from train_arms(names, [weights], optimizer, itertools.repeat(None),
                          lambda batch, logging: (weights * 0.0).sum(-1), steps, log_every=log_every, on_log=measure)

