"""Knowledge distillation: a teacher's softened outputs as the student's training targets.

Hinton, Vinyals & Dean (2015). The teacher's logits v, divided by a temperature T before the
softmax, give soft targets p = softmax(v/T); the student's logits z give q = softmax(z/T).
The soft loss is KL(p ‖ q), whose gradient with respect to the student's logits is exact:

    ∂/∂z_i KL(p ‖ q) = ∂/∂z_i CE(p, q) = (q_i − p_i) / T

For large T with zero-mean logits this tends to (z_i − v_i) / (N·T²): logit matching, but
with a gradient that shrinks as 1/T². Multiplying the soft loss by T² keeps its gradient
on the same scale as the hard-label term whatever T is — the T² toggle.

The task is a Gaussian mixture whose classes overlap, so the teacher's probabilities carry
what hard labels cannot: how close each point lies to the other classes.
"""
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engines.loop.training import Diverged, StepRecord, accuracy, supervised, train
from engines.supervised.models import DeepMLP

Batch = tuple[torch.Tensor, torch.Tensor]


class MixtureTask:
    """`n_classes` classes, each a mixture of `clusters_per_class` Gaussian blobs in `n_features` dims.

    Blob centres are drawn once from the seed; `noise_std` sets how much classes overlap.
    Every sample is drawn from a generator the caller passes, so the teacher's stream, the
    transfer set and the test set are independent and each reproducible.
    """

    def __init__(self, n_features: int, n_classes: int, clusters_per_class: int, noise_std: float, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.n_classes = n_classes
        self.noise_std = noise_std
        self.centers = torch.randn(n_classes * clusters_per_class, n_features, generator=generator)  # (blobs, features)

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        blob = torch.randint(len(self.centers), (n,), generator=generator)  # (n,)
        noise = torch.randn(n, self.centers.shape[1], generator=generator)  # (n, features)
        return self.centers[blob] + self.noise_std * noise, blob % self.n_classes

    def batches(self, batch_size: int, seed: int) -> Iterator[Batch]:
        generator = torch.Generator().manual_seed(seed)
        while True:
            yield self.sample(batch_size, generator)


# --- the loss ------------------------------------------------------------------------------
def soft_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float,
              t_squared: bool = True) -> torch.Tensor:
    """KL(softmax(v/T) ‖ softmax(z/T)), averaged over the batch, times T² when `t_squared`."""
    kl = F.kl_div(F.log_softmax(student_logits / temperature, dim=1),
                  F.log_softmax(teacher_logits / temperature, dim=1),
                  log_target=True, reduction="batchmean")
    return kl * temperature**2 if t_squared else kl


def soft_cross_entropy(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """−Σ_i p_i log q_i at temperature T, averaged over the batch (KL plus the teacher's entropy)."""
    p = F.softmax(teacher_logits / temperature, dim=1)
    return -(p * F.log_softmax(student_logits / temperature, dim=1)).sum(dim=1).mean()


def soft_targets(teacher_logits: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The teacher's distribution p = softmax(v/T) per row, and its entropy in nats."""
    log_p = F.log_softmax(teacher_logits / temperature, dim=-1)
    return log_p.exp(), -(log_p.exp() * log_p).sum(dim=-1)


def distill_objective(student_logits: torch.Tensor, labels: torch.Tensor, teacher_logits: torch.Tensor,
                      temperature: float | None, alpha: float,
                      t_squared: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """α·soft + (1 − α)·hard; with no temperature, the hard-label cross-entropy alone.

    Returns (objective, soft term, hard term); the soft term is 0 for the hard-label arm.
    """
    hard = F.cross_entropy(student_logits, labels)
    if temperature is None:
        return hard, torch.zeros(()), hard
    soft = soft_loss(student_logits, teacher_logits, temperature, t_squared)
    return alpha * soft + (1 - alpha) * hard, soft, hard


# --- training ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Split:
    """Inputs, true labels and the teacher's logits for one set of examples."""

    x: torch.Tensor               # (n, features)
    labels: torch.Tensor          # (n,)
    teacher_logits: torch.Tensor  # (n, classes)


def mlp(n_features: int, width: int, depth: int, n_classes: int, seed: int) -> nn.Module:
    return DeepMLP(n_features, width, depth, n_classes, activation="relu", init="he", seed=seed)


def train_teacher(teacher: nn.Module, task: MixtureTask, steps: int, batch_size: int, lr: float, seed: int,
                  log_every: int) -> Iterator[StepRecord | Diverged | None]:
    """Plenty of data: a fresh batch every step, from the task's own stream."""
    optimizer = torch.optim.Adam(teacher.parameters(), lr=lr)
    yield from train(teacher, optimizer, task.batches(batch_size, seed), supervised(teacher, F.cross_entropy), steps,
                     log_every=log_every)


@torch.no_grad()
def labelled_split(teacher: nn.Module, task: MixtureTask, n: int, seed: int) -> Split:
    """`n` fresh examples from their own seeded stream, with the teacher's logits for each."""
    x, labels = task.sample(n, torch.Generator().manual_seed(seed))
    teacher.eval()
    return Split(x, labels, teacher(x))


def grad_norm(loss: torch.Tensor, params: list[nn.Parameter]) -> torch.Tensor:
    """‖∂loss/∂θ‖ over all parameters, without touching their .grad."""
    grads = torch.autograd.grad(loss, params)
    return torch.nn.utils.get_total_norm(grads)


def train_student(student: nn.Module, transfer: Split, test: Split, temperature: float | None, alpha: float,
                  t_squared: bool, lr: float, steps: int, log_every: int) -> Iterator[StepRecord | Diverged | None]:
    """Full-batch SGD (momentum 0.9) on the transfer set; test metrics against the true labels.

    Plain SGD, not Adam: Adam divides out a gradient's scale, which would hide what the T²
    factor is for. On logged steps, before the update, the soft term's own gradient norm is
    measured with and without T² (the two differ by exactly T², computed once) and the
    student is scored on the test set.
    """
    params = list(student.parameters())

    def objective(batch: Split, logging: bool):
        logits = student(batch.x)  # (transfer, classes)
        loss, soft, hard = distill_objective(logits, batch.labels, batch.teacher_logits, temperature, alpha, t_squared)
        if not logging:
            return loss
        metrics = {"soft_loss": soft.detach(), "hard_loss": hard.detach(),
                   "train_accuracy": accuracy(logits.detach(), batch.labels)["accuracy"]}
        if temperature is not None:  # KL(p ‖ q) itself, in nats: the soft loss without its T²
            metrics["kl"] = (soft / temperature**2 if t_squared else soft).detach()
        return loss, metrics

    def on_log(step: int) -> dict[str, torch.Tensor]:
        measured: dict[str, torch.Tensor] = {}
        if temperature is not None:  # the soft term alone, at the weights this step's forward used
            soft = soft_loss(student(transfer.x), transfer.teacher_logits, temperature, t_squared)
            raw = grad_norm(soft / temperature**2 if t_squared else soft, params)
            measured = {"grad_norm/soft_with_t2": raw * temperature**2, "grad_norm/soft_without_t2": raw}
        with torch.no_grad():
            student.eval()
            test_logits = student(test.x)  # (test, classes)
            student.train()
        return {**measured, "test_loss": F.cross_entropy(test_logits, test.labels),
                "test_accuracy": accuracy(test_logits, test.labels)["accuracy"]}

    optimizer = torch.optim.SGD(params, lr=lr, momentum=0.9)
    yield from train(student, optimizer, itertools.repeat(transfer), objective, steps, log_every=log_every,
                     on_log=on_log)
