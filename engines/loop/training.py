"""The instrumented training loop: one generator that every single-process scenario uses.

`train()` runs plain PyTorch steps. What is minimized is an *objective*: a function of one
batch that returns the loss (and, when asked, a few metrics as tensors) — cross-entropy
on a classifier (`supervised`), distillation's soft/hard mix, DPO's pairwise loss. Around
it the loop adds what every scenario wants measured and nothing it does not:

- on logging steps, a `StepRecord` of floats: the loss, the objective's metrics, the
  learning rate the step used, a `LayerProbe`'s per-layer statistics when one is given,
  and whatever the `on_log` hook measures (dead units, soft-target gradients, exact KL);
- on every other step a bare `None`, so a consumer can check Stop after each step and
  advance several arms side by side, one step each;
- the one divergence rule (`engines.loop.records.divergence`): a non-finite loss at any step,
  or a non-finite logged value, ends the loop with a `Diverged` record. Divergence is a
  result to show, not a crash.

`on_log(step)` runs after the backward pass and before the optimizer step: it sees this
step's gradients and the weights the step's forward pass used. With `window=True` the
objective's metrics are averaged over the steps since the last log (as trl logs them)
instead of taken at the logging step alone.

The consumer may stop iterating at any time (that is how Stop works); the probe's hooks
are removed in `finally` either way. Importing this module changes no global state:
thread counts are set by whoever trains (`engines.loop.runtime`).
"""
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Union

import torch
from torch import nn

from engines.loop.probes import LayerProbe, layer_name
from engines.loop.records import Diverged, StepRecord, divergence

__all__ = ["Diverged", "StepRecord", "accuracy", "log_every_for", "supervised", "train"]

Batch = tuple[torch.Tensor, torch.Tensor]
Metrics = dict[str, torch.Tensor]
Objective = Callable[[object, bool], Union[torch.Tensor, tuple[torch.Tensor, Metrics]]]  # (batch, logging)
MetricFn = Callable[[torch.Tensor, torch.Tensor], Metrics]
LogHook = Callable[[int], Mapping[str, Union[float, torch.Tensor]]]


def log_every_for(steps: int, max_points: int = 100) -> int:
    """Log often enough to draw a curve, rarely enough that logging stays cheap."""
    return max(1, math.ceil(steps / max_points))


def accuracy(logits: torch.Tensor, targets: torch.Tensor) -> Metrics:
    return {"accuracy": (logits.argmax(dim=1) == targets).float().mean()}


def supervised(model: nn.Module, loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
               metric_fn: MetricFn | None = accuracy) -> Objective:
    """The objective of a model fitted to (input, target) batches: `loss_fn(model(x), y)`;
    `metric_fn` of the outputs only on logging steps."""
    def objective(batch: Batch, logging: bool):
        x, y = batch
        output = model(x)
        loss = loss_fn(output, y)
        if not logging or metric_fn is None:
            return loss
        return loss, metric_fn(output.detach(), y)
    return objective


def train(model: nn.Module | None, optimizer: torch.optim.Optimizer, batches: Iterator, objective: Objective,
          steps: int, *, probe: LayerProbe | None = None, log_every: int = 1,
          scheduler: torch.optim.lr_scheduler.LRScheduler | None = None, on_log: LogHook | None = None,
          window: bool = False) -> Iterator[StepRecord | Diverged | None]:
    """Train for `steps` steps; yield a StepRecord every `log_every` steps and at the last,
    `None` after every other step, or a `Diverged` as the last item.

    `model` (when given) is put in train mode first. A `scheduler` steps after each optimizer
    step, once that step's rate has been recorded: the logged `lr` is the rate the step used."""
    if model is not None:
        model.train()
    windowed: list[Metrics] = []
    try:
        for step in range(steps):
            logging = step % log_every == 0 or step == steps - 1
            batch = next(batches)
            if probe is not None:
                probe.armed = logging
            loss, values = _split(objective(batch, logging or window))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            loss_value = loss.item()  # one sync a step: the divergence check
            if not math.isfinite(loss_value):
                yield divergence(step, {"loss": loss_value})
                return
            if window:
                windowed.append({"loss": loss.detach(), **values})
            if not logging:
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                yield None
                continue
            logged = _window_mean(windowed) if window else {"loss": loss.detach(), **values}
            windowed.clear()
            per_layer: Metrics = {}
            if probe is not None:
                per_layer["grad_norm"] = probe.grad_norms()
                per_layer.update(probe.activation_stats())
                probe.snapshot()
            hooked = dict(on_log(step)) if on_log is not None else {}
            optimizer.step()
            if probe is not None:
                per_layer["update_ratio"] = probe.update_ratios()
            metrics = _flatten({**logged, **hooked}, per_layer)
            metrics["lr"] = float(optimizer.param_groups[0]["lr"])
            if scheduler is not None:
                scheduler.step()
            diverged = divergence(step, metrics)
            yield diverged or StepRecord(step, metrics)
            if diverged is not None:
                return
    finally:
        if probe is not None:
            probe.armed = False


def _split(outcome) -> tuple[torch.Tensor, Metrics]:
    return (outcome, {}) if isinstance(outcome, torch.Tensor) else outcome


def _window_mean(window: list[Metrics]) -> Metrics:
    """Each metric averaged over the steps of one log window."""
    return {name: torch.stack([values[name].double().mean() for values in window]).mean() for name in window[0]}


def _flatten(values: Mapping[str, float | torch.Tensor], per_layer: Metrics) -> dict[str, float]:
    """One `.tolist()` for everything logged this step: scalars plus `name/layer_XX` per layer.
    Plain floats (a hook's own `.item()`s) pass through."""
    tensors = {name: value for name, value in values.items() if isinstance(value, torch.Tensor)}
    names = list(tensors)
    flat = [torch.stack([tensors[n].double().reshape(()) for n in names])] if names else []
    layer_names: list[str] = []
    for kind, tensor in per_layer.items():
        layer_names += [f"{kind}/{layer_name(i)}" for i in range(len(tensor))]
        flat.append(tensor.double())
    numbers = torch.cat(flat).tolist() if flat else []
    flat_values = dict(zip(names + layer_names, numbers))
    return {**{name: float(v) for name, v in values.items() if name not in tensors}, **flat_values}
