"""The instrumented training loop: one generator shared by every scenario.

`train()` runs plain PyTorch steps and, on logging steps only, yields a `StepRecord` of
floats: loss, learning rate, task metrics and, when a `LayerProbe` is given, per-layer
gradient norms, activation statistics and update-to-weight ratios. A non-finite loss or
gradient ends the loop with a `Diverged` record instead of an exception: divergence is a
result to show, not a crash.

The consumer may stop iterating at any time (that is how Stop works); the probe's hooks
are removed in `finally` either way.
"""
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn

from engines.probes import LayerProbe, layer_name


@dataclass(frozen=True)
class StepRecord:
    step: int
    metrics: dict[str, float]


@dataclass(frozen=True)
class Diverged:
    step: int
    message: str


# Our models are tiny: intra-op threads cost more in synchronisation than they gain, and
# they fight the UI thread and the other runs for two cores (measured: a default run next
# to a redrawing page took 5.4 s with 2 threads, 2.6 s with 1). EXPLORER_TORCH_THREADS overrides.
torch.set_num_threads(int(os.environ.get("EXPLORER_TORCH_THREADS", "1")))

# The first optimizer built in a process costs ~1 s (torch imports its compile machinery
# lazily). Pay it here, at import, rather than between a person's Run click and the first point.
torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0)

Batch = tuple[torch.Tensor, torch.Tensor]
MetricFn = Callable[[torch.Tensor, torch.Tensor], dict[str, torch.Tensor]]


def log_every_for(steps: int, max_points: int = 100) -> int:
    """Log often enough to draw a curve, rarely enough that logging stays cheap."""
    return max(1, math.ceil(steps / max_points))


def accuracy(logits: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"accuracy": (logits.argmax(dim=1) == targets).float().mean()}


def train(model: nn.Module, optimizer: torch.optim.Optimizer, batches: Iterator[Batch],
          loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], steps: int, *,
          probe: LayerProbe | None = None, log_every: int = 1,
          metric_fn: MetricFn | None = accuracy,
          scheduler: torch.optim.lr_scheduler.LRScheduler | None = None) -> Iterator[StepRecord | Diverged]:
    """Train for `steps` steps; yield a StepRecord every `log_every` steps and at the last.

    A `scheduler` steps after each optimizer step, once that step's rate has been recorded:
    the logged `lr` is the rate the step used."""
    model.train()
    try:
        for step in range(steps):
            logging = step % log_every == 0 or step == steps - 1
            x, y = next(batches)
            if probe is not None:
                probe.armed = logging
            output = model(x)
            loss = loss_fn(output, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            loss_value = loss.item()
            if not math.isfinite(loss_value):
                yield Diverged(step, f"diverged at step {step}: loss is {loss_value}")
                return
            if not logging:
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                continue
            values: dict[str, torch.Tensor] = {"loss": loss.detach()}
            if metric_fn is not None:
                values.update(metric_fn(output.detach(), y))
            per_layer: dict[str, torch.Tensor] = {}
            if probe is not None:
                per_layer["grad_norm"] = probe.grad_norms()
                per_layer.update(probe.activation_stats())
                probe.snapshot()
            optimizer.step()
            if probe is not None:
                per_layer["update_ratio"] = probe.update_ratios()
            metrics = _flatten(values, per_layer)
            metrics["lr"] = float(optimizer.param_groups[0]["lr"])
            if scheduler is not None:
                scheduler.step()
            bad = [name for name, value in metrics.items() if not math.isfinite(value)]
            if bad:
                yield Diverged(step, f"diverged at step {step}: {bad[0]} is not finite")
                return
            yield StepRecord(step, metrics)
    finally:
        if probe is not None:
            probe.armed = False


def _flatten(values: dict[str, torch.Tensor], per_layer: dict[str, torch.Tensor]) -> dict[str, float]:
    """One `.tolist()` for everything logged this step: scalars plus `name/layer_XX` per layer."""
    names = list(values)
    flat = [torch.stack([values[n].double() for n in names])] if names else []
    layer_names: list[str] = []
    for kind, tensor in per_layer.items():
        layer_names += [f"{kind}/{layer_name(i)}" for i in range(len(tensor))]
        flat.append(tensor.double())
    numbers = torch.cat(flat).tolist() if flat else []
    return dict(zip(names + layer_names, numbers))
