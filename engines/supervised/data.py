"""Synthetic tasks made in code, each drawn from its own `torch.Generator`.

A local generator (never the global RNG) keeps two runs in two threads from touching
each other's random streams: the same seed gives the same batches, whatever else runs.
"""
from collections.abc import Iterator

import torch


class TeacherTask:
    """Gaussian inputs labelled by a random linear teacher: y = argmax(x @ W_teacher).

    The task is learnable by a linear model, so a deep net that stays at chance loss
    (ln n_classes) is failing to train, not failing to fit.
    """

    def __init__(self, n_features: int, n_classes: int, seed: int) -> None:
        self.n_features = n_features
        self.n_classes = n_classes
        self.generator = torch.Generator().manual_seed(seed)
        self.teacher = torch.randn(n_features, n_classes, generator=self.generator)  # (features, classes)

    def batch(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(batch_size, self.n_features, generator=self.generator)  # (batch, features)
        y = (x @ self.teacher).argmax(dim=1)  # (batch,)
        return x, y

    def batches(self, batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            yield self.batch(batch_size)
