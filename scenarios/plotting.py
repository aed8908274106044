"""Shared figure helpers, so every scenario's plots look alike and read alike.

Colours belong to arm *identities*, not positions: an arm's colour is its place in the
scenario's `arm_universe()` (most common arms first, so they get the strongest colours),
the same in every figure, every run and every page where that arm appears. Labels outside
the universe get a colour from a hash of the label, moved on only if another label of the
same figure already holds it. The palette never repeats: past its ten base colours it
generates new hues. Categories (memory kinds, phases) use a palette of their own that no
arm ever gets.

The loss-curve and per-layer-profile figures that most scenarios draw live here.
"""
import colorsys
import math
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import plotly.graph_objects as go

from scenarios import plotly_paths
from scenarios.records import Records

plotly_paths.memoize()  # every scenario draws through here

BASE_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
               "#bcbd22", "#393b79"]
CATEGORY_COLORS = ["#a6cee3", "#fdbf6f", "#b2df8a", "#fb9a99", "#cab2d6", "#ffff99", "#d9d9d9", "#80b1d3"]
HASHED_SLOTS = 1000  # labels outside the universe spread over this many colours


def palette_color(index: int) -> str:
    """The arm colour at `index`: the base colours, then golden-angle hues at three lightnesses
    and four saturations, skipping any that is a near twin of a base colour or repeats an earlier one."""
    if index < len(BASE_COLORS):
        return BASE_COLORS[index]
    with _GENERATED_LOCK:
        while len(_GENERATED) <= index - len(BASE_COLORS):
            _GENERATED.append(_next_generated())
    return _GENERATED[index - len(BASE_COLORS)]


_GENERATED: list[str] = []  # a memo of a pure sequence: grows the same way in every process
_GENERATED_LOCK = threading.Lock()
_CANDIDATE = [0]
_SEEN: set[str] = set()


def _next_generated() -> str:
    while True:
        k = _CANDIDATE[0]
        _CANDIDATE[0] += 1
        hue, lightness = (k * 0.618033988749895 + 0.07) % 1.0, (0.38, 0.50, 0.30)[k % 3]
        r, g, b = colorsys.hls_to_rgb(hue, lightness, (0.75, 0.6, 0.9, 0.5)[k // 3 % 4])
        color = f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"
        if min(_distance(color, base) for base in BASE_COLORS) > NEAR_TWIN and color not in _SEEN:
            _SEEN.add(color)
            return color


UNIFORM_BYTE_BPB = 8.0  # a byte-level model's uniform guess over the 256 bytes: log2(256) bits per byte
UNIFORM_BYTE_LABEL = "a uniform guess over the 256 bytes: 8 bits per byte"
NEAR_TWIN = 80  # "redmean" RGB distance below which two colours read as one on a chart


def _distance(one: str, other: str) -> float:
    """A cheap perceptual RGB distance (the "redmean" weighting)."""
    r1, g1, b1 = (int(one[i:i + 2], 16) for i in (1, 3, 5))
    r2, g2, b2 = (int(other[i:i + 2], 16) for i in (1, 3, 5))
    mean = (r1 + r2) / 2
    return math.sqrt((2 + mean / 256) * (r1 - r2) ** 2 + 4 * (g1 - g2) ** 2 + (2 + (255 - mean) / 256) * (b1 - b2) ** 2)


def category_color(index: int) -> str:
    return CATEGORY_COLORS[index % len(CATEGORY_COLORS)]


def arm_colors(labels: Iterable[str], universe: Sequence[str] = ()) -> dict[str, str]:
    """label -> colour for the labels of one page or figure: universe labels by their place,
    others by hash; no two labels given here share a colour."""
    place = {label: i for i, label in enumerate(universe)}
    colors: dict[str, str] = {}
    taken: set[int] = set()
    pending = []
    for label in dict.fromkeys(labels):
        if label in place:
            colors[label] = palette_color(place[label])
            taken.add(place[label])
        else:
            pending.append(label)
    for label in sorted(pending, key=lambda text: (zlib.crc32(text.encode()), text)):
        slot = len(universe) + zlib.crc32(label.encode()) % HASHED_SLOTS
        while slot in taken:
            slot += 1
        taken.add(slot)
        colors[label] = palette_color(slot)
    return {label: colors[label] for label in dict.fromkeys(labels)}


# --- figures, built when asked for ---------------------------------------------------------------
class Figures(Mapping[str, go.Figure]):
    """A scenario's figures by name, each built the first time it is asked for (then kept).

    `figures(frame, config)` returns one: its names and their order are known at once, and a
    figure costs only when someone reads it. The page's live view reads the two to four charts in
    view of a page of five to ten (explorer/view/live.py); the final view, the exports and the tests
    read them all, as from a dict. A value is a function that builds the figure, or a figure.
    """

    def __init__(self, builders: Mapping[str, Callable[[], go.Figure] | go.Figure]):
        self._builders = dict(builders)
        self._built: dict[str, go.Figure] = {}

    def __getitem__(self, name: str) -> go.Figure:
        if name not in self._built:
            builder = self._builders[name]  # KeyError for a name it does not have, as a dict
            self._built[name] = builder() if callable(builder) else builder
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._builders)

    def __len__(self) -> int:
        return len(self._builders)

    def __contains__(self, name: object) -> bool:  # Mapping's own would read (build) the figure
        return name in self._builders

    def built(self) -> list[str]:
        """The names built so far, in the figures' order."""
        return [name for name in self._builders if name in self._built]

    def _repr_html_(self) -> str:
        """How a notebook shows the collection: every figure, in order, with plotly.js inside the
        first (the copy the plotly package ships: it opens offline) and shared by the rest."""
        return "\n".join(self[name].to_html(full_html=False, include_plotlyjs=i == 0, default_height="450px")
                         for i, name in enumerate(self))


# --- layout --------------------------------------------------------------------------------
def layout(fig: go.Figure, title: str, x_title: str, y_title: str, *, log_y: bool = False) -> go.Figure:
    fig.update_layout(title=title, margin=dict(l=60, r=20, t=50, b=50), legend_title_text="arm",
                      hovermode="closest")
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title, type="log" if log_y else "linear", exponentformat="power")
    if log_y:
        fig.update_yaxes(**log_ticks(v for trace in fig.data if trace.y is not None for v in trace.y))
    return fig


def full_width(fig: go.Figure) -> go.Figure:
    """Ask the page to give this figure the whole width (long axes, several rows of subplots)."""
    fig.update_layout(meta={"full_width": True})
    return fig


def is_full_width(fig: go.Figure) -> bool:
    return isinstance(fig.layout.meta, dict) and bool(fig.layout.meta.get("full_width"))


MAX_LOG_LABELS = 8  # a log axis over more decades than this is labelled every few decades
SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def tick_text(value: float) -> str:
    """A log-axis label written out: '0.5', '20', '5×10⁻⁴' (never a bare mantissa digit)."""
    if 1e-3 <= value < 1e5:
        return f"{value:g}"
    exponent = math.floor(math.log10(value) + 1e-9)
    mantissa = round(value / 10 ** exponent, 6)
    power = "10" + str(exponent).translate(SUPERSCRIPT)
    return power if mantissa == 1 else f"{mantissa:g}×{power}"


def log_ticks(values: Iterable[float]) -> dict:
    """Tick settings for a log axis over `values`: every decade (or every few) when they span more
    than two decades; else 1, 2, 5 (or 1…9) × 10^k, each written in full. Plotly's own short-range
    log ticks label the 2s and 5s with a bare digit ("5" for 0.5), which reads wrong."""
    positive = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    if not positive:
        return dict(tickmode=None, dtick=None)
    low, high = math.log10(min(positive)), math.log10(max(positive))
    if high - low > 2:
        return dict(tickmode=None, tickvals=None, ticktext=None, dtick=max(1, math.ceil((high - low) / MAX_LOG_LABELS)))
    if high - low < 0.3:
        return dict(tickmode=None, tickvals=None, ticktext=None, dtick=None)  # plotly writes such ticks in full
    for mantissas in ((1, 2, 5), (1, 2, 3, 4, 5, 6, 7, 8, 9)):
        ticks = [float(f"{m}e{k}") for k in range(math.floor(low) - 1, math.ceil(high) + 1) for m in mantissas
                 if low - 0.1 <= math.log10(m) + k <= high + 0.1]
        if len(ticks) >= 3:
            break
    return dict(tickmode="array", tickvals=ticks, ticktext=[tick_text(v) for v in ticks], dtick=None)


def is_own_log_ticks(axis) -> bool:
    """Whether a log axis's ticks are plotly's or `log_ticks`'s (not a scenario's own tick labels): those are
    1, 2, 5 or every 1…9 × 10^k. Ticks at the data (sequence lengths 128…1024, ranks 1, 2, 4, 8) are the
    scenario's, even when written as `tick_text` writes them."""
    if axis.tickvals is None:
        return axis.dtick in (None, 1, "1", "D1", "D2")
    if axis.ticktext is None or list(axis.ticktext) != [tick_text(v) for v in axis.tickvals]:
        return False
    values = [float(v) for v in axis.tickvals if isinstance(v, (int, float)) and v > 0]
    mantissas = {round(v / 10 ** math.floor(math.log10(v)), 6) for v in values}
    return len(values) == len(axis.tickvals) and all(m == int(m) for m in mantissas) and (
        mantissas <= {1.0, 2.0, 5.0} or len(mantissas) >= 6)


def spans_decades(values: Iterable[float], decades: float = 2.0) -> bool:
    """All positive and spread over more than `decades` powers of ten: draw on a log axis."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    return bool(values) and min(values) > 0 and max(values) / min(values) > 10 ** decades


# --- the figures most scenarios draw -------------------------------------------------------
def curves_figure(records: Records, colors: dict[str, str], metric: str, *, title: str, y_title: str,
                  arms: Sequence[str] | None = None, x_title: str = "step", chance: float | None = None,
                  chance_label: str = "chance", log_y: bool | None = None, unit: str = "",
                  chance_in_legend: bool = False) -> go.Figure:
    """One line per arm of `metric` against step, each arm's divergence marked, an optional
    chance line; a log axis when the values span more than two decades (or as `log_y` says).
    `chance_in_legend`: the chance line is named in the legend instead of labelled on the line (where
    an arm that stays at chance would run through its label); drawn once an arm has points."""
    fig = go.Figure()
    arms = list(arms) if arms is not None else records.arms_with(metric)
    shown: list[float] = []
    for arm in arms:
        series = records.series(arm, metric)
        if series.empty:
            continue
        shown += series.tolist()
        fig.add_scatter(x=series.index, y=series.to_numpy(), name=arm, mode="lines", line=dict(color=colors.get(arm)),
                        hovertemplate=f"{arm}<br>step %{{x}}<br>{metric} %{{y:.4g}}{unit}<extra></extra>")
    for arm in arms:
        step = records.diverged_at(arm)
        if step is not None:
            fig.add_vline(x=step, line_dash="dot", line_color=colors.get(arm),
                          annotation_text=f"{arm} diverged at step {step}")
    if chance is not None and chance_in_legend:
        legend_line(fig, chance, chance_label)
    elif chance is not None:
        fig.add_hline(y=chance, line_dash="dash", line_color="gray", annotation_text=chance_label,
                      annotation_position="bottom right")
    log = spans_decades(shown) if log_y is None else log_y
    return layout(fig, title, x_title, y_title + (" (log scale)" if log else ""), log_y=log)


def as_percent(fig: go.Figure) -> go.Figure:
    """A figure of shares (0 to 1) read in percent, as the page's sentences give them: ticks and hover
    (values unchanged, so exports and overlays keep the records' numbers)."""
    fig.for_each_trace(lambda t: t.update(hovertemplate=t.hovertemplate.replace("%{y:.4g}", "%{y:.1%}")),
                       selector=lambda t: bool(t.hovertemplate))
    return fig.update_yaxes(tickformat=".0%")


def legend_line(fig: go.Figure, value: float, name: str, dash: str = "dash", hover: str | None = None) -> None:
    """A gray reference line at y = `value` across the x range of the traces drawn so far, named in the
    legend rather than labelled on the line (where a curve that approaches it would run through the label).
    Nothing while no trace has points: alone, it would count as a drawn chart in the live view."""
    xs = [x for trace in fig.data for x in (trace.x if trace.x is not None else ())]
    if xs:
        fig.add_scatter(x=[min(xs), max(xs)], y=[value, value], mode="lines", name=name,
                        line=dict(color="gray", dash=dash, width=1.5), hovertemplate=f"{hover or name}<extra></extra>")


def add_curve(fig: go.Figure, records: Records, arm: str, metric: str, name: str, color: str, *,
              dash: str = "solid", label: str | None = None, **kwargs) -> None:
    """One metric of one arm over steps (nothing while it has no points); hover names the curve, the
    step and the value."""
    points = records.series(arm, metric)
    if len(points):
        fig.add_scatter(x=points.index, y=points.to_numpy(), mode="lines", name=name, line=dict(color=color, dash=dash),
                        hovertemplate=f"{label or name}<br>step %{{x}}<br>{metric} %{{y:.4g}}<extra></extra>", **kwargs)


def profile_figure(records: Records, colors: dict[str, str], prefix: str, *, title: str, y_title: str,
                   log_y: bool = True) -> go.Figure:
    """Per-layer values of `prefix/layer_XX` against depth at each arm's first, middle and last
    logged step (solid, dashed, dotted)."""
    table = records.layer_table(prefix)
    fig = go.Figure()
    for arm, rows in table.groupby("arm", sort=False):
        steps = sorted(rows["step"].unique())
        picks = dict.fromkeys([steps[0], steps[len(steps) // 2], steps[-1]])  # first, middle, last
        for dash, step in zip(["solid", "dash", "dot"], picks):
            at = rows[rows["step"] == step].sort_values("layer")
            name = f"{arm} · step {step}"
            under = next((t.name for t in fig.data if list(t.x) == list(at["layer"]) and list(t.y) == list(at["value"])),
                         None)  # an arm identical to an earlier one (two arms' step 0 from one init) is drawn over it
            fig.add_scatter(x=at["layer"], y=at["value"], name=f"{name} (= {under})" if under else name,
                            mode="lines+markers", line=dict(color=colors.get(arm), dash=dash), legendgroup=str(arm),
                            hovertemplate=f"{arm}<br>step {step}<br>layer %{{x}}<br>%{{y:.3g}}<extra></extra>")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, x=0))
    return layout(fig, title, "layer (1 = next to the input)", y_title + (" (log scale)" if log_y else ""),
                  log_y=log_y)


# --- a legacy reader, until the compare panel reads through `Records` ----------------------
def arms_in_order(frame) -> list[str]:
    return Records(frame).arms()
