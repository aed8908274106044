"""Distillation's students trained together: one batched student per temperature sweep.

The students of `engines.supervised.distill.train_student` share their initial weights, the
transfer set, the optimizer (SGD, momentum 0.9, one learning rate) and α; they differ only in T
(and the hard-label arm in having no soft term). So they train as one `StackedMLP` with T a
per-arm tensor: arm k minimises a_k·soft_k + b_k·hard_k, with (a, b) = (α, 1 − α) for a T arm
and (0, 1) for the hard-label arm, whose loss is then its cross-entropy exactly (0·soft adds
an exact 0, to the value and to the gradient). Each arm's records equal `train_student`'s for
it alone (tests/test_batched_scenarios.py).
"""
import itertools
from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from engines.loop.batched import ArmItems, train_arms
from engines.loop.stacked import StackedMLP, arm_accuracy, arm_cross_entropy
from engines.supervised.distill import Split


def arm_kl(student_logits: Tensor, teacher_log_targets: Tensor, temperature: Tensor) -> Tensor:
    """KL(softmax(v/T_k) ‖ softmax(z_k/T_k)) per arm, averaged over the batch (`kl_div`'s batchmean): (K,).
    Student logits (K, batch, classes); the teacher's log-targets log_softmax(v/T_k), (K, batch, classes),
    made once by `teacher_log_targets` (they never change); temperature (K, 1, 1)."""
    pointwise = F.kl_div(F.log_softmax(student_logits / temperature, dim=-1), teacher_log_targets,
                         log_target=True, reduction="none")
    return pointwise.sum((1, 2)) / student_logits.shape[1]


def teacher_log_targets(teacher_logits: Tensor, temperature: Tensor) -> Tensor:
    """log_softmax(v/T_k) per arm, (K, batch, classes), from the teacher's logits (batch, classes): the soft
    targets' log-probabilities, the same values `distill.soft_loss` makes at every step, made once."""
    return F.log_softmax(teacher_logits / temperature, dim=-1)


def train_students(names: Sequence[str], students: Sequence[nn.Module], transfer: Split, test: Split,
                   temperatures: Sequence[float | None], alpha: float, t_squared: bool, lr: float, steps: int,
                   log_every: int) -> Iterator[ArmItems | None]:
    """`distill.train_student` for every arm at once (`None` in `temperatures`: the hard-label arm)."""
    model = StackedMLP([[*student.linears, student.head] for student in students])
    params = list(model.parameters())
    soft_arms = [t is not None for t in temperatures]
    temperature = torch.tensor([t or 1.0 for t in temperatures])[:, None, None]  # (K, 1, 1)
    t2 = torch.tensor([(t or 1.0) ** 2 for t in temperatures])  # T² rounded as a float32 scalar is
    soft_weight = torch.tensor([alpha if soft else 0.0 for soft in soft_arms])
    hard_weight = torch.tensor([1 - alpha if soft else 1.0 for soft in soft_arms])
    has_soft = torch.tensor(soft_arms)
    targets = teacher_log_targets(transfer.teacher_logits, temperature)

    def soft_of(logits: Tensor) -> Tensor:
        kl = arm_kl(logits, targets, temperature)
        return kl * t2 if t_squared else kl

    def only_soft(values: Tensor) -> list[float | None]:
        return [v if soft else None for v, soft in zip(values.tolist(), soft_arms)]

    def objective(batch: Split, logging: bool):
        logits = model(batch.x)  # (K, transfer, classes)
        soft, hard = soft_of(logits), arm_cross_entropy(logits, batch.labels, exact_value=logging)
        loss = soft_weight * soft + hard_weight * hard
        if not logging:
            return loss
        soft = soft.detach()
        metrics = {"soft_loss": torch.where(has_soft, soft, torch.zeros_like(soft)), "hard_loss": hard.detach(),
                   "train_accuracy": arm_accuracy(logits.detach(), batch.labels)}
        if any(soft_arms):  # KL(p ‖ q) itself, in nats: the soft loss without its T²
            metrics["kl"] = only_soft(soft / t2 if t_squared else soft)
        return loss, metrics

    def on_log(step: int, alive: Tensor) -> dict:
        measured: dict = {}
        if any(soft_arms):  # the soft term alone, at the weights this step's forward used
            soft = soft_of(model(transfer.x))
            unscaled = soft / t2 if t_squared else soft
            grads = torch.autograd.grad(unscaled[has_soft & alive].sum(), params)  # arm k's slice: ∂soft_k/∂θ_k
            raw = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads],
                                                       dim=1), dim=1)  # (K,)
            measured = {"grad_norm/soft_with_t2": only_soft(raw * t2), "grad_norm/soft_without_t2": only_soft(raw)}
        with torch.no_grad():
            test_logits = model(test.x)  # (K, test, classes)
        return {**measured, "test_loss": arm_cross_entropy(test_logits, test.labels, exact_value=True),
                "test_accuracy": arm_accuracy(test_logits, test.labels)}

    optimizer = torch.optim.SGD(params, lr=lr, momentum=0.9)  # elementwise: one SGD per arm, in one call
    yield from train_arms(names, params, optimizer, itertools.repeat(transfer), objective, steps, log_every=log_every,
                          on_log=on_log)
