"""Models small enough to train in seconds on two CPU cores, seeded through a generator.

`DeepMLP` is the vanishing-gradient workhorse: a stack of `Linear -> norm -> activation`
layers (optionally residual) and a linear head. Its `linears` and `activations` are kept
as lists so probes can find "layer 3" without guessing from module names. `train_deep_mlp`
is one probed arm of it on a linear teacher: model, optimizer, probe and data in one call.
"""
import math
from typing import Literal

import torch
from torch import nn

from engines.loop.probes import LayerProbe
from engines.loop.training import supervised, train
from engines.supervised.data import TeacherTask

Activation = Literal["sigmoid", "tanh", "relu", "gelu"]
Init = Literal["pytorch-default", "xavier", "he", "orthogonal"]
Norm = Literal["none", "layer", "batch"]

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "sigmoid": nn.Sigmoid, "tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU,
}


def init_linear(layer: nn.Linear, init: Init, generator: torch.Generator) -> None:
    """Initialise one Linear layer in place from `generator` (not the global RNG)."""
    weight, bias = layer.weight, layer.bias
    with torch.no_grad():
        if init == "pytorch-default":
            # What nn.Linear does on its own: U[-1/sqrt(n), 1/sqrt(n)], Var(W) = 1/(3n).
            nn.init.kaiming_uniform_(weight, a=math.sqrt(5), generator=generator)
            bound = 1 / math.sqrt(layer.in_features)
            if bias is not None:
                nn.init.uniform_(bias, -bound, bound, generator=generator)
            return
        if init == "xavier":
            nn.init.xavier_uniform_(weight, gain=1.0, generator=generator)  # Glorot: Var = 2/(n_in+n_out)
        elif init == "he":
            nn.init.kaiming_normal_(weight, nonlinearity="relu", generator=generator)  # Var = 2/n_in
        elif init == "orthogonal":
            nn.init.orthogonal_(weight, gain=1.0, generator=generator)
        else:
            raise ValueError(f"init must be one of {list(Init.__args__)}, got {init!r}")
        if bias is not None:
            nn.init.zeros_(bias)


class DeepMLP(nn.Module):
    """`depth` hidden layers of `width` units, then a linear head.

    With `residual`, hidden layers 2..depth compute h + f(norm(W h + b)); layer 1 maps the
    input to `width` and cannot be residual.
    """

    def __init__(self, n_features: int, width: int, depth: int, n_classes: int, *,
                 activation: Activation = "relu", init: Init = "pytorch-default",
                 residual: bool = False, norm: Norm = "none", seed: int = 0) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {list(ACTIVATIONS)}, got {activation!r}")
        self.residual = residual
        widths = [n_features] + [width] * depth
        self.linears = nn.ModuleList(nn.Linear(widths[i], width) for i in range(depth))
        self.norms = nn.ModuleList(_norm(norm, width) for _ in range(depth))
        self.activations = nn.ModuleList(ACTIVATIONS[activation]() for _ in range(depth))
        self.head = nn.Linear(width, n_classes)
        generator = torch.Generator().manual_seed(seed)
        for layer in [*self.linears, self.head]:
            init_linear(layer, init, generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x  # (batch, features)
        for i, (linear, norm, act) in enumerate(zip(self.linears, self.norms, self.activations)):
            a = act(norm(linear(h)))  # (batch, width)
            h = h + a if self.residual and i > 0 else a
        return self.head(h)  # (batch, classes)


def _norm(kind: Norm, width: int) -> nn.Module:
    if kind == "none":
        return nn.Identity()
    if kind == "layer":
        return nn.LayerNorm(width)
    if kind == "batch":
        return nn.BatchNorm1d(width)
    raise ValueError(f"norm must be one of none, layer, batch; got {kind!r}")


def train_deep_mlp(*, depth: int, width: int, activation: Activation, init: Init, residual: bool, norm: Norm,
                   optimizer: Literal["sgd", "adam"], lr: float, steps: int, seed: int, n_features: int = 32,
                   n_classes: int = 2, batch: int = 256, log_every: int = 1):
    """One arm of a deep MLP fitted to a seeded linear teacher, probed per layer: a fresh model
    from `seed`, and the teacher and data stream from `seed + 1` (the same for every arm that
    shares the seed). Yields the shared loop's records (`engines.loop.training.train`)."""
    model = DeepMLP(n_features, width, depth, n_classes, activation=activation, init=init, residual=residual,
                    norm=norm, seed=seed)
    task = TeacherTask(n_features, n_classes, seed=seed + 1)
    step_rule = torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam
    with LayerProbe(list(model.linears), list(model.activations)) as probe:
        yield from train(model, step_rule(model.parameters(), lr=lr), task.batches(batch),
                         supervised(model, nn.functional.cross_entropy), steps, probe=probe, log_every=log_every)
