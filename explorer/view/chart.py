"""Charts that keep their element: a figure is drawn once and then updated in place.

`st.plotly_chart` gives a figure whose data changed a new element id, so the browser
throws the old chart away and builds a new one — a blank moment on every live redraw.
Here each figure is a Streamlit component (`st.components.v2`) with a stable key: the
same element lives for the whole run and plotly.js's `Plotly.react` updates it in place,
each chart in a task of its own (so one redraw never blocks the page for long), and only
when its figure changed (the payload carries a version: a hash of the figure), and only
while it is on screen or near it: a chart far below is drawn with its newest figure when it is
scrolled to (at Run, at each live update and when a stored run is shown, a page of seven
charts draws the two to four in view). While a run goes on the server builds only those too
(explorer/view/live.py): a chart not built yet is a placeholder of its height until it is. Before a
figure leaves the server its traces are thinned to what a screen can show. The browser fits
it to the chart's real width: a title wider than that wraps, long tick labels push the margin out.

plotly.js itself is the one the Python plotly package ships (the exports' HTML uses the
same), served by a static-file route of the server (explorer/view/plotly_js.py), fetched once
per browser and cached.
"""
import hashlib
import json

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from plotly.utils import PlotlyJSONEncoder

from explorer.view.chart_browser import CSS as _CSS
from explorer.view.chart_browser import JS as _JS
from explorer.view.look import BASE_HEIGHT_PX
from explorer.view.plotly_js import url as _plotly_url

MAX_POINTS = 800    # per line trace: more than a chart's width in pixels shows nothing more
MAX_COLUMNS = 400   # per heatmap

_chart = st.components.v2.component("explorer_chart", js=_JS, css=_CSS, isolate_styles=False)


def payload(name: str, figure: go.Figure) -> dict:
    """What the browser needs to draw `figure`: its thinned JSON, a version and its height."""
    spec = figure.to_plotly_json()
    spec["data"] = [thin(trace) for trace in spec.get("data", [])]
    layout = spec.setdefault("layout", {})
    layout.pop("template", None)  # the page's theme, not plotly's grey default
    height = int(layout.get("height") or BASE_HEIGHT_PX)
    text = json.dumps(spec, cls=PlotlyJSONEncoder)
    return {"name": name, "figure": text, "height": height, "version": hashlib.sha1(text.encode()).hexdigest()[:16],
            "points": max((_points(trace) for trace in spec["data"]), default=0)}


def placeholder(name: str, height: int) -> dict:
    """A chart not built yet (out of view while a run goes on): its place on the page, at its height."""
    return {"name": name, "figure": "", "height": height, "version": "pending", "points": 0, "pending": True}


def shows_data(chart: dict) -> bool:
    """Whether a `payload` draws anything of the run (see `_points`)."""
    return chart.get("points", 0) >= 2


def chart_key(page: str, name: str) -> str:
    """The key of the page's chart `name`: its component's, and the name the live feed hands it newer figures by."""
    return f"{page}-{name}"


def draw(key: str, drawn: dict) -> None:
    """Mount (or update in place) the chart component `key` with a `payload`."""
    _chart(key=key, data={**drawn, "key": key, "plotly": _plotly_url()}, height=drawn["height"])


def preload() -> None:
    """Start fetching plotly.js now (an empty element), so the first chart after Run does not wait for it."""
    _chart(key="explorer-plotly-preload", data={"plotly": _plotly_url()}, height=0)


def thin(trace: dict) -> dict:
    """A trace with no more points than a screen shows: lines keep each bucket's min and max
    (so a spike stays visible); heatmaps keep evenly spaced columns."""
    if trace.get("type", "scatter") in ("scatter", "scattergl") and _length(trace.get("y")) > MAX_POINTS:
        y = np.asarray(trace["y"], dtype=float)
        keep = _min_max_indices(y, MAX_POINTS // 2)
        trace = {**trace, "y": y[keep], "x": keep if trace.get("x") is None else trace["x"]}
        for axis in ("x", "text", "customdata", "hovertext"):
            if _length(trace.get(axis)) == len(y):
                trace[axis] = np.asarray(trace[axis])[keep]
    elif trace.get("type") == "heatmap" and trace.get("z") is not None:
        z = np.asarray(trace["z"])
        if z.ndim == 2 and z.shape[1] > MAX_COLUMNS:
            keep = np.unique(np.linspace(0, z.shape[1] - 1, MAX_COLUMNS).round().astype(int))
            trace = {**trace, "z": z[:, keep]}
            if _length(trace.get("x")) == z.shape[1]:
                trace["x"] = np.asarray(trace["x"])[keep]
    return trace


def _min_max_indices(y: np.ndarray, buckets: int) -> np.ndarray:
    edges = np.linspace(0, len(y), buckets + 1).astype(int)
    keep = {0, len(y) - 1}
    for start, end in zip(edges[:-1], edges[1:]):
        chunk = y[start:end]
        if end > start and np.isfinite(chunk).any():
            keep.update((start + int(np.nanargmin(chunk)), start + int(np.nanargmax(chunk))))
        elif end > start:
            keep.add(start)
    return np.array(sorted(keep))


def _points(trace: dict) -> int:
    """How much a trace draws, counted so that 2 is the least that shows: one point of a line is not
    seen, one marker, bar or heatmap cell is (those count double)."""
    kind = trace.get("type", "scatter")
    if kind in ("heatmap", "contour"):
        return 2 * int(np.size(trace["z"])) if trace.get("z") is not None else 0
    count = max(_length(trace.get("y")), _length(trace.get("x")))
    lines_only = kind in ("scatter", "scattergl") and "markers" not in str(trace.get("mode", "lines"))
    return count if lines_only else 2 * count


def _length(values) -> int:
    try:
        return len(values)
    except TypeError:
        return 0
