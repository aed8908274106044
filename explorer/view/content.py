"""What a scenario page shows, as data: the frame, the figures and the rows behind them.

The live view draws a `View`, and the exports write the same `View`, so a downloaded figure
is the figure on the page: the current run (or the mean over seeds, with bands) plus any
overlaid stored runs. Every figure still comes from `scenario.figures(frame, config)`.
"""
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial

import pandas as pd
import plotly.graph_objects as go

from explorer.runs.handle import RunHandle
from explorer.view.compare import Overlay, overlay_frame
from explorer.view.look import polish
from explorer.view.overlay import group_current, merge_traces
from explorer.view.seeds import SeedGroup, aggregate, banded_figures
from scenarios.base import Scenario
from scenarios.plotting import Figures


@dataclass(frozen=True)
class View:
    base: pd.DataFrame                 # this run's records (the mean over seeds for a seed group)
    figures: Mapping[str, go.Figure]   # each built when read, with its overlays, polished (a `Figures`)
    data: pd.DataFrame                 # the rows the figures were drawn from, for metrics.csv
    told: list[str] = field(default_factory=list)     # what the figures show beyond one run
    missing: list[str] = field(default_factory=list)  # figures read so far that had nothing to overlay

    @property
    def notes(self) -> list[str]:
        """What the figures show beyond one run, and which of those read so far show the current run only."""
        if not self.missing:
            return list(self.told)
        return [*self.told, "Figures with nothing to overlay (heatmaps, stacked bars) show the current run only: "
                + ", ".join(dict.fromkeys(self.missing)) + "."]


def build_view(scenario: Scenario, handle: RunHandle | SeedGroup, overlays: list[Overlay],
               band: str = "min–max") -> View:
    """The current run's figures, with each overlaid stored run's lines drawn into them.

    A stored run is drawn by the scenario's own `figures` from its own records and its own
    config, exactly as its page would draw it alone; its traces are then copied into the
    figure of the same name, renamed "name [what differs]" and drawn as an overlay.
    (Appending its records to the current frame instead would let a figure that reads a
    metric across all arms mix the two runs into one line.) Nothing is built until a figure
    is read: the live view reads only the charts in view.
    """
    view = _build(scenario, handle, band)
    base_arms = [str(a) for a in view.base["arm"].unique()]
    theirs = [(overlay, _figures_of(scenario, overlay), [str(a) for a in overlay.frame["arm"].unique()])
              for overlay in overlays]
    missing: list[str] = []

    def finished(name: str) -> go.Figure:
        figure = view.figures[name]
        for overlay, own, arms in theirs:
            stored = _read(own, name)
            if stored is None or not merge_traces(figure, stored, overlay.label, overlay.run_id, arms, base_arms):
                missing.append(title_of(figure, name))
        if overlays:
            group_current(figure)
        return polish(figure)

    notes = [f"Overlaid: stored run {o.run_id}, where it differs: {o.label}. Its traces end in “[{o.label}]” and are "
             "drawn lighter, their lines broken (a solid one into long dashes), with hollow markers and hatched bars."
             for o in overlays]
    return View(view.base, Figures({name: partial(finished, name) for name in view.figures}),
                overlay_frame(view.data, overlays), [*view.told, *notes], missing)


def title_of(figure: go.Figure, name: str) -> str:
    """The figure's title's first line, in quotes (its name where it has none)."""
    first = re.split(r"<br\s*/?>", figure.layout.title.text or "")[0]
    text = " ".join(re.sub(r"<[^>]+>", "", first).split())
    return f"“{text}”" if text else name


def _figures_of(scenario: Scenario, overlay: Overlay) -> Mapping[str, go.Figure]:
    try:
        return scenario.figures(overlay.frame, scenario.validate(overlay.config))
    except Exception:  # a stored run the current code cannot draw
        return {}


def _read(figures: Mapping[str, go.Figure], name: str) -> go.Figure | None:
    try:
        return figures[name] if name in figures else None
    except Exception:  # a stored run the current code cannot draw this figure of
        return None


def _build(scenario: Scenario, handle: RunHandle | SeedGroup, band: str) -> View:
    """The current run alone: its frame and figures, or the mean over seeds with bands."""
    config = handle.config
    notes: list[str] = []
    if isinstance(handle, SeedGroup):
        snaps = handle.snapshots()
        seeds = handle.seeds[:len(snaps)]
        stats = aggregate([s.frame for s in snaps])
        figures = banded_figures(scenario, stats, config, band) if len(snaps) > 1 else scenario.figures(stats["mean"], config)
        data = stats["mean"].assign(min=stats["min"]["value"], max=stats["max"]["value"],
                                    std=stats["plus_std"]["value"] - stats["mean"]["value"],
                                    n_seeds=stats["count"]["value"].astype(int))
        notes.append(f"Lines: the mean over seeds {', '.join(map(str, seeds))} of every (arm, step, metric); "
                     f"band: the figure drawn from the per-point {describe_band(band)} over those seeds.")
        return View(stats["mean"], figures, data, notes)
    frame = handle.snapshot().frame
    return View(frame, scenario.figures(frame, config), frame, notes)


def describe_band(band: str) -> str:
    return {"min–max": "minimum and maximum", "mean ± std": "mean minus and plus one standard deviation"}[band]
