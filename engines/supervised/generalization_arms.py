"""Generalization's regularization arms trained together: one batched `DropoutMLP` for all four.

The arms of `engines.supervised.generalization.generalization_arm` share the task, the initial
weights, the batch order and AdamW's learning rate; they differ in the dropout p and the decay
λ. So they are one model with both per arm: a `StackedAdam` with per-arm decoupled decay (arm
k's p ← p·(1 − lr·λ_k), 1 for an arm without decay), or per-arm L2 coefficients in the loss
(an arm with λ = 0 adds an exact 0), and per-arm dropout masks, each drawn from the arm's own
generator in the shapes and order its sequential model draws them (an arm with p = 0 draws
nothing and multiplies by 1). Early stopping keeps each arm's own best weights. Each arm's
records equal `generalization_arm`'s for it alone (tests/test_batched_scenarios.py; several seeds: tests/test_seeded.py).
"""
from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from engines.loop.batched import ArmItems, train_arms
from engines.loop.records import StepRecord
from engines.loop.stacked import StackedLinear, arm_accuracy, arm_cross_entropy
from engines.loop.stacked_optim import StackedAdam
from engines.supervised.generalization import BATCH, DropoutMLP, EarlyStopping, NoisyTeacherTask, Split, epochs


class StackedDropoutMLP(nn.Module):
    """K `DropoutMLP`s with per-arm p: Linear → ReLU → dropout twice, then the head; (K, batch, classes)."""

    def __init__(self, models: Sequence[DropoutMLP]) -> None:
        super().__init__()
        self.linears = nn.ModuleList(StackedLinear([m.linears[i] for m in models]) for i in range(2))
        self.head = StackedLinear([m.head for m in models])
        self.p = [m.dropouts[0].p for m in models]
        self.generators = [m.dropouts[0].generator for m in models]  # each arm's own mask stream

    def dropout(self, x: Tensor) -> Tensor:
        """`SeededDropout` per arm on (K, batch, width): arm k's mask from its generator, as its model draws it."""
        if not self.training or not any(self.p):
            return x
        keep = [torch.empty_like(arm).bernoulli_(1 - p, generator=g).div_(1 - p) if p else torch.ones_like(arm)
                for arm, p, g in zip(x, self.p, self.generators)]
        return x * torch.stack(keep)

    def forward(self, x: Tensor) -> Tensor:
        for linear in self.linears:
            x = self.dropout(torch.relu(linear(x)))  # (K, batch, width)
        return self.head(x)

    def weights(self) -> list[Tensor]:
        return [layer.weight for layer in [*self.linears, self.head]]


class ArmWeights:
    """Arm k's slice of a stacked model, as `EarlyStopping` reads a model: `state_dict()`."""

    def __init__(self, model: nn.Module, arm: int) -> None:
        self.model, self.arm = model, arm

    def state_dict(self) -> dict[str, Tensor]:
        return {name: value[self.arm] for name, value in self.model.state_dict().items()}


@torch.no_grad()
def evaluate_arms(model: StackedDropoutMLP, split: Split, prefix: str) -> dict[str, Tensor]:
    """`generalization.evaluate` per arm, (K,) each, in eval mode; the caller restores train mode."""
    model.eval()
    logits = model(split[0])  # (K, n, classes)
    return {f"{prefix}_loss": arm_cross_entropy(logits, split[1], exact_value=True),
            f"{prefix}_accuracy": arm_accuracy(logits, split[1])}


@torch.no_grad()
def train_scores(model: StackedDropoutMLP, tasks: Sequence[NoisyTeacherTask]) -> dict[str, Tensor]:
    """`train_loss` and `train_accuracy` per arm on its own training set (sizes differ: one arm at a time,
    through its slice of every layer, as `F.linear` computes its sequential model)."""
    model.eval()
    losses, accuracies = [], []
    for k, task in enumerate(tasks):
        x, y = task.train
        for linear in model.linears:
            x = torch.relu(F.linear(x, linear.weight[k], linear.bias[k]))
        logits = F.linear(x, model.head.weight[k], model.head.bias[k])
        losses.append(F.cross_entropy(logits, y))
        accuracies.append((logits.argmax(dim=1) == y).float().mean())
    return {"train_loss": torch.stack(losses), "train_accuracy": torch.stack(accuracies)}


def dropout_means(model: StackedDropoutMLP, arm: int, x: Tensor, draws: int = 16) -> dict[str, float]:
    """`generalization.dropout_means` for one arm: its first dropout's train-mode mean over `draws` masks
    (drawn from the arm's generator, as the sequential arm draws them at step 0) and its eval-mode mean."""
    with torch.no_grad():
        hidden = torch.relu(model.linears[0](x))[arm]  # (n, width)
        p, generator = model.p[arm], model.generators[arm]
        sampled = torch.stack([hidden * torch.empty_like(hidden).bernoulli_(1 - p, generator=generator).div_(1 - p)
                               for _ in range(draws)]).mean()
    return {"dropout/train_mean": float(sampled), "dropout/eval_mean": float(hidden.mean())}


def arm_batches(tasks: Sequence[NoisyTeacherTask], seeds: Sequence[int]) -> Iterator[Split]:
    """Each arm's own reshuffled epochs (as its sequential arm draws them), stacked: (K, batch, ...). The
    arms' training sets may differ in size, not in batch size."""
    streams = [epochs(task.train, BATCH, torch.Generator().manual_seed(seed)) for task, seed in zip(tasks, seeds)]
    for batches in zip(*streams):
        yield torch.stack([x for x, _ in batches]), torch.stack([y for _, y in batches])


def arm_split(tasks: Sequence[NoisyTeacherTask], name: str) -> Split | None:
    """A split of every arm's task: the task's own tensors when the arms share one task, else stacked per arm,
    (K, n, ...); None when the arms' sets differ in size (the training sets of the size sweep)."""
    splits = [getattr(task, name) for task in tasks]
    if all(task is tasks[0] for task in tasks):
        return splits[0]
    if any(len(x) != len(splits[0][0]) for x, _ in splits):
        return None
    return torch.stack([x for x, _ in splits]), torch.stack([y for _, y in splits])


def generalization_arms(names: Sequence[str], task: NoisyTeacherTask | Sequence[NoisyTeacherTask], width: int,
                        dropouts: Sequence[float], weight_decays: Sequence[float], decoupled: bool, lr: float, steps: int,
                        patience: int, seed: int | Sequence[int], log_every: int = 1) -> Iterator[ArmItems | None]:
    """`generalization_arm` for every (dropout, weight decay) pair at once, then one record per arm at
    step `steps`: the final and the restored (early-stopping) weights on val and test. `task` and `seed`
    are every arm's, or one per arm (the training-set-size sweep; several seeds of one run)."""
    tasks = [task] * len(names) if isinstance(task, NoisyTeacherTask) else list(task)
    seeds = [seed] * len(names) if isinstance(seed, int) else list(seed)
    model = StackedDropoutMLP([DropoutMLP(width, p, s) for p, s in zip(dropouts, seeds)])
    params = list(model.parameters())
    optimizer = StackedAdam(params, len(names), lr, weight_decay=weight_decays if decoupled else 0.0, decoupled=True)
    l2 = torch.tensor([0.0 if decoupled else 0.5 * wd for wd in weight_decays])  # ½λ per arm, as a float32 scalar
    stoppings = [EarlyStopping(patience) for _ in names]
    views = [ArmWeights(model, k) for k in range(len(names))]
    train, val, test = (arm_split(tasks, name) for name in ("train", "val", "test"))

    def objective(batch: Split, logging: bool) -> Tensor:
        x, y = batch
        loss = arm_cross_entropy(model(x), y, exact_value=logging)
        if not bool(l2.any()):
            return loss
        return loss + l2 * sum(w.square().sum((1, 2)) for w in model.weights())

    def measure(step: int, alive: Tensor) -> dict:
        scores = evaluate_arms(model, train, "train") if train is not None else train_scores(model, tasks)
        values = {**scores, **evaluate_arms(model, val, "val")}
        model.train()
        values["gap"] = values["val_loss"] - values["train_loss"]
        for k, val_loss in enumerate(values["val_loss"].tolist()):
            if alive[k]:
                stoppings[k].update(step, val_loss, views[k])
        if step == 0:
            means = [dropout_means(model, k, tasks[k].val[0]) if p > 0 and alive[k] else {}
                     for k, p in enumerate(model.p)]
            for name in ("dropout/train_mean", "dropout/eval_mean"):
                values[name] = [m.get(name) for m in means]
        return values

    shared = all(t is tasks[0] for t in tasks) and len(set(seeds)) == 1
    batches = (epochs(tasks[0].train, BATCH, torch.Generator().manual_seed(seeds[0] + 1)) if shared
               else arm_batches(tasks, [s + 1 for s in seeds]))
    alive = set(names)
    for items in train_arms(names, params, optimizer, batches, objective, steps, log_every=log_every, on_log=measure):
        alive -= {name for name, item in items or [] if not isinstance(item, StepRecord)}
        yield items
    if alive:
        yield [(name, StepRecord(steps, metrics)) for name, metrics in
               zip(names, final_metrics(model, {"val": val, "test": test}, stoppings)) if name in alive]


@torch.no_grad()
def final_metrics(model: StackedDropoutMLP, held_out: dict[str, Split], stoppings: list[EarlyStopping]) -> list[dict]:
    """Per arm: `final/*` and, with each arm's early-stopping weights loaded, `restored/*`, and the stopping steps."""
    def scores(prefix: str) -> list[dict[str, float]]:
        values = {f"{prefix}/{k}": v.tolist() for split, data in held_out.items()
                  for k, v in evaluate_arms(model, data, split).items()}
        return [{name: column[k] for name, column in values.items()} for k in range(len(stoppings))]
    final = scores("final")
    state = model.state_dict()
    for name, value in state.items():  # each arm's kept weights into its slice
        for k, stopping in enumerate(stoppings):
            if stopping.weights:
                value[k] = stopping.weights[name]
    restored = scores("restored")
    return [{**f, **r, "early_stop/best_step": float(s.best_step),
             **({"early_stop/stopped_at": float(s.stopped_at)} if s.stopped_at is not None else {})}
            for f, r, s in zip(final, restored, stoppings)]
