"""What backward keeps from forward, and two ways to need less of it at once.

**Saved tensors.** Autograd keeps, for every op, the tensors its backward will need (a
Linear its input, a tanh its output). `torch.autograd.graph.saved_tensors_hooks` sees each
one as it is packed; `SavedBytes` counts the bytes of the distinct storages held (a tensor
saved by two ops is held once), and their peak, releasing a storage when autograd drops its
last packed reference. Parameters are not counted: they are kept anyway.

**Activation checkpointing** (Chen et al. 2016). `torch.utils.checkpoint.checkpoint` runs a
segment without saving anything inside it and keeps only its input; backward runs the
segment's forward again to get what it needs. With n equal layers saving a bytes each cut
into k segments, forward leaves ≈ k·a held, and backward adds one recomputed segment,
(n/k)·a: peak ≈ (k + n/k)·a, smallest at k = √n, for about one extra forward pass. We use
`use_reentrant=True` here because its recomputation runs as ordinary autograd inside the
checkpoint's backward, where our outer hooks count it; the non-reentrant variant (torch's
recommended default) stores recomputed tensors out of their sight. The reentrant variant
needs an input that requires grad, so the batch does.

**Gradient accumulation.** K micro-batches of B/K, each loss divided by K, backward after
each: for a loss that is a mean over examples the summed gradient equals the full batch's
(to float rounding). BatchNorm normalizes with each micro-batch's own statistics, so with
it the two differ.
"""
import statistics
import time
import weakref
from collections.abc import Iterator
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from engines.loop.records import StepRecord

N_CLASSES = 8


class SavedBytes:
    """Bytes of the distinct non-parameter storages autograd holds for backward, now and at the peak."""

    def __init__(self, exclude: list[torch.Tensor]) -> None:
        self.excluded = {p.untyped_storage().data_ptr() for p in exclude}
        self.held: dict[int, list[int]] = {}  # storage pointer -> [packed references, bytes]
        self.bytes = self.peak = 0

    def hooks(self) -> torch.autograd.graph.saved_tensors_hooks:
        return torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)

    def _pack(self, tensor: torch.Tensor):
        key = tensor.untyped_storage().data_ptr()
        if key in self.excluded:
            return tensor
        entry = self.held.setdefault(key, [0, tensor.untyped_storage().nbytes()])
        if entry[0] == 0:
            self.bytes += entry[1]
            self.peak = max(self.peak, self.bytes)
        entry[0] += 1
        box = _Packed(tensor)
        weakref.finalize(box, self._release, key)  # autograd dropped this saved reference
        return box

    @staticmethod
    def _unpack(packed):
        return packed if isinstance(packed, torch.Tensor) else packed.tensor

    def _release(self, key: int) -> None:
        entry = self.held[key]
        entry[0] -= 1
        if entry[0] == 0:
            self.bytes -= entry[1]
            del self.held[key]


class _Packed:
    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


def deep_mlp(layers: int, width: int, seed: int) -> nn.Sequential:
    generator = torch.Generator().manual_seed(seed)
    blocks = []
    for _ in range(layers):
        linear = nn.Linear(width, width)
        with torch.no_grad():
            linear.weight.uniform_(-width ** -0.5, width ** -0.5, generator=generator)
            linear.bias.zero_()
        blocks.append(nn.Sequential(linear, nn.Tanh()))
    return nn.Sequential(*blocks)


def checkpointed_step(model: nn.Sequential, x: torch.Tensor, segments: int | None,
                      counter: SavedBytes | None = None) -> int:
    """One forward and backward of `model` cut into `segments` checkpointed segments (None: no
    checkpointing). Returns the bytes held for backward when forward ended (0 without a counter)."""
    model.zero_grad(set_to_none=True)
    with counter.hooks() if counter is not None else nullcontext():
        h = x
        size = len(model) // segments if segments else len(model)
        for start in range(0, len(model), size):
            segment = model[start:start + size]
            h = checkpoint(segment, h, use_reentrant=True) if segments else segment(h)
        loss = h.pow(2).mean()
        after_forward = counter.bytes if counter is not None else 0
        loss.backward()
    return after_forward


def checkpoint_sweep(layers: int, width: int, batch: int, repeats: int, seed: int) -> Iterator[StepRecord]:
    """Per k (no checkpointing first, then every divisor of `layers`): the bytes held after
    forward and at the peak of backward, the model (k + n/k)·a, and the median step time."""
    model = deep_mlp(layers, width, seed)
    x = torch.randn(batch, width, generator=torch.Generator().manual_seed(seed + 1)).requires_grad_()
    activation = batch * width * x.element_size()  # a: the bytes of one layer's output
    choices = [None] + [k for k in range(1, layers + 1) if layers % k == 0]
    for index, segments in enumerate(choices):
        counter = SavedBytes(list(model.parameters()))
        after_forward = checkpointed_step(model, x, segments, counter)
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            checkpointed_step(model, x, segments)
            times.append(time.perf_counter() - started)
        held = (segments or layers) + 1  # the x and output the loss keeps, or k segment inputs and the output
        model_peak = (segments + layers // segments) * activation if segments else (layers + 1) * activation
        yield StepRecord(index, {"segments": float(segments or 0), "saved_after_forward_bytes": float(after_forward),
                                 "saved_peak_bytes": float(counter.peak), "model_peak_bytes": float(model_peak),
                                 "model_after_forward_bytes": float(held * activation),
                                 "step_time_ms": 1000 * statistics.median(times)})


# --- gradient accumulation ------------------------------------------------------------------------
def small_net(width: int, batchnorm: bool, seed: int) -> nn.Sequential:
    generator = torch.Generator().manual_seed(seed)
    net = nn.Sequential(nn.Linear(16, width), nn.BatchNorm1d(width) if batchnorm else nn.Identity(), nn.Tanh(),
                        nn.Linear(width, N_CLASSES))
    with torch.no_grad():  # weights and biases from the seed: nn.Linear's own init draws from the global RNG
        for layer in (m for m in net if isinstance(m, nn.Linear)):
            bound = layer.in_features ** -0.5
            layer.weight.uniform_(-bound, bound, generator=generator)
            layer.bias.uniform_(-bound, bound, generator=generator)
    return net


def accumulated_gradient(net: nn.Module, x: torch.Tensor, y: torch.Tensor, micro_batches: int,
                         divide: bool = True) -> torch.Tensor:
    """The gradient after backward on each of `micro_batches` equal slices (each loss / K when
    `divide`), accumulated in .grad as a training loop with accumulation does; flattened."""
    net.zero_grad(set_to_none=True)
    for xs, ys in zip(x.chunk(micro_batches), y.chunk(micro_batches)):
        loss = F.cross_entropy(net(xs), ys)  # a mean over the micro-batch
        (loss / micro_batches if divide else loss).backward()
    return torch.cat([p.grad.reshape(-1) for p in net.parameters()])


VARIANTS = {"mean loss ÷ K": (False, True), "mean loss, not ÷ K": (False, False), "BatchNorm, ÷ K": (True, True)}


def accumulation_sweep(batch: int, width: int, seed: int, largest: int = 16) -> Iterator[StepRecord]:
    """K = 1, 2, 4, … ≤ `largest`: per variant ‖g_K − g_full‖/‖g_full‖ and whether torch.allclose holds."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 16, generator=generator)
    y = torch.randint(0, N_CLASSES, (batch,), generator=generator)
    nets = {name: small_net(width, batchnorm, seed) for name, (batchnorm, _) in VARIANTS.items()}
    full = {name: accumulated_gradient(net, x, y, 1) for name, net in nets.items()}
    k = 1
    while k <= largest and batch % k == 0 and batch // k >= 2:  # BatchNorm needs two examples per micro-batch
        metrics = {"micro_batches": float(k)}
        for name, (_, divide) in VARIANTS.items():
            grad = accumulated_gradient(nets[name], x, y, k, divide)
            metrics[f"rel_diff/{name}"] = float((grad - full[name]).norm() / full[name].norm())
            metrics[f"allclose/{name}"] = float(torch.allclose(grad, full[name], rtol=1e-5, atol=1e-7))
        yield StepRecord(k, metrics)
        k *= 2
