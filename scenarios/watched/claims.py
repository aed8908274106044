"""What a watched run's records say, as numbers re-derived when a claim is checked.

Each function reads one fact from the records of one arm: a module's median update-to-weight
ratio, the loss spikes and where they began, the first non-finite value and the module it was in.
The diagnosis (diagnosis.py) words them; its claims call these again in `holds()`, so a sentence
is true of the records it was read from, at any config.
"""
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scenarios.claims import Claim, fmt
from scenarios.records import Records

SPIKE_RATIO = 2.0     # a spike: the loss above twice the median of the steps before it…
SPIKE_RISE = 0.1      # …by at least a tenth of the loss at the start (the median of its first steps)
SPIKE_WINDOW = 20     # the median is over the last this-many recorded steps before the rise
SPIKE_HISTORY = 5     # and needs at least this many
ORDER = ("act_std", "grad_norm", "update_ratio", "weight_norm")  # where a NaN shows first within a step


def layer_metric(prefix: str, layer: int) -> str:
    return f"{prefix}/layer_{layer:02d}"


def median_of(arm: str, prefix: str, layer: int) -> Callable[[Records], float | None]:
    """records -> the median over logged steps of one module's `prefix` (finite values only)."""
    def compute(records: Records) -> float | None:
        values = records.values(arm, layer_metric(prefix, layer))
        values = values[np.isfinite(values)]
        return float(np.median(values)) if len(values) else None
    return compute


def last_of(arm: str, prefix: str, layer: int) -> Callable[[Records], float | None]:
    return lambda records: records.last(arm, layer_metric(prefix, layer))


@dataclass(frozen=True)
class Spike:
    start: int        # the step its rise began
    peak_step: int
    peak: float
    baseline: float   # the median of the SPIKE_WINDOW recorded steps before `start` (> 0)


def spikes(records: Records, arm: str, metric: str = "loss") -> list[Spike]:
    """Every episode where the loss rose above SPIKE_RATIO × its recent median (and by SPIKE_RISE of
    its starting level): the step its rise began (walking back while each earlier step was lower and still above
    the median), its peak
    before it came back under the line, and the median of the steps before the rise began."""
    series = records.series(arm, metric)
    series = series[np.isfinite(series.to_numpy())]
    values, steps = series.to_numpy(), series.index.to_numpy()
    if len(values) <= SPIKE_HISTORY:
        return []
    rise = SPIKE_RISE * abs(float(np.median(values[:SPIKE_HISTORY])))  # a tenth of where the loss started
    found: list[Spike] = []
    i = SPIKE_HISTORY
    while i < len(values):
        line = SPIKE_RATIO * float(np.median(values[max(0, i - SPIKE_WINDOW):i]))
        if values[i] > line > 0 and values[i] - line / SPIKE_RATIO > rise:
            end = i
            while end + 1 < len(values) and values[end + 1] > line:
                end += 1
            start, before = i, line / SPIKE_RATIO
            while start > 1 and before < values[start - 1] < values[start] and (
                    not found or steps[start - 1] > found[-1].peak_step):
                start -= 1  # back to the first step of the rise above the median
            top = i + int(np.argmax(values[i:end + 1]))
            baseline = float(np.median(values[max(0, start - SPIKE_WINDOW):start]))
            found.append(Spike(int(steps[start]), int(steps[top]), float(values[top]), baseline))
            i = end + 1 + SPIKE_HISTORY  # the next one is judged against steps after this one
        else:
            i += 1
    return found


@dataclass(frozen=True)
class SpikeClaim(Claim):
    """`the loss spiked to 4.1 at step 130, from a median of 0.32 before step 127, where it began`."""
    arm: str
    spike: Spike

    def __str__(self) -> str:
        s = self.spike
        began = f"rising from step {s.start}" if s.start != s.peak_step else "in that one step"
        return (f"the loss spiked to {fmt(s.peak)} at step {s.peak_step}, {began} ({fmt(s.peak / s.baseline)}× the "
                f"median {fmt(s.baseline)} of the steps before)")

    def holds(self, records: Records) -> bool:
        return self.spike in spikes(records, self.arm)


@dataclass(frozen=True)
class NonFinite:
    loss_step: int | None   # the first step whose loss is NaN or infinite
    step: int | None        # the first logged step with a non-finite per-module value
    metric: str = ""        # which (act_std, grad_norm, …)
    layer: int = 0          # in which module: the first in forward order for activations and
                            # updates, the deepest for gradients (backward runs from the output)
    value: str = ""       # 'nan', 'inf' or '-inf' (text: NaN equals nothing, not even itself)


def first_nonfinite(records: Records, arm: str) -> NonFinite | None:
    """The first non-finite loss, and the first logged step with a non-finite module value: which value,
    in which module. (Read from the rows: `Records.layers` keeps complete steps only.)"""
    loss = records.series(arm, "loss")
    bad = loss[~np.isfinite(loss.to_numpy())]
    loss_step = int(bad.index[0]) if len(bad) else None
    frame = records.frame
    if frame.empty:
        return None
    rows = frame[(frame["arm"] == arm) & frame["metric"].str.contains("/layer_", regex=False)]
    rows = rows[~np.isfinite(rows["value"].to_numpy(dtype=float))]
    rows = rows[rows["metric"].str.split("/").str[0].isin(ORDER)]
    if rows.empty:
        return NonFinite(loss_step, None) if loss_step is not None else None
    step = int(rows["step"].min())
    at = rows[rows["step"] == step]
    prefixes = at["metric"].str.split("/").str[0]
    prefix = min(prefixes, key=ORDER.index)
    chosen = at[prefixes == prefix]
    layers = chosen["metric"].str.rsplit("_", n=1).str[1].astype(int)
    layer = int(layers.max() if prefix == "grad_norm" else layers.min())
    value = float(chosen["value"].to_numpy(dtype=float)[(layers == layer).to_numpy()][-1])
    return NonFinite(loss_step, step, prefix, layer, str(value))


@dataclass(frozen=True)
class NonFiniteClaim(Claim):
    arm: str
    found: NonFinite
    names: tuple[str, ...]  # module paths, layer 1 first

    def __str__(self) -> str:
        f = self.found
        words = {"act_std": "output", "grad_norm": "gradient", "update_ratio": "update", "weight_norm": "weights"}
        parts = [f"the loss is first non-finite at step {f.loss_step}"] if f.loss_step is not None else []
        if f.step is not None:
            parts.append(f"the first logged step with a non-finite module value is {f.step}: the {words[f.metric]} "
                         f"of `{self.names[f.layer - 1]}` (module {f.layer}) is {f.value}, "
                         + ("the deepest such module (backward runs from the output)" if f.metric == "grad_norm"
                            else "the first such module in forward order"))
        return "; ".join(parts)

    def holds(self, records: Records) -> bool:
        return first_nonfinite(records, self.arm) == self.found

