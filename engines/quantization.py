"""Quantization: round a trained network's numbers onto a grid of 2^b levels, and measure the damage.

A uniform quantizer with step Δ = `scale` maps x to q = clamp(round(x/Δ) + z, q_min, q_max)
and back to x̂ = (q − z)·Δ. The observers of `torch.ao.quantization` choose Δ and the
zero-point z from the range they saw:

    symmetric:   Δ = max|x| / ((q_max − q_min)/2),   z = 0         (int8: max|x|/127.5)
    affine:      Δ = (max − min) / (q_max − q_min),   z = q_min − round(min/Δ)

with the range first widened to include 0. For data spread over many bins the rounding
error is uniform on [−Δ/2, Δ/2], so MSE = Δ²/12. Δ ∝ 1/(2^b − 1), so each extra bit
(nearly) halves it: the signal-to-quantization-noise ratio grows 20·log10(2) ≈ 6.02 dB per
bit (6.3 from 4 to 5 bits, tending to 6.02).

Per-tensor quantization shares one Δ across a whole weight matrix, so one wide output
channel sets the step for all of them; channels narrower than Δ/2 round to zero entirely.
Per-channel quantization gives every output row its own Δ. `rescale_channels` makes the
failure visible on purpose: ReLU(s·z) = s·ReLU(z) for s > 0, so multiplying layer 1's rows
by s and dividing layer 2's columns by s leaves the function unchanged while the
per-channel ranges spread apart.

Post-training quantization (PTQ) fake-quantizes a trained model's weights and, per
tensor, the input of every layer (ranges from a calibration batch). Quantization-aware
training (QAT) fine-tunes with the same fake-quant in the forward pass; rounding has zero
gradient almost everywhere, so the backward pass uses the straight-through estimator:
∂x̂/∂x = 1 inside the clamp range, 0 outside — exactly what `torch.fake_quantize_*` does.
"""
import copy
import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.ao.quantization import (MinMaxObserver, MovingAverageMinMaxObserver,
                                   MovingAveragePerChannelMinMaxObserver, PerChannelMinMaxObserver)

from engines.models import DeepMLP
from engines.training import Diverged, StepRecord, train


@dataclass(frozen=True)
class Scheme:
    """How one tensor is quantized: bit width, symmetric or affine, one scale or one per row."""

    bits: int
    symmetric: bool = True
    per_channel: bool = False

    @property
    def quant_range(self) -> tuple[int, int]:
        return quant_range(self.bits, self.symmetric)


def quant_range(bits: int, symmetric: bool) -> tuple[int, int]:
    """Signed codes [−2^(b−1), 2^(b−1)−1] for symmetric, unsigned [0, 2^b−1] for affine."""
    if not 2 <= bits <= 8:
        raise ValueError(f"bits must be from 2 to 8, got {bits}")
    return (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if symmetric else (0, 2 ** bits - 1)


def make_observer(scheme: Scheme, moving_average: bool = False) -> nn.Module:
    """The torch.ao observer for `scheme`, with quant_min/quant_max narrowed to its bit width."""
    q_min, q_max = scheme.quant_range
    dtype = torch.qint8 if scheme.symmetric else torch.quint8
    kwargs = dict(dtype=dtype, quant_min=q_min, quant_max=q_max)
    if moving_average:  # what torch's default QAT qconfig observes with: min/max tracked at rate 0.01
        kwargs["averaging_constant"] = 0.01
    if scheme.per_channel:
        qscheme = torch.per_channel_symmetric if scheme.symmetric else torch.per_channel_affine
        observer = MovingAveragePerChannelMinMaxObserver if moving_average else PerChannelMinMaxObserver
        return observer(ch_axis=0, qscheme=qscheme, **kwargs)
    qscheme = torch.per_tensor_symmetric if scheme.symmetric else torch.per_tensor_affine
    return (MovingAverageMinMaxObserver if moving_average else MinMaxObserver)(qscheme=qscheme, **kwargs)


def qparams(x: torch.Tensor, scheme: Scheme) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, zero_point) the observer picks for `x`: shape (1,) per-tensor, (rows,) per-channel."""
    observer = make_observer(scheme)
    observer(x.detach())
    scale, zero_point = observer.calculate_qparams()
    return scale, zero_point.to(torch.int32)


def qparams_by_formula(x_min: float, x_max: float, bits: int, symmetric: bool) -> tuple[float, int]:
    """The textbook formula the observer implements (checked against it by the tests)."""
    q_min, q_max = quant_range(bits, symmetric)
    x_min, x_max = min(x_min, 0.0), max(x_max, 0.0)  # the range always contains 0, so 0 is exact
    if symmetric:
        return max(-x_min, x_max) / ((q_max - q_min) / 2), 0
    scale = (x_max - x_min) / (q_max - q_min)
    return scale, int(min(q_max, max(q_min, q_min - round(x_min / scale))))


def fake_quantize(x: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor, scheme: Scheme) -> torch.Tensor:
    """x̂ = (clamp(round(x/Δ) + z) − z)·Δ with torch's kernels; backward is the clamp-masked STE."""
    q_min, q_max = scheme.quant_range
    if scheme.per_channel:
        return torch.fake_quantize_per_channel_affine(x, scale, zero_point, 0, q_min, q_max)
    return torch.fake_quantize_per_tensor_affine(x, scale, zero_point, q_min, q_max)


def fake_quantize_by_hand(x: torch.Tensor, scale: float, zero_point: int, q_min: int, q_max: int) -> torch.Tensor:
    """The same arithmetic spelled out. torch multiplies by 1/Δ (not x/Δ), and torch.round
    rounds half to even; only this exact order matches its kernel bit for bit."""
    scale = torch.as_tensor(scale, dtype=x.dtype)  # the kernel computes 1/Δ in float32, as here
    inv_scale = 1.0 / scale
    q = torch.clamp(torch.round(x * inv_scale) + zero_point, q_min, q_max)
    return (q - zero_point) * scale


def weight_error(weight: torch.Tensor, scheme: Scheme) -> dict[str, float]:
    """Measured MSE and SQNR of one weight matrix, beside the Δ²/12 theory."""
    with torch.no_grad():
        scale, zero_point = qparams(weight, scheme)
        noise = fake_quantize(weight, scale, zero_point, scheme) - weight
        theory = float((scale ** 2).mean()) / 12  # rows are equally long: mean over rows = mean over weights
        power, mse = float(weight.pow(2).mean()), float(noise.pow(2).mean())
    return {"mse": mse, "mse_theory": theory, "sqnr_db": 10 * math.log10(power / max(mse, 1e-30)),
            "sqnr_theory_db": 10 * math.log10(power / theory)}


# --- the model and its task -----------------------------------------------------------

class MixtureTask:
    """10 classes, each a mixture of a few Gaussian clusters in a low-dimensional space.

    Several clusters per class make the boundaries nonlinear, so the hidden layers must
    place them precisely — which is what coarse weights spoil.
    """

    def __init__(self, n_features: int, n_classes: int, clusters_per_class: int, cluster_std: float, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.n_features, self.n_classes, self.cluster_std, self.seed = n_features, n_classes, cluster_std, seed
        self.means = torch.randn(n_classes * clusters_per_class, n_features, generator=generator)  # (clusters, features)
        self.test_x, self.test_y = self.sample(4096, torch.Generator().manual_seed(seed + 2))
        self.calibration_x, _ = self.sample(1024, torch.Generator().manual_seed(seed + 3))

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        cluster = torch.randint(0, len(self.means), (n,), generator=generator)
        x = self.means[cluster] + self.cluster_std * torch.randn(n, self.n_features, generator=generator)
        return x, cluster % self.n_classes  # (n, features), (n,)

    def batches(self, batch_size: int, stream: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Training batches; each `stream` is its own seeded sequence (every QAT arm sees the same)."""
        generator = torch.Generator().manual_seed((self.seed << 8) + 16 + stream)
        while True:
            yield self.sample(batch_size, generator)


def layers_of(model: DeepMLP) -> list[nn.Linear]:
    return [*model.linears, model.head]


def rescale_channels(model: DeepMLP, spread: float, n_channels: int, generator: torch.Generator) -> torch.Tensor:
    """Multiply `n_channels` random output channels of layer 1 by `spread` and divide layer 2's
    matching input columns by it: ReLU(s·z) = s·ReLU(z), so the function is unchanged while
    layer 1's per-channel weight ranges now differ by ~`spread` (outlier channels)."""
    first, second = layers_of(model)[:2]
    factors = torch.ones(first.out_features)  # (channels,)
    factors[torch.randperm(first.out_features, generator=generator)[:n_channels]] = spread
    with torch.no_grad():
        first.weight.mul_(factors[:, None])
        first.bias.mul_(factors)
        second.weight.div_(factors[None, :])
    return factors


class FakeQuantMLP(nn.Module):
    """A DeepMLP (ReLU, no norm) run with fake-quantized weights and per-tensor layer inputs.

    Shares the wrapped model's parameters. Like torch's `FakeQuantize`, each quantized tensor
    has its own observer, which updates in training mode and is frozen in eval mode: MinMax
    for PTQ (one calibration pass), moving-average MinMax for QAT (the grid follows the
    weights as they train).
    """

    def __init__(self, model: DeepMLP, weights: Scheme | None, activation_bits: int | None, *,
                 moving_average: bool = False) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers_of(model))
        self.weight_scheme = weights
        self.activation_scheme = None if activation_bits is None else Scheme(activation_bits, symmetric=False)
        self.weight_observers = nn.ModuleList(
            make_observer(weights, moving_average) for _ in self.layers) if weights else None
        self.input_observers = nn.ModuleList(
            make_observer(self.activation_scheme, moving_average) for _ in self.layers) if activation_bits else None

    def _fake_quantize(self, x: torch.Tensor, observer: nn.Module, scheme: Scheme) -> torch.Tensor:
        if self.training:
            observer(x.detach())
        scale, zero_point = observer.calculate_qparams()
        return fake_quantize(x, scale, zero_point.to(torch.int32), scheme)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x  # (batch, features)
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            if self.input_observers is not None:
                h = self._fake_quantize(h, self.input_observers[i], self.activation_scheme)
            weight = layer.weight
            if self.weight_observers is not None:
                weight = self._fake_quantize(weight, self.weight_observers[i], self.weight_scheme)
            h = F.linear(h, weight, layer.bias)  # (batch, width); biases stay float (int32 in deployment)
            if i < last:
                h = F.relu(h)
        return h  # (batch, classes)


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    model.eval()
    logits = model(x)
    return {"accuracy": float((logits.argmax(dim=1) == y).float().mean()), "loss": float(F.cross_entropy(logits, y))}


def test_metrics(model: nn.Module, task: MixtureTask) -> dict[str, float]:
    return {f"test/{name}": value for name, value in evaluate(model, task.test_x, task.test_y).items()}


@torch.no_grad()
def post_training_quantize(model: DeepMLP, weights: Scheme, activation_bits: int | None,
                           calibration_x: torch.Tensor) -> FakeQuantMLP:
    """PTQ: weights rounded as they are; activation ranges from one calibration pass."""
    quantized = FakeQuantMLP(model, weights, activation_bits)
    quantized.train()  # observers record min/max
    quantized(calibration_x)
    return quantized.eval()


def quantization_aware_training(model: DeepMLP, weights: Scheme, activation_bits: int | None,
                                task: MixtureTask, steps: int, lr: float, batch_size: int,
                                log_every: int) -> Iterator[StepRecord | Diverged | FakeQuantMLP]:
    """QAT: fine-tune a copy of the float model through fake-quant (the STE carries the
    gradient past the rounding). Yields training records, then the fine-tuned model (unless it diverged)."""
    student = FakeQuantMLP(copy.deepcopy(model), weights, activation_bits, moving_average=True)
    with torch.no_grad():  # start every moving average at the calibration range, where PTQ starts
        student.train()
        student(task.calibration_x)
    optimizer = torch.optim.Adam(student.parameters(), lr=lr)
    for record in train(student, optimizer, task.batches(batch_size, stream=1), F.cross_entropy, steps,
                        log_every=log_every):
        yield record
        if isinstance(record, Diverged):
            return
    yield student.eval()


def ptq_metrics(model: DeepMLP, weights: Scheme, activation_bits: int | None, task: MixtureTask) -> dict[str, float]:
    """One PTQ arm at one bit width: test accuracy and loss, and each layer's weight error."""
    metrics = test_metrics(post_training_quantize(model, weights, activation_bits, task.calibration_x), task)
    for i, layer in enumerate(layers_of(model)):
        for name, value in weight_error(layer.weight, weights).items():
            metrics[f"weight_{name}/layer_{i + 1:02d}"] = value
    return metrics


@torch.no_grad()
def inspect_weights(model: DeepMLP, layer: int, bits: int, max_weights: int = 4096) -> dict[str, list[float]]:
    """What the histogram and range plots draw: every layer's per-channel max|w|, `layer`'s
    weights (evenly subsampled past `max_weights`) and two symmetric `bits`-bit grids on
    them — the per-tensor one and a typical (median-range) channel's per-channel one."""
    out: dict[str, list[float]] = {}
    for i, linear in enumerate(layers_of(model)):
        out[f"channel_absmax/layer_{i + 1:02d}"] = linear.weight.abs().amax(dim=1).tolist()
    weight = layers_of(model)[layer - 1].weight
    flat = weight.flatten()
    out[f"weights/layer_{layer:02d}"] = flat[:: max(1, math.ceil(len(flat) / max_weights))].tolist()
    q_min, q_max = quant_range(bits, symmetric=True)
    codes = torch.arange(q_min, q_max + 1, dtype=torch.float32)
    tensor_scale, _ = qparams(weight, Scheme(bits, True, False))
    channel_scales, _ = qparams(weight, Scheme(bits, True, True))
    typical = channel_scales.sort().values[len(channel_scales) // 2]
    out["grid/per_tensor"] = (codes * tensor_scale).tolist()
    out["grid/per_channel_typical"] = (codes * typical).tolist()
    return out
