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

from explorer.view.look import BASE_HEIGHT_PX
from explorer.view.plotly_js import url as _plotly_url

MAX_POINTS = 800    # per line trace: more than a chart's width in pixels shows nothing more
MAX_COLUMNS = 400   # per heatmap

_JS = """
function plotlyFrom(src) {
  if (!window.__explorerPlotly) {
    window.__explorerPlotly = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = src;
      script.onload = () => resolve(window.Plotly);
      script.onerror = reject;
      document.head.appendChild(script);
    });
  }
  return window.__explorerPlotly;
}

function themed(layout, element) {
  const css = getComputedStyle(element);
  const value = (name, fallback) => css.getPropertyValue(name).trim() || fallback;
  const text = value("--st-text-color", "#31333f");
  const grid = value("--st-border-color-light", "rgba(49, 51, 63, 0.1)");
  layout.font = Object.assign({family: value("--st-font", "sans-serif"), color: text}, layout.font || {});
  layout.paper_bgcolor = layout.paper_bgcolor || "rgba(0, 0, 0, 0)";
  layout.plot_bgcolor = layout.plot_bgcolor || "rgba(0, 0, 0, 0)";
  // automargin: long or slanted tick labels push the margin out, not into the axis title
  const axis = {gridcolor: grid, zerolinecolor: grid, linecolor: grid, automargin: true};
  for (const key of new Set(["xaxis", "yaxis", ...Object.keys(layout)])) {
    if (/^[xy]axis\\d*$/.test(key)) layout[key] = Object.assign({}, axis, layout[key]);
  }
  return wrapTitle(layout, element);
}

// A title wider than its chart (half the page on a narrow screen) would run into its neighbour's:
// it wraps onto as few lines as fit, of even lengths, and the top margin grows by a line for each.
function wrapTitle(layout, element) {
  const title = typeof layout.title === "string" ? {text: layout.title} : layout.title;
  const text = title && title.text;
  if (!text || text.includes("<")) return layout;  // markup of its own: left as written
  const width = element.getBoundingClientRect().width;
  if (!width) return layout;
  const size = (title.font && title.font.size) || Math.round(1.2 * ((layout.font && layout.font.size) || 14));
  const measure = wrapTitle.context = wrapTitle.context || document.createElement("canvas").getContext("2d");
  measure.font = size + "px " + ((layout.font && layout.font.family) || "sans-serif");
  const room = width - 40;
  if (measure.measureText(text).width <= room) return layout;
  const words = text.split(" ").filter((word) => word);
  if (words.length < 2) return layout;
  const fill = (most) => {  // words onto lines of at most `most` px (a longer word alone on its line)
    const lines = [];
    let line = "";
    for (const word of words) {
      const longer = line ? line + " " + word : word;
      if (line && measure.measureText(longer).width > most) { lines.push(line); line = word; } else line = longer;
    }
    return line ? [...lines, line] : lines;
  };
  let lines = fill(room);
  // even lines: the narrowest width that still needs no more lines than the room allows
  let low = Math.max(...words.map((word) => measure.measureText(word).width)), high = room;
  for (let i = 0; i < 12 && high - low > 1; i++) {
    const middle = (low + high) / 2;
    if (fill(middle).length <= lines.length) high = middle; else low = middle;
  }
  lines = fill(high);
  // hung from the top of the chart, so its lines grow down into the added margin, never into the
  // subplot titles just above the plots
  layout.title = Object.assign({}, title, {text: lines.join("<br>"),
                                           yref: "container", y: 1, yanchor: "top", pad: {t: 8 + Math.round(size / 2)}});
  layout.margin = Object.assign({}, layout.margin,
                                {t: ((layout.margin && layout.margin.t) || 100) + (lines.length - 1) * (size + 4)});
  return layout;
}

// The mode bar keeps zoom, pan, reset and the PNG download: the selection tools and the zoom-in,
// zoom-out and autoscale buttons (the same as a drag, a double click) only widened the bar that
// covers the right end of a chart's title on hover.
const CONFIG = {displaylogo: false, responsive: true,
                modeBarButtonsToRemove: ["select2d", "lasso2d", "zoomIn2d", "zoomOut2d", "autoScale2d"]};

// A chart is drawn only while it is on screen or near it (NEAR_PX above or below): one
// scrolled far away is drawn with its newest figure when it comes near. A page of seven charts
// then draws the two to four in view, at Run, at every live update and when a stored run is shown.
const NEAR_PX = 200;  // how far outside the scrolling area a chart is drawn ahead

function scroller(element) {  // the page body scrolls inside Streamlit's main element, not the document
  return element.closest('[data-testid="stMain"]');
}

function near(chart) {
  const box = chart.getBoundingClientRect();
  if (box.width === 0) return false;  // in a closed expander or a hidden tab
  const area = chart.__scroller ? chart.__scroller.getBoundingClientRect() : {top: 0, bottom: window.innerHeight};
  return box.bottom >= area.top - NEAR_PX && box.top <= area.bottom + NEAR_PX;
}

function watch(chart) {
  chart.__scroller = scroller(chart);
  const margin = NEAR_PX + "px";
  new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (entry.isIntersecting && chart.dataset.drawn !== chart.dataset.version) draw(chart);
    }
  }, {root: chart.__scroller, rootMargin: margin + " 0px " + margin + " 0px"}).observe(chart);
}

function draw(chart) {
  const data = chart.__latest;
  plotlyFrom(chart.__plotly).then((Plotly) => setTimeout(() => {
    if (chart.dataset.version !== data.version || chart.__drawing === data.version) return;  // newer came, or under way
    chart.__drawing = data.version;
    const started = performance.now();
    const figure = JSON.parse(data.figure);
    Plotly.react(chart, figure.data, themed(figure.layout, chart.__parent), CONFIG).finally(() => {
      // Versions are content hashes: the same figure can come again after a placeholder reset, and
      // must then be drawn again, so the guard above holds only while this draw is under way.
      if (chart.__drawing === data.version) chart.__drawing = undefined;
    }).then(() => {
      if (chart.dataset.version !== data.version) return;  // reset or replaced while drawing
      chart.dataset.drawn = data.version;
      // The live status line reports the drawing time with its next poll: the view's budget covers it.
      window.__explorerDrawMs = (window.__explorerDrawMs || 0) + performance.now() - started;
      const draws = window.__explorerDraws = window.__explorerDraws || [];  // read by bench/page_bench.py
      draws.push({name: data.name, ms: performance.now() - started, at: started});
      if (draws.length > 1000) draws.splice(0, 500);
    });
  }, 0));
}

// A page's first plotly draw pays one-off costs (styles injected, fonts measured, each trace
// type's first use): ~100 ms more than the next draw of the same chart. One hidden draw of the
// common trace types, once per page while it is idle, pays them before Run.
function warmUp(Plotly, parentElement) {
  if (window.__explorerWarm) return;
  window.__explorerWarm = "drawing";
  const idle = window.requestIdleCallback || ((run) => setTimeout(run, 300));
  idle(() => {
    const box = document.createElement("div");
    box.style.cssText = "position: fixed; left: -2000px; top: 0; width: 900px; height: 300px; visibility: hidden";
    document.body.appendChild(box);
    const line = {x: [0, 1, 2], y: [1, 0.5, 0.2], mode: "lines+markers", name: "a"};
    const traces = [line, {x: ["a", "b"], y: [1, 2], type: "bar", xaxis: "x2", yaxis: "y2", name: "b"},
                    {z: [[0, 1], [1, 0]], type: "heatmap", xaxis: "x3", yaxis: "y3", showscale: true}];
    const layout = {grid: {rows: 1, columns: 3, pattern: "independent"}, title: {text: "warm-up"},
                    yaxis: {type: "log", title: {text: "y"}}, xaxis: {title: {text: "step"}}, showlegend: true};
    Plotly.newPlot(box, traces, themed(layout, parentElement), {displaylogo: false})
      .then(() => Plotly.purge(box), () => {})
      .finally(() => { box.remove(); window.__explorerWarm = "done"; });
  }, {timeout: 2000});
}

function update(chart, parentElement, data, plotly) {
  chart.style.height = data.height + "px";
  chart.setAttribute("data-name", data.name);
  if (!data.figure) {  // a placeholder: the server builds this chart once it is in view
    if (chart.dataset.version) {  // a figure of an earlier run must not stand in for this run's
      chart.dataset.version = chart.dataset.drawn = "";
      chart.__drawing = undefined;
      if (window.Plotly) window.Plotly.purge(chart);
    }
    return;
  }
  if (chart.dataset.version === data.version) return;
  chart.dataset.version = data.version;
  Object.assign(chart, {__latest: data, __parent: parentElement, __plotly: plotly});
  if (near(chart)) draw(chart);  // else when it comes near (watch)
}

export default function (component) {
  const { data, parentElement } = component;
  if (!data.key) {  // the preload: fetch plotly.js while the page is read, not after Run
    plotlyFrom(data.plotly).then((Plotly) => warmUp(Plotly, parentElement));
    return;
  }
  let chart = parentElement.querySelector("div.explorer-chart");
  if (!chart) {
    chart = document.createElement("div");
    chart.className = "explorer-chart";
    chart.setAttribute("data-testid", "explorer-chart");
    parentElement.appendChild(chart);
    watch(chart);
  }
  // The live status line (explorer/view/live_status.py) hands newer figures here while a run goes on.
  const charts = window.__explorerCharts = window.__explorerCharts || {};
  const updater = (newer) => update(chart, parentElement, newer, data.plotly);
  updater.element = chart;  // a chart of a page left since is no longer connected
  updater.near = () => near(chart);  // the live status line reports which charts are in view: only those are built
  charts[data.key] = updater;
  update(chart, parentElement, data, data.plotly);
}
"""

_CSS = """
.explorer-chart { width: 100%; }
/* The chart grid (explorer/view/live.py): two charts to a row, one to a row where the grid is narrower
   than two charts need (a 1000 px window with the sidebar open left each ~300 px, legends wider than plots). */
.st-key-explorer-charts { container-type: inline-size; }
@container (max-width: 760px) {
  .st-key-explorer-charts [data-testid="stHorizontalBlock"] { flex-direction: column; }
  .st-key-explorer-charts [data-testid="stHorizontalBlock"] > [data-testid="stColumn"] {
    width: 100% !important; min-width: 100%; flex: 1 1 auto !important; }
}
"""

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
