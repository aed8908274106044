"""Dead ReLUs, two ways: born dead at initialization, and killed in training.

**Born dead** (Lu, Shin, Su, Karniadakis 2019, "Dying ReLU and Initialization"). A ReLU
network is *born dead* when, at initialization, it outputs a constant over its whole
input domain. Here the domain is the square [-1, 1]², represented by a fixed 8 × 8 grid
of probe inputs; a network counts as born dead at depth d when every unit of its hidden
layer d has exactly the same value at every probe (max = min over the probes). The head
is affine, so the output is then constant too. Usually the cause is one layer whose
units are all ≤ 0 on every probe: it outputs zeros, the next layer sees only its bias,
and everything after it is constant. A constant input gives a constant output, so born
dead is monotone along the nested prefixes of one network; `constant_prefixes` judges
every prefix on its own activations, so tests can check that claim. Many networks are
sampled at once: the weights of K networks form one (K, n_out, n_in) tensor per layer
and the probes go through all of them with one `torch.baddbmm`.

**Killed in training.** An MLP regresses a smooth target on a fixed set of 256 inputs,
full batch. A hidden unit is *dead* when its activation's derivative is exactly 0 at
every probe input (the training inputs): then no training example sends it any gradient.
For ReLU that means its pre-activation is never > 0 on the probe set. LeakyReLU's
derivative below zero is its negative slope, so its units cannot die even when they are
never > 0 (counted separately as `frac_never_positive`); GELU's derivative is exactly 0 in
float32 only far below zero. The derivative is taken with autograd through the very
activation module the model uses.
"""
import itertools
import math
from collections.abc import Iterator
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from engines.loop.probes import LayerProbe, layer_name
from engines.loop.records import Diverged, StepRecord
from engines.loop.training import supervised, train
from engines.supervised.models import init_linear

Activation = Literal["relu", "leaky_relu", "gelu"]
Init = Literal["he", "xavier", "pytorch-default"]

BORN_DEAD_INPUTS = 2          # the input domain is [-1, 1]^2
N_FEATURES, N_POINTS, N_WAVES = 8, 256, 4
HIST_BINS = 40


# --- born dead ----------------------------------------------------------------------------
def probe_grid(n_inputs: int = BORN_DEAD_INPUTS, points_per_axis: int = 8) -> torch.Tensor:
    """A regular grid over [-1, 1]^n_inputs, corners included: (points_per_axis^n, n_inputs)."""
    axis = torch.linspace(-1.0, 1.0, points_per_axis)
    return torch.cartesian_prod(*[axis] * n_inputs).reshape(-1, n_inputs)


def sample_weights(n_networks: int, n_in: int, n_out: int, init: Init, generator: torch.Generator) -> torch.Tensor:
    """Weights of one layer of `n_networks` networks: (networks, n_out, n_in), as in nn.Linear."""
    if init == "he":
        return torch.randn(n_networks, n_out, n_in, generator=generator) * math.sqrt(2.0 / n_in)  # Var = 2/n_in
    if init == "xavier":
        bound = math.sqrt(6.0 / (n_in + n_out))  # U[-b, b]: Var = 2/(n_in + n_out)
    elif init == "pytorch-default":
        bound = 1.0 / math.sqrt(n_in)  # nn.Linear's own: Var = 1/(3 n_in)
    else:
        raise ValueError(f"init must be one of {list(Init.__args__)}, got {init!r}")
    return (torch.rand(n_networks, n_out, n_in, generator=generator) * 2 - 1) * bound


def constant_prefixes(width: int, depth: int, n_networks: int, *, init: Init = "he", bias: float = 0.0,
                      points_per_axis: int = 8, seed: int = 0) -> torch.Tensor:
    """(networks, depth) bool: [k, d-1] is True when network k's hidden layer d is constant
    over the probe grid. Each prefix is judged from its own activations, not inferred."""
    generator = torch.Generator().manual_seed(seed)
    probes = probe_grid(BORN_DEAD_INPUTS, points_per_axis)
    # units × probes, not probes × units: the reductions over the probes then run along
    # contiguous memory (~10x faster than reducing the middle dimension)
    h = probes.T.expand(n_networks, -1, -1)  # (networks, inputs, probes)
    biases = torch.full((n_networks, width, 1), float(bias))  # (networks, width, 1)
    constant = torch.zeros(n_networks, depth, dtype=torch.bool)
    for layer in range(depth):
        weights = sample_weights(n_networks, h.shape[1], width, init, generator)  # (networks, width, n_in)
        h = torch.relu(torch.baddbmm(biases, weights, h))  # (networks, width, probes): relu(W h + b)
        constant[:, layer] = (h.amax(dim=2) == h.amin(dim=2)).all(dim=1)  # every unit: one value at every probe
    return constant


def born_dead_probability(width: int, depth: int, n_networks: int, **kwargs) -> torch.Tensor:
    """P(born dead) at every depth 1..depth for one width: (depth,)."""
    return constant_prefixes(width, depth, n_networks, **kwargs).float().mean(dim=0)


def born_dead_records(widths: list[int], depth: int, n_networks: int, *, init: Init, bias: float,
                      seed: int) -> Iterator[StepRecord]:
    """Width by width, one record per depth (`step` = depth): `born_dead/width_XX` = P(born dead)."""
    for width in widths:
        probability = born_dead_probability(width, depth, n_networks, init=init, bias=bias, seed=seed)
        for d, p in enumerate(probability.tolist(), start=1):
            yield StepRecord(d, {f"born_dead/width_{width:02d}": p})


# --- killed in training -------------------------------------------------------------------
class RegressionTask:
    """A fixed set of Gaussian inputs and a smooth target y = ½ Σ_k sin(w_k · x).

    The set is both the training data (full batch) and the probe set on which units are
    judged dead, so a dead unit gets exactly zero gradient from every example.
    """

    def __init__(self, seed: int, n_points: int = N_POINTS, n_features: int = N_FEATURES) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n_points, n_features, generator=generator)  # (points, features)
        waves = torch.randn(n_features, N_WAVES, generator=generator)  # (features, waves)
        self.y = 0.5 * torch.sin(self.x @ waves).sum(dim=1, keepdim=True)  # (points, 1)

    @property
    def constant_loss(self) -> float:
        """MSE of the best constant prediction, Var(y): where a network with a constant output sits."""
        return float(self.y.var(unbiased=False))


class ActivationMLP(nn.Module):
    """`depth` hidden Linear -> activation layers of `width` units, then a linear head.
    Every bias starts at `bias_init` (a negative one switches units off from the start)."""

    def __init__(self, n_features: int, width: int, depth: int, *, activation: Activation = "relu",
                 negative_slope: float = 0.01, init: Init = "he", bias_init: float = 0.0, seed: int = 0) -> None:
        super().__init__()
        widths = [n_features] + [width] * depth
        self.linears = nn.ModuleList(nn.Linear(widths[i], width) for i in range(depth))
        self.head = nn.Linear(width, 1)
        self.act = {"relu": nn.ReLU(), "leaky_relu": nn.LeakyReLU(negative_slope), "gelu": nn.GELU()}[activation]
        generator = torch.Generator().manual_seed(seed)
        for layer in [*self.linears, self.head]:
            init_linear(layer, init, generator)
            with torch.no_grad():
                layer.bias.fill_(bias_init if layer is not self.head else 0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.hidden(x)[-1][1])

    def hidden(self, x: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(pre-activation, activation) of every hidden layer, each (batch, width)."""
        out, h = [], x
        for linear in self.linears:
            z = linear(h)
            h = self.act(z)
            out.append((z, h))
        return out


@torch.no_grad()
def census(model: ActivationMLP, probes: torch.Tensor) -> tuple[dict[str, torch.Tensor], list[torch.Tensor]]:
    """Per layer: `frac_dead` (f'(z) = 0 at every probe) and `frac_never_positive`
    (output never > 0 at any probe); plus each layer's pre-activations (probes, width)."""
    preacts = [z for z, _ in model.hidden(probes)]
    stacked = torch.stack(preacts)  # (layers, probes, width)
    with torch.enable_grad():
        z = stacked.clone().requires_grad_(True)
        (slope,) = torch.autograd.grad(model.act(z).sum(), z)  # f'(z), elementwise
    frac_dead = (slope == 0).all(dim=1).float().mean(dim=1)  # (layers,)
    outputs = model.act(stacked)
    frac_never_positive = (outputs <= 0).all(dim=1).float().mean(dim=1)
    return {"frac_dead": frac_dead, "frac_never_positive": frac_never_positive}, preacts


def histogram(name: str, values: torch.Tensor, low: float, high: float, bins: int = HIST_BINS) -> dict[str, float]:
    """`name/lo`, `name/hi` and `name/bin_XX`: the fraction of `values` in each of `bins` equal bins."""
    high = max(high, low + 1e-6)
    counts = torch.histc(values, bins=bins, min=low, max=high) / values.numel()
    return {f"{name}/lo": low, f"{name}/hi": high, **{f"{name}/bin_{i:02d}": c for i, c in enumerate(counts.tolist())}}


def train_arm(activation: Activation, *, depth: int, width: int, negative_slope: float, init: Init,
              bias_init: float, optimizer: Literal["sgd", "adam"], lr: float, steps: int, seed: int,
              log_every: int) -> Iterator[StepRecord | Diverged | None]:
    """Train one arm full-batch, one item per step (`engines.loop.training.train`).

    Every logged record adds the census of the probe set, taken in `on_log` with the weights
    that step's forward pass used. The first adds Var(y) (`constant_loss`) and every hidden
    layer's pre-activation histogram (`preact_start/layer_XX/...`, on its own range); the last
    adds the end's (`preact_end/layer_XX/...`) and the start's again, both on the bins spanning
    the two, so a figure can draw any layer."""
    model = ActivationMLP(N_FEATURES, width, depth, activation=activation, negative_slope=negative_slope,
                          init=init, bias_init=bias_init, seed=seed)
    task = RegressionTask(seed + 1)
    opt_class = torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam
    last = steps - 1
    start: list[torch.Tensor] = []  # each layer's step-0 pre-activations, flattened

    def on_log(step: int) -> dict[str, float | torch.Tensor]:
        fractions, preacts = census(model, task.x)
        metrics: dict[str, float | torch.Tensor] = {f"{kind}/{layer_name(i)}": value for kind, values in fractions.items()
                                                    for i, value in enumerate(values)}
        for i, z in enumerate(z.flatten() for z in preacts):
            name = layer_name(i)
            if step == 0:
                start.append(z)
                metrics["constant_loss"] = task.constant_loss
                metrics.update(histogram(f"preact_start/{name}", z, z.min().item(), z.max().item()))
            if step == last:
                low, high = min(start[i].min(), z.min()).item(), max(start[i].max(), z.max()).item()
                metrics.update(histogram(f"preact_start/{name}", start[i], low, high))
                metrics.update(histogram(f"preact_end/{name}", z, low, high))
        return metrics

    with LayerProbe(list(model.linears)) as probe:  # weight-gradient norms and update ratios
        yield from train(model, opt_class(model.parameters(), lr=lr), itertools.repeat((task.x, task.y)),
                         supervised(model, F.mse_loss, metric_fn=None), steps, probe=probe, log_every=log_every,
                         on_log=on_log)
