"""A small MLP quantized after training (PTQ) and during it (QAT): its task, its outlier channels, its arms.

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
∂x̂/∂x = 1 inside the clamp range, 0 outside. On QAT's logged steps `straight_through`
measures it: the share of each layer's weights the mask passes, and how far ∂L/∂w is from
mask·∂L/∂ŵ (0: the gradient is exactly the STE's).

`FloatModel` is what every arm shares: its `float_arm` trains the model (the first phase),
rescales and inspects it; `ptq_arm` and `qat_arm` read it in later phases. Every arm
yields the shared loop's records (`engines.loop.training.train`) or one record per bit width
(step = bits).
"""
import copy
import math
from collections.abc import Callable, Iterator
from functools import cached_property

import torch
import torch.nn.functional as F
from torch import nn

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import supervised, train
from engines.numerics.quantization import Scheme, clamp_mask, fake_quantize, make_observer, typical_qparams, weight_error
from engines.supervised.models import DeepMLP

BITS = range(2, 9)   # every width the inspection records (the figures pick one)
MAX_WEIGHTS = 4096   # weights per layer kept for the histogram (evenly subsampled past this)
ActivationBits = Callable[[int], int | None]  # weight bits -> activation bits (None: float inputs)


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


def layer_key(index: int) -> str:
    return f"layer_{index + 1:02d}"


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
    weights as they train). With `keep_quantized` set, a forward pass keeps each layer's
    fake-quantized weight ŵ and its gradient (for `straight_through`).
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
        self.keep_quantized = False
        self.quantized: list[torch.Tensor] = []

    def _fake_quantize(self, x: torch.Tensor, observer: nn.Module, scheme: Scheme) -> torch.Tensor:
        if self.training:
            observer(x.detach())
        scale, zero_point = observer.calculate_qparams()
        return fake_quantize(x, scale, zero_point.to(torch.int32), scheme)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x  # (batch, features)
        last = len(self.layers) - 1
        self.quantized = []
        for i, layer in enumerate(self.layers):
            if self.input_observers is not None:
                h = self._fake_quantize(h, self.input_observers[i], self.activation_scheme)
            weight = layer.weight
            if self.weight_observers is not None:
                weight = self._fake_quantize(weight, self.weight_observers[i], self.weight_scheme)
                if self.keep_quantized and weight.requires_grad:
                    weight.retain_grad()
                    self.quantized.append(weight)
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


def ptq_metrics(model: DeepMLP, weights: Scheme, activation_bits: int | None, task: MixtureTask) -> dict[str, float]:
    """One PTQ arm at one bit width: test accuracy and loss, and each layer's weight error and
    (scale, zero_point) — of the tensor, or per channel of the median-scale channel."""
    metrics = test_metrics(post_training_quantize(model, weights, activation_bits, task.calibration_x), task)
    for i, layer in enumerate(layers_of(model)):
        for name, value in weight_error(layer.weight, weights).items():
            metrics[f"weight_{name}/{layer_key(i)}"] = value
        metrics[f"scale/{layer_key(i)}"], metrics[f"zero_point/{layer_key(i)}"] = typical_qparams(layer.weight, weights)
    return metrics


@torch.no_grad()
def straight_through(student: FakeQuantMLP, bits: int) -> dict[str, torch.Tensor]:
    """Per layer, after a backward pass: the share of weights inside the clamp range (the STE
    passes their gradient; it is 0 for the clamped rest), and max |∂L/∂w − mask·∂L/∂ŵ|."""
    out = {}
    for i, (layer, observer, quantized) in enumerate(zip(student.layers, student.weight_observers, student.quantized)):
        scale, zero_point = observer.calculate_qparams()  # what this step's forward used
        mask = clamp_mask(layer.weight, scale, zero_point.to(torch.int32), student.weight_scheme)
        out[f"ste_pass/bits_{bits:02d}/{layer_key(i)}"] = mask.float().mean()
        out[f"ste_gap/bits_{bits:02d}/{layer_key(i)}"] = (layer.weight.grad - mask * quantized.grad).abs().max()
    return out


class FloatModel:
    """The float model every arm quantizes, built and trained by `float_arm` (the first phase)."""

    def __init__(self, task: Callable[[], MixtureTask], width: int, seed: int) -> None:
        self._task, self.width, self.seed = task, width, seed

    @cached_property
    def task(self) -> MixtureTask:
        return self._task()

    @cached_property
    def model(self) -> DeepMLP:
        return DeepMLP(self.task.n_features, self.width, 2, self.task.n_classes, activation="relu", seed=self.seed)

    def float_arm(self, steps: int, lr: float, batch_size: int, log_every: int, spread: float,
                  n_channels: int) -> Iterator[StepRecord | Diverged | None]:
        """Adam on cross-entropy; then the outlier channels, the test metrics at the last step, and the inspection."""
        model, task = self.model, self.task
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        for item in train(model, optimizer, task.batches(batch_size), supervised(model, F.cross_entropy), steps,
                          log_every=log_every):
            yield item
            if isinstance(item, Diverged):
                return  # nothing left to quantize
        rescale_channels(model, spread, n_channels, torch.Generator().manual_seed(self.seed + 7))
        yield StepRecord(steps - 1, test_metrics(model, task))
        yield from inspection(model)

    def ptq_arm(self, symmetric: bool, per_channel: bool, bits: list[int],
                activation_bits: ActivationBits) -> Iterator[StepRecord]:
        for b in bits:
            yield StepRecord(b, ptq_metrics(self.model, Scheme(b, symmetric, per_channel), activation_bits(b), self.task))

    def qat_arm(self, weights: Scheme, activation_bits: int | None, steps: int, lr: float, batch_size: int,
                log_every: int) -> Iterator[StepRecord | Diverged | None]:
        """QAT at one bit width: fine-tune a copy of the float model through fake-quant, recording
        `qat_loss/bits_BB` and the STE per logged step; then its test metrics at step = bits."""
        b, task = weights.bits, self.task
        student = FakeQuantMLP(copy.deepcopy(self.model), weights, activation_bits, moving_average=True)
        with torch.no_grad():  # start every moving average at the calibration range, where PTQ starts
            student.train()
            student(task.calibration_x)

        def objective(batch: tuple[torch.Tensor, torch.Tensor], logging: bool) -> torch.Tensor:
            x, y = batch
            student.keep_quantized = logging
            return F.cross_entropy(student(x), y)

        optimizer = torch.optim.Adam(student.parameters(), lr=lr)
        for item in train(student, optimizer, task.batches(batch_size, stream=1), objective, steps,
                          log_every=log_every, on_log=lambda step: straight_through(student, b)):
            if isinstance(item, Diverged):
                yield Diverged(b, f"QAT at {b} bits {item.message}")  # step = bits, as its other records
                return
            if isinstance(item, StepRecord):
                item = StepRecord(item.step, {f"qat_loss/bits_{b:02d}": item.metrics["loss"],
                                              **{k: v for k, v in item.metrics.items() if k.startswith("ste_")}})
            yield item
        yield StepRecord(b, test_metrics(student.eval(), task))


@torch.no_grad()
def inspection(model: DeepMLP) -> Iterator[StepRecord]:
    """What the histogram and range plots draw, for every layer and width (the figures pick):
    per bit width (step = bits) the symmetric per-tensor Δ and a typical (median-range)
    channel's per-channel Δ; per index (step = index) each layer's per-channel max|w| and its
    weights, evenly subsampled past MAX_WEIGHTS."""
    for b in BITS:
        scales = {}
        for i, linear in enumerate(layers_of(model)):
            scales[f"grid_scale/per_tensor/{layer_key(i)}"] = typical_qparams(linear.weight, Scheme(b, True, False))[0]
            scales[f"grid_scale/per_channel_typical/{layer_key(i)}"] = typical_qparams(linear.weight,
                                                                                     Scheme(b, True, True))[0]
        yield StepRecord(b, scales)
    columns: dict[str, list[float]] = {}
    for i, linear in enumerate(layers_of(model)):
        columns[f"channel_absmax/{layer_key(i)}"] = linear.weight.abs().amax(dim=1).tolist()
        flat = linear.weight.flatten()
        columns[f"weights/{layer_key(i)}"] = flat[:: max(1, math.ceil(len(flat) / MAX_WEIGHTS))].tolist()
    for index in range(max(map(len, columns.values()))):  # step = channel / weight index
        yield StepRecord(index, {name: values[index] for name, values in columns.items() if index < len(values)})
