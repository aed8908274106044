"""Repeat a run over several seeds and draw the mean with a band, to tell an effect from noise.

A `SeedGroup` runs seeds s, s+1, …, s+N−1 of one config through the run manager, each stored
(and a seed already in the store served from it): for a scenario that `batches_seeds`, the seeds
not yet stored train together as one run (explorer/runs/seeded.py: every seed's arms in the same
batched models, about the cost of one run), otherwise one after another. The
page draws the mean over seeds of every (arm, step, metric) with the scenario's own
`figures`, then builds the same figures from the per-point low and high frames (min/max, or
mean ∓ std) and wraps each line of the mean figure in a band from the matching lines.
No scenario code knows about seeds.
"""
import threading
import time
from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go

from explorer.runs.handle import RunHandle, Snapshot
from scenarios.base import COLUMNS, Scenario, ScenarioConfig
from scenarios.plotting import Figures

MAX_SEED = 2**31 - 1
BANDS = {"min–max": ("min", "max"), "mean ± std": ("minus_std", "plus_std")}


def seeds_for(first: int, count: int) -> list[int]:
    """`count` consecutive seeds from `first`, shifted down if they would pass the Config's bound."""
    first = min(first, MAX_SEED - count + 1)
    return list(range(first, first + count))


class SeedGroup:
    """N runs of one config that differ only in the seed; quacks like a RunHandle for the page."""

    def __init__(self, scenario: Scenario, config: ScenarioConfig, count: int,
                 starter: Callable[[Scenario, ScenarioConfig], RunHandle],
                 batch_starter: Callable[[Scenario, ScenarioConfig, list[int]], list] | None = None) -> None:
        self.scenario, self.config, self.starter, self.batch_starter = scenario, config, starter, batch_starter
        self.seeds = seeds_for(config.seed, count)
        self.handles: list[RunHandle] = []
        self.traceback: str | None = None
        self._stop = threading.Event()
        self._keep = True
        self._mean: tuple[tuple, pd.DataFrame] | None = None  # the mean frame, by the rows it was made from
        self._started = time.perf_counter()
        self._ended: float | None = None
        self._thread = threading.Thread(target=self._work, name=f"seeds-{scenario.id}", daemon=True)

    @classmethod
    def start(cls, scenario: Scenario, config: ScenarioConfig, count: int,
              starter: Callable[[Scenario, ScenarioConfig], RunHandle],
              batch_starter: Callable[[Scenario, ScenarioConfig, list[int]], list] | None = None) -> "SeedGroup":
        """`batch_starter(scenario, config, seeds)` gives one handle per seed, the unstored seeds trained as
        one run (explorer/runs/seeded.py); it is used when the scenario `batches_seeds`."""
        group = cls(scenario, config, count, starter, batch_starter)
        group._thread.start()
        return group

    def _work(self) -> None:
        try:
            if self.batch_starter is not None and self.scenario.batches_seeds:
                self._work_together()
                return
            for seed in self.seeds:
                if self._stop.is_set():
                    break
                handle = self.starter(self.scenario, self.config.model_copy(update={"seed": seed}))
                self.handles.append(handle)
                while not handle.join(timeout=0.05):
                    if self._stop.is_set():
                        handle.stop(keep=self._keep)
                        handle.join()
                        break
                if handle.snapshot().status == "failed":
                    self.traceback = handle.traceback
                    break
        finally:
            self._ended = time.perf_counter()

    def _work_together(self) -> None:
        handles = self.batch_starter(self.scenario, self.config, self.seeds)
        self.handles.extend(handles)
        for handle in handles:
            while not handle.join(timeout=0.05):
                if self._stop.is_set():
                    handle.stop(keep=self._keep)  # every seed's run at once
                    handle.join()
            if handle.snapshot(with_frame=False).status == "failed":
                self.traceback = handle.traceback
                return

    def stop(self, keep: bool = True) -> None:
        self._keep = keep
        self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def wait_for_first_record(self, timeout: float, steps: int = 1) -> bool:
        deadline = time.perf_counter() + timeout
        while not self.handles and time.perf_counter() < deadline and self._ended is None:
            time.sleep(0.02)
        return bool(self.handles) and self.handles[0].wait_for_first_record(max(0.0, deadline - time.perf_counter()),
                                                                            steps)

    def snapshots(self, with_frame: bool = True) -> list[Snapshot]:
        return [handle.snapshot(with_frame) for handle in list(self.handles)]

    @property
    def running(self) -> bool:
        return self._ended is None

    def rows_count(self) -> int:
        return sum(handle.rows_count() for handle in list(self.handles))

    def snapshot(self, with_frame: bool = True) -> Snapshot:
        """The group as one run: the mean frame, the worst status, progress over all seeds."""
        snaps = self.snapshots(with_frame)
        running = self._ended is None
        statuses = {s.status for s in snaps}
        status = "running" if running else next(
            (s for s in ("failed", "stopped", "diverged") if s in statuses), "finished")
        if not running and len(snaps) < len(self.seeds) and status == "finished":
            status = "stopped"
        done = sum(1.0 if not s.running else s.progress for s in snaps)
        events = [{**e, "arm": f"{e['arm']} (seed {seed})"} for seed, s in zip(self.seeds, snaps) for e in s.events]
        error = next((s.error for s in snaps if s.error), None)
        end = self._ended if self._ended is not None else time.perf_counter()
        made_from = tuple(len(s.frame) for s in snaps)
        if with_frame and (self._mean is None or self._mean[0] != made_from):
            self._mean = (made_from, aggregate([s.frame for s in snaps])["mean"])
        frame = self._mean[1] if with_frame else snaps[0].frame.iloc[:0] if snaps else aggregate([])["mean"]
        waiting = snaps[-1].waiting if running and snaps else None
        return Snapshot(frame, status, done / len(self.seeds), events, error, end - self._started, None,
                        bool(snaps) and all(s.from_store for s in snaps) and not running, waiting=waiting,
                        steps=max((s.steps for s in snaps), default=0))


def aggregate(frames: list[pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Per (arm, step, metric) over seeds: long frames of mean, min, max, mean ∓ std, and count."""
    frames = [f for f in frames if not f.empty]
    if not frames:
        empty = pd.DataFrame(columns=COLUMNS)
        return {k: empty for k in ("mean", "min", "max", "minus_std", "plus_std", "count")}
    rows = pd.concat(frames, ignore_index=True)
    stats = rows.groupby(["arm", "step", "metric"], sort=False)["value"].agg(["mean", "min", "max", "std", "count"])
    stats = stats.reset_index()
    std = stats["std"].fillna(0.0)  # one seed at a point: no spread
    keys = stats[["arm", "step", "metric"]]
    return {"mean": keys.assign(value=stats["mean"]), "min": keys.assign(value=stats["min"]),
            "max": keys.assign(value=stats["max"]), "minus_std": keys.assign(value=stats["mean"] - std),
            "plus_std": keys.assign(value=stats["mean"] + std), "count": keys.assign(value=stats["count"])}


def banded_figures(scenario: Scenario, stats: dict[str, pd.DataFrame], config: ScenarioConfig,
                   band: str) -> Figures:
    """The scenario's figures of the mean, each line wrapped in its band (each built when read)."""
    low_key, high_key = BANDS[band]
    mean = scenario.figures(stats["mean"], config)
    low = scenario.figures(stats[low_key], config)
    high = scenario.figures(stats[high_key], config)
    return Figures({name: lambda name=name: add_bands(mean[name], low.get(name), high.get(name)) for name in mean})


def add_bands(mean: go.Figure, low: go.Figure | None, high: go.Figure | None) -> go.Figure:
    """Fill between the same-index lines of the low and high figures, under each line of `mean`.

    A line gets a band only when the low and high figures have a trace at its index with the
    same name and the same x values; anything else (heatmaps, bars, markers) is left alone.
    """
    if low is None or high is None or not (len(low.data) == len(high.data) == len(mean.data)):
        return mean
    bands = []
    for trace, lo, hi in zip(mean.data, low.data, high.data):
        if trace.type != "scatter" or "lines" not in (trace.mode or "lines") or trace.fill not in (None, "none"):
            continue
        if not (trace.name == lo.name == hi.name) or trace.x is None or trace.y is None:
            continue
        x = list(trace.x)
        if list(lo.x) != x or list(hi.x) != x or len(x) < 2:
            continue
        y_low, y_high = _floats(lo.y), _floats(hi.y)
        if _is_log(mean, trace.yaxis):  # a band edge at or below zero cannot be drawn on a log axis
            floor = min((v for v in y_low + y_high + _floats(trace.y) if v > 0), default=1e-30)
            y_low = [max(v, floor) for v in y_low]
        bands.append(go.Scatter(
            x=x + x[::-1], y=y_high + y_low[::-1], mode="lines", fill="toself", fillcolor=_translucent(_color(trace)),
            line=dict(width=0), hoverinfo="skip", showlegend=False, name=f"{trace.name} (band)",
            legendgroup=trace.legendgroup or trace.name, xaxis=trace.xaxis, yaxis=trace.yaxis))
    if bands:
        mean.add_traces(bands)
        mean.data = mean.data[-len(bands):] + mean.data[:-len(bands)]  # bands under the lines
    return mean


def _floats(values) -> list[float]:
    return [float(v) if v is not None else float("nan") for v in values]


def _is_log(fig: go.Figure, axis: str | None) -> bool:
    name = "yaxis" + (axis or "y")[1:]
    return getattr(fig.layout[name], "type", None) == "log"


def _color(trace) -> str | None:
    color = trace.line.color if trace.line is not None else None
    if color is None and trace.marker is not None and isinstance(trace.marker.color, str):
        color = trace.marker.color
    return color


def _translucent(color: str | None, alpha: float = 0.2) -> str:
    if isinstance(color, str) and color.startswith("#") and len(color) == 7:
        r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
        return f"rgba({r},{g},{b},{alpha})"
    if isinstance(color, str) and color.startswith("rgb("):
        return "rgba(" + color[4:-1] + f",{alpha})"
    return f"rgba(128,128,128,{alpha})"
