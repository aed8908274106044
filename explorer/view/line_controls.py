"""Line controls for loss and metric curves, as TensorBoard users expect: smoothing (an
exponential moving average, 0 = off) and the y axis's scale (the figure's own choice, linear or log).

They change only what the page draws. A curve figure is one whose x axis counts steps
("step", "student step", ...); its lines are smoothed with TensorBoard's debiased EMA
(s_t = w·s_{t−1} + (1−w)·x_t, divided by 1 − w^t so the first points are not pulled to 0),
with the raw line kept faint behind. The exports and metrics.csv are built from the raw
view, so the raw values stay in them.
"""
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

import plotly.graph_objects as go
import streamlit as st

from scenarios.plotting import Figures, log_ticks

SCALES = ("auto", "linear", "log")
RAW_OPACITY = 0.25


@dataclass(frozen=True)
class LineSettings:
    smoothing: float = 0.0   # the EMA's weight w on the past; 0 draws the raw values
    y_scale: str = "auto"    # "auto": the figure's own choice

    @property
    def changes(self) -> bool:
        return self.smoothing > 0 or self.y_scale != "auto"


def line_controls(scenario) -> LineSettings:
    """The two controls (in the sidebar); their values."""
    smoothing = st.slider("smoothing (EMA)", 0.0, 0.99, 0.0, 0.01, key=f"smoothing:{scenario.id}",
                          help="Loss and metric curves drawn as an exponential moving average with this weight "
                               "on the past (TensorBoard's smoothing); 0 = the raw values. Exports stay raw.")
    scale = st.segmented_control("curves' y axis", SCALES, default="auto", key=f"y-scale:{scenario.id}",
                                 help="auto: each figure's own choice (log when the values span decades).")
    return LineSettings(float(smoothing), scale or "auto")


def ema(values, weight: float) -> list[float]:
    """TensorBoard's debiased EMA; a non-finite value passes through and does not enter the average."""
    smoothed, last, count = [], 0.0, 0
    for value in values:
        if value is None or not math.isfinite(value):
            smoothed.append(value)
            continue
        last, count = weight * last + (1 - weight) * value, count + 1
        smoothed.append(last / (1 - weight ** count))
    return smoothed


def is_curve(figure: go.Figure) -> bool:
    title = figure.layout.xaxis.title.text if figure.layout.xaxis.title is not None else None
    return bool(title) and "step" in str(title).split(" (")[0].split()[-1:] and any(
        t.type in ("scatter", "scattergl") for t in figure.data)


def apply_lines(figures: Mapping[str, go.Figure], settings: LineSettings | None) -> Mapping[str, go.Figure]:
    """The figures as drawn under the settings: curve figures copied and changed, the rest as they are
    (each when it is read, as `figures` builds its own: scenarios/plotting.py `Figures`)."""
    if settings is None or not settings.changes:
        return figures
    return Figures({name: partial(_lined, figures, name, settings) for name in figures})


def _lined(figures: Mapping[str, go.Figure], name: str, settings: LineSettings) -> go.Figure:
    figure = figures[name]
    return _changed(figure, settings) if is_curve(figure) else figure


def _changed(figure: go.Figure, settings: LineSettings) -> go.Figure:
    figure = go.Figure(figure)
    if settings.smoothing > 0:
        raws = []
        for trace in figure.data:
            if trace.type not in ("scatter", "scattergl") or trace.fill not in (None, "none") or trace.y is None \
                    or trace.hoverinfo == "skip" or len(trace.y) < 3 or "lines" not in (trace.mode or "lines"):
                continue
            raws.append(type(trace)(trace, opacity=RAW_OPACITY * (trace.opacity or 1), showlegend=False,
                                    hoverinfo="skip", hovertemplate=None, name=f"{trace.name} (raw)"))
            trace.y = ema([float(v) if v is not None else None for v in trace.y], settings.smoothing)
        figure.add_traces(raws)
        figure.data = figure.data[-len(raws):] + figure.data[:-len(raws)] if raws else figure.data  # raw behind
    if settings.y_scale != "auto":
        for key in [k for k in figure.layout.to_plotly_json() if k.startswith("yaxis")]:
            _scale(figure, key, settings.y_scale)
    return figure


def _scale(figure: go.Figure, key: str, scale: str) -> None:
    axis = figure.layout[key]
    title = (axis.title.text or "") if axis.title is not None else ""
    title = title.replace(" (log scale)", "")
    axis.type, axis.range, axis.tickmode, axis.tickvals, axis.ticktext, axis.dtick = scale, None, None, None, None, None
    axis.title.text = title + (" (log scale)" if scale == "log" and title else "")
    if scale == "log":
        ref = "y" + key[5:]
        axis.update(exponentformat="power", **log_ticks(
            v for t in figure.data if (t.yaxis or "y") == ref and t.y is not None for v in t.y
            if isinstance(v, (int, float))))
