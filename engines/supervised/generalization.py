"""Overfitting and its cures on a task a net can memorize: small, noisy, with held-out sets.

The task: Gaussian inputs labelled by a random linear teacher, argmax(x·W), then a share
`label_noise` of the labels replaced by a different class at random. Nothing in the inputs
predicts the flipped labels, so a net that fits them has learned noise (Zhang et al. 2017):
its training loss goes to 0 while the loss on fresh examples from the same distribution —
the validation set — falls, bottoms out and climbs. A third set, `test`, is never used for
any choice: it compares the weights early stopping restores with the final ones fairly.

The model: a ReLU MLP with two hidden layers and `nn.Dropout(p)` after each activation,
trained with AdamW on mini-batches (reshuffled epochs). Its dropout is `nn.Dropout`'s computation
on masks from a local generator, so runs repeat exactly. Weight decay is either AdamW's
decoupled p ← p(1 − lr·λ) or an L2 term ½λ‖W‖² added to the loss (weights, not biases).

Every logged step measures, in eval mode (dropout off, no penalty), the loss and accuracy on
the whole training set and on the validation set, and `gap` = val − train loss. Early
stopping (Prechelt 1998) tracks the best validation loss: once `patience` steps pass without
a new best it records `early_stop/stopped_at`, and keeps the best weights seen until then.
After training, those restored weights and the final ones are evaluated on val and test.
"""
import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import train
from engines.supervised.models import init_linear

N_FEATURES, N_CLASSES, BATCH, HELD_OUT = 10, 4, 128, 1000
Split = tuple[torch.Tensor, torch.Tensor]


class NoisyTeacherTask:
    """Train, val and test sets of one linear-teacher task with flipped labels."""

    def __init__(self, n_train: int, label_noise: float, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        teacher = torch.randn(N_FEATURES, N_CLASSES, generator=generator)  # (features, classes)

        def draw(n: int) -> Split:
            x = torch.randn(n, N_FEATURES, generator=generator)  # (n, features)
            clean = (x @ teacher).argmax(dim=1)
            flipped = torch.rand(n, generator=generator) < label_noise
            other = (clean + torch.randint(1, N_CLASSES, (n,), generator=generator)) % N_CLASSES  # never the clean one
            return x, torch.where(flipped, other, clean)
        self.val, self.test = draw(HELD_OUT), draw(HELD_OUT)  # the same held-out sets for every n
        self.train = draw(n_train)


class SeededDropout(nn.Module):
    """`nn.Dropout(p)` drawing its masks from a local generator instead of the global RNG (so two
    arms side by side, or two runs in two threads, never share a stream). The same computation as
    torch's own: x · bernoulli(1 − p)/(1 − p), bit for bit (tests/test_generalization.py)."""

    def __init__(self, p: float, generator: torch.Generator) -> None:
        super().__init__()
        self.p, self.generator = p, generator

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        keep = torch.empty_like(x).bernoulli_(1 - self.p, generator=self.generator).div_(1 - self.p)
        return x * keep  # kept units scaled by 1/(1 − p): E[output] = x


class DropoutMLP(nn.Module):
    """Linear → ReLU → Dropout(p), twice, then a linear head; PyTorch's default init from `seed`."""

    def __init__(self, width: int, p: float, seed: int) -> None:
        super().__init__()
        self.linears = nn.ModuleList([nn.Linear(N_FEATURES, width), nn.Linear(width, width)])
        masks = torch.Generator().manual_seed(seed + 2)
        self.dropouts = nn.ModuleList([SeededDropout(p, masks), SeededDropout(p, masks)])
        self.head = nn.Linear(width, N_CLASSES)
        generator = torch.Generator().manual_seed(seed)
        for layer in [*self.linears, self.head]:
            init_linear(layer, "pytorch-default", generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for linear, dropout in zip(self.linears, self.dropouts):
            x = dropout(torch.relu(linear(x)))  # (batch, width)
        return self.head(x)

    def weights(self) -> list[torch.Tensor]:
        return [layer.weight for layer in [*self.linears, self.head]]


def epochs(split: Split, batch: int, generator: torch.Generator) -> Iterator[Split]:
    """Mini-batches of a reshuffled training set, epoch after epoch (the whole set when it is smaller)."""
    x, y = split
    while True:
        order = torch.randperm(len(x), generator=generator)
        for start in range(0, len(x) - min(batch, len(x)) + 1, batch):
            rows = order[start:start + batch]
            yield x[rows], y[rows]


@torch.no_grad()
def evaluate(model: nn.Module, split: Split, prefix: str) -> dict[str, torch.Tensor]:
    """`prefix_loss` and `prefix_accuracy` in eval mode (dropout off); the caller restores train mode."""
    model.eval()
    logits = model(split[0])
    return {f"{prefix}_loss": F.cross_entropy(logits, split[1]),
            f"{prefix}_accuracy": (logits.argmax(dim=1) == split[1]).float().mean()}


class EarlyStopping:
    """The best validation loss so far, its step and weights; the step patience ran out (once)."""

    def __init__(self, patience: int) -> None:
        self.patience, self.best, self.best_step = patience, math.inf, -1
        self.stopped_at: int | None = None
        self.weights: dict[str, torch.Tensor] = {}

    def update(self, step: int, val_loss: float, model: nn.Module) -> None:
        if self.stopped_at is not None:
            return
        if val_loss < self.best:
            self.best, self.best_step = val_loss, step
            self.weights = {name: value.detach().clone() for name, value in model.state_dict().items()}
        elif step - self.best_step >= self.patience:
            self.stopped_at = step


def dropout_means(model: DropoutMLP, x: torch.Tensor, draws: int = 16) -> dict[str, float]:
    """The first Dropout's output averaged over `draws` masks in train mode, and its eval-mode output's mean."""
    with torch.no_grad():
        hidden = torch.relu(model.linears[0](x))  # (n, width): what the dropout layer receives
        dropout = model.dropouts[0]
        dropout.train()
        sampled = torch.stack([dropout(hidden) for _ in range(draws)]).mean()
        dropout.eval()
        kept = dropout(hidden).mean()
        dropout.train()
    return {"dropout/train_mean": float(sampled), "dropout/eval_mean": float(kept)}


def generalization_arm(task: NoisyTeacherTask, width: int, dropout: float, weight_decay: float, decoupled: bool,
                       lr: float, steps: int, patience: int, seed: int, log_every: int = 1
                       ) -> Iterator[StepRecord | Diverged | None]:
    """Train one arm; at the end one record at step `steps` (the final weights): `final/*`,
    `restored/*` (the early-stopping weights) on val and test, and the early-stopping steps."""
    model = DropoutMLP(width, dropout, seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay if decoupled else 0.0,
                                  foreach=True)  # one fused call per step: the net is small, per-op overhead dominates
    stopping = EarlyStopping(patience)
    l2 = 0.0 if decoupled else weight_decay

    def objective(batch: Split, logging: bool) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(model(x), y)
        return loss + 0.5 * l2 * sum(w.square().sum() for w in model.weights()) if l2 else loss

    def measure(step: int) -> dict:
        values = {**evaluate(model, task.train, "train"), **evaluate(model, task.val, "val")}
        model.train()
        values["gap"] = values["val_loss"] - values["train_loss"]
        stopping.update(step, float(values["val_loss"]), model)
        if step == 0 and dropout > 0:
            values.update(dropout_means(model, task.val[0]))
        return values
    outcome = None
    for outcome in train(model, optimizer, epochs(task.train, BATCH, torch.Generator().manual_seed(seed + 1)),
                         objective, steps, log_every=log_every, on_log=measure):
        yield outcome
    if isinstance(outcome, Diverged):
        return
    final = {f"final/{k}": float(v) for split in ("val", "test") for k, v in evaluate(model, getattr(task, split), split).items()}
    model.load_state_dict(stopping.weights)
    restored = {f"restored/{k}": float(v) for split in ("val", "test")
                for k, v in evaluate(model, getattr(task, split), split).items()}
    stops = {"early_stop/best_step": float(stopping.best_step),
             **({"early_stop/stopped_at": float(stopping.stopped_at)} if stopping.stopped_at is not None else {})}
    yield StepRecord(steps, {**final, **restored, **stops})
