"""What the browser runs for a chart (explorer/view/chart.py): plotly.js fetched once, a figure fitted
to the chart's real width (a title wider than that wraps, long tick labels push the margin out), drawn
only while on screen or near it, and updated in place; and the CSS of the chart grid."""

JS = """
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

// The mode bar (zoom, pan, reset, download: CONFIG below) shows on hover in the chart's top right
// corner, MODEBAR_PX wide and MODEBAR_BAND_PX tall. A centred title long enough to reach under it is
// hung below that band, the top margin growing by as much, so the bar never covers its end.
const MODEBAR_PX = 150, MODEBAR_BAND_PX = 30;

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
  const top = (layout.margin && layout.margin.t) || 100;
  const underBar = (lineWidth) => (width + lineWidth) / 2 > width - MODEBAR_PX;  // its centred end reaches the bar
  const oneLine = measure.measureText(text).width;
  if (oneLine <= room) {
    if (!underBar(oneLine)) return layout;
    // one line, hung below the bar (its glyphs start ~5 px above the pad; plotly had put its baseline at the
    // margin's middle, its top ~0.8 size above): the margin grows by at least the distance it moved
    const pad = MODEBAR_BAND_PX + Math.round(size / 3);
    const shift = Math.max(0, pad - Math.round(top / 2 - 0.8 * size));
    layout.title = Object.assign({}, title, {yref: "container", y: 1, yanchor: "top", pad: {t: pad}});
    layout.margin = Object.assign({}, layout.margin, {t: top + shift});
    return layout;
  }
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
  // subplot titles just above the plots; below the mode bar's band where a line reaches under it (the first
  // line's glyphs start ~a size above a wrapped title's pad)
  const hung = 8 + Math.round(size / 2);
  const pad = underBar(Math.max(...lines.map((line) => measure.measureText(line).width))) ? MODEBAR_BAND_PX + size : hung;
  layout.title = Object.assign({}, title, {text: lines.join("<br>"), yref: "container", y: 1, yanchor: "top", pad: {t: pad}});
  layout.margin = Object.assign({}, layout.margin, {t: top + (lines.length - 1) * (size + 4) + Math.max(0, pad - hung)});
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

CSS = """
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
