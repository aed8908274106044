"""K arms that share an architecture, trained as one model: `train_arms`, the batched twin of `train`.

A sweep (β values, temperatures, τ, regularizers, seeds) trains K arms that differ only in
numbers. Sequentially that costs K runs; our models are tiny and a step on two cores is
mostly fixed per-op cost, so one model whose every weight has a leading arm dimension
(`engines.loop.stacked`) trains all K for about the cost of one (bench/sweep_bench.py).

The loop is `engines.loop.training.train`, step for step, for every arm at once:

- the objective returns one loss per arm, (K,), and metrics as per-arm values; the loop
  back-propagates their masked sum: ∂(Σ_k L_k)/∂θ_k = ∂L_k/∂θ_k, so each arm gets exactly
  its own gradient (every op is per arm: no arm's number ever meets another's);
- the optimizer keeps per-arm state: a torch.optim optimizer over the stacked tensors when
  the arms share its settings (it is elementwise), `engines.loop.stacked_optim` when their
  learning rates, decays or momenta differ;
- the divergence rule is applied per arm. A diverged arm ends with its own `Diverged` ("arm
  β=5 diverged at step 37"); the rest go on. From then on it is masked out: its loss leaves
  the sum, its gradients and weights are zeroed, so a NaN never reaches another arm's
  numbers (and never slows the step down);
- one `.tolist()` per logged step for every arm's metrics.

Each step yields `None` (nothing to report) or a list of `(arm_name, StepRecord | Diverged)`:
the driver (scenarios/driver.py) reports each under its own name, so the live view draws
every arm's points as they come. An arm's records equal what `train` yields for it alone
(to rounding: tests/test_batched.py and each scenario's test compare them).
"""
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Union

import torch
from torch import Tensor

from engines.loop.probes import layer_name
from engines.loop.records import Diverged, StepRecord, divergence
from engines.loop.stacked import ArmProbe

__all__ = ["ArmItems", "arm_cost", "per_arm_metrics", "train_arms"]

ArmItems = list[tuple[str, StepRecord | Diverged]]
# Per-arm values: a (K,) tensor, a list of K floats (None: this arm has no such metric), or one number for every arm.
ArmValue = Union[Tensor, Sequence[Union[float, None]], float]
ArmObjective = Callable[[object, bool], Union[Tensor, tuple[Tensor, Mapping[str, ArmValue]]]]
ArmLogHook = Callable[[int, Tensor], Mapping[str, ArmValue]]  # (step, alive mask (K,)) -> metrics


def arm_cost(arms: int) -> float:
    """A batched step's time relative to one arm's step, for the progress bar (bench/sweep_bench.py)."""
    return 1.0 + 0.15 * (arms - 1)


def train_arms(names: Sequence[str], params: Sequence[Tensor], optimizer: torch.optim.Optimizer, batches: Iterator,
               objective: ArmObjective, steps: int, *, probe: ArmProbe | None = None, log_every: int = 1,
               on_log: ArmLogHook | None = None, window: bool = False) -> Iterator[ArmItems | None]:
    """Train the arms `names` (stacked in `params`, leading dimension K) for `steps` steps.

    Yields per step a list of the arms' records (a `StepRecord` each on logging steps; a
    `Diverged` for an arm that dies) or `None`, and returns once the steps are done or every
    arm has diverged. `on_log(step, alive)` runs after the backward pass and before the step."""
    names = list(names)
    alive = [True] * len(names)
    windowed: list[dict[str, Tensor]] = []
    for step in range(steps):
        logging = step % log_every == 0 or step == steps - 1
        losses, values = _split(objective(next(batches), logging or window))
        optimizer.zero_grad(set_to_none=True)
        # Σ_k L_k: each arm's gradient is its own (∂/∂θ_k of the sum is ∂L_k/∂θ_k); a dead arm's loss leaves it
        (losses.sum() if all(alive) else torch.where(torch.tensor(alive), losses, torch.zeros_like(losses)).sum()).backward()
        items: ArmItems = []
        for k, value in enumerate(losses.tolist()):  # one sync a step: the divergence check
            if alive[k] and not math.isfinite(value):
                items.append((names[k], divergence(step, {"loss": value})))
                alive[k] = False
        if not any(alive):
            yield items
            return
        if window:
            windowed.append({"loss": losses.detach(), **{n: v for n, v in values.items() if isinstance(v, Tensor)}})
        if not logging:
            _step(optimizer, params, alive)
            yield items or None
            continue
        logged = _window_mean(windowed) if window else {"loss": losses.detach(), **values}
        windowed.clear()
        per_layer: dict[str, Tensor] = {}
        if probe is not None:
            per_layer["grad_norm"] = probe.grad_norms()
            probe.snapshot()
        hooked = dict(on_log(step, torch.tensor(alive))) if on_log is not None else {}
        _step(optimizer, params, alive)
        if probe is not None:
            per_layer["update_ratio"] = probe.update_ratios()
        lrs = optimizer.param_groups[0]["lr"]
        records = per_arm_metrics(len(names), {**logged, **hooked, "lr": lrs}, per_layer)
        for k, metrics in enumerate(records):
            if not alive[k]:
                continue
            diverged = divergence(step, metrics)
            items.append((names[k], diverged or StepRecord(step, metrics)))
            if diverged is not None:
                alive[k] = False
        yield items
        if not any(alive):
            return


def _split(outcome) -> tuple[Tensor, Mapping[str, ArmValue]]:
    return (outcome, {}) if isinstance(outcome, Tensor) else outcome


@torch.no_grad()
def _step(optimizer: torch.optim.Optimizer, params: Sequence[Tensor], alive: list[bool]) -> None:
    """The optimizer's step with every diverged arm masked out: its gradients zeroed before (no NaN
    reaches the optimizer's state), its weights zeroed after (it computes harmless numbers from then on)."""
    if all(alive):
        optimizer.step()
        return
    dead = ~torch.tensor(alive)
    for p in params:
        if p.grad is not None:
            p.grad[dead] = 0.0
    optimizer.step()
    for p in params:
        p[dead] = 0.0


def _window_mean(window: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Each per-arm metric averaged over the steps of one log window, as `train(window=True)` does."""
    return {name: torch.stack([values[name].double() for values in window]).mean(dim=0) for name in window[0]}


def per_arm_metrics(arms: int, values: Mapping[str, ArmValue], per_layer: Mapping[str, Tensor] = {}
                    ) -> list[dict[str, float]]:
    """One dict of floats per arm, with one `.tolist()` for every tensor: per-arm tensors (K,),
    per-arm lists (None: the arm has no such metric), shared numbers; per-layer (K, layers) as
    `name/layer_XX`."""
    tensors = {n: v for n, v in values.items() if isinstance(v, Tensor) and v.dim() > 0}
    names = list(tensors)
    blocks = [torch.stack([tensors[n].double().reshape(arms) for n in names], dim=1)] if names else []
    layer_names: list[str] = []
    for kind, tensor in per_layer.items():  # (K, layers)
        layer_names += [f"{kind}/{layer_name(i)}" for i in range(tensor.shape[1])]
        blocks.append(tensor.double())
    rows = torch.cat(blocks, dim=1).tolist() if blocks else [[] for _ in range(arms)]
    records = [dict(zip(names + layer_names, row)) for row in rows]
    for name, value in values.items():
        if name in tensors:
            continue
        if isinstance(value, Tensor):  # a 0-d tensor: the same for every arm
            value = float(value)
        if isinstance(value, (int, float)):
            value = [value] * arms
        for record, one in zip(records, value):
            if one is not None:
                record[name] = float(one)
    return records
