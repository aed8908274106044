"""Models small enough to train in seconds on two CPU cores, seeded through a generator.

`DeepMLP` is the vanishing-gradient workhorse: a stack of `Linear -> norm -> activation`
layers (optionally residual) and a linear head. Its `linears` and `activations` are kept
as lists so probes can find "layer 3" without guessing from module names.
"""
import math
from typing import Literal

import torch
from torch import nn

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
