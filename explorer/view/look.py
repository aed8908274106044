"""Page-side finishing of a scenario's figures, the same for every scenario.

The theme is the page's (explorer/view/chart.py draws with Streamlit's font and colours, light
or dark), so no template is set here. What is added, only where the scenario left it open:
- hover: a line or marker trace without a hover template gets one naming the trace (the
  arm), the x value and the y value, with the axis titles as labels;
- room: a legend of long names (overlays add "[what differs]") moves below the plot, and a
  figure whose legend sits below grows with it, so the plot itself keeps its size;
- room: a legend too long to stand beside the plot without scrolling moves below it too;
- log ticks: every log axis (overlays included) is labelled by `log_ticks` (decades, or
  1-2-5 written in full: never a bare "5" that means 0.5);
- a reference line's label on a log axis sits on its line (plotly.py leaves it at log10's worth);
- integer axes (steps, layers, bits) over a short range get a tick at every integer, never at 0.5;
- subplot titles wider than their column wrap onto a second line in a smaller font.
The main title and the margins that tick labels need are fitted in the browser, at the chart's
real width (explorer/view/chart.py).
"""
import math
import numbers
import textwrap

import numpy as np
import plotly.graph_objects as go

from scenarios.plotting import is_full_width, is_own_log_ticks, log_ticks

BASE_HEIGHT_PX = 430    # plotly's default is 450; a legend below adds rows
LEGEND_ROW_PX = 19
GROUP_TITLE_PX = 34     # a legend group's title row and the gap above it
MAX_HEIGHT_PX = 1100
LONG_NAME_CHARS = 24    # legend entries longer than this go below the plot, not beside it
SIDE_ENTRIES = 12       # more legend rows than this beside a 430 px plot would scroll
INTEGER_SPAN = 10       # an integer axis over at most this range gets a tick at each integer
CHAR_PX = 7.5           # a title character's width at plotly's 14 px font
FIGURE_PX = {False: 620, True: 1250}  # a chart's width: half the page, or all of it


def polish(figure: go.Figure) -> go.Figure:
    _hover(figure)
    _fit_legend(figure)
    axes = _axes(figure)  # once: listing them copies the layout
    _log_ticks(figure, axes)
    _line_labels_on_log_axes(figure, axes)
    _integer_ticks(figure, axes)
    _wrap_subplot_titles(figure, axes)
    return figure


def _line_labels_on_log_axes(figure: go.Figure, axes: list[str]) -> None:
    """The label of an `add_hline` / `add_vline` on a log axis, put on its line. plotly.py gives the
    label the line's value, but plotly.js reads an annotation's position on a log axis as log10 of it
    (a shape's as the value): "float 0.149" stood at 1.4. A label is recognised by its line: a shape
    on the same axis whose two ends sit at the label's value (a label placed by hand in log10 units
    matches none)."""
    logs = {key[0] + key[5:] for key in axes if figure.layout[key].type == "log"}  # "yaxis2" -> "y2"
    if not logs or not figure.layout.annotations:
        return
    lines = {(letter, getattr(shape, letter + "ref", None) or letter, getattr(shape, letter + "0"))
             for shape in figure.layout.shapes for letter in "xy"
             if shape.type == "line" and getattr(shape, letter + "0") == getattr(shape, letter + "1")}
    for note in figure.layout.annotations:
        for letter in "xy":
            ref, value = getattr(note, letter + "ref", None) or letter, getattr(note, letter)
            if (ref in logs and isinstance(value, numbers.Real) and value > 0
                    and (letter, ref, value) in lines):
                setattr(note, letter, math.log10(value))


def _hover(figure: go.Figure) -> None:
    for trace in figure.data:
        if trace.type not in ("scatter", "scattergl") or trace.hovertemplate or trace.hoverinfo == "skip":
            continue
        x_title = _axis_title(figure, "xaxis", trace.xaxis) or "x"
        y_title = _axis_title(figure, "yaxis", trace.yaxis) or "y"
        trace.hovertemplate = f"{trace.name or ''}<br>{x_title} %{{x}}<br>{y_title} %{{y:.4g}}<extra></extra>"


def _fit_legend(figure: go.Figure) -> None:
    legend = figure.layout.legend
    names = [str(t.name) for t in figure.data if t.showlegend is not False and t.name]
    titles = {t.legendgroup for t in figure.data if t.legendgrouptitle is not None and t.legendgrouptitle.text}
    entries = len(names) + len(titles)
    long_names = len(names) > 1 and max(map(len, names)) > LONG_NAME_CHARS
    if legend.orientation in (None, "v") and legend.x is None and (long_names or entries > SIDE_ENTRIES):
        # long names at the right would squeeze the plot to a strip; many would scroll: put it below
        figure.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, x=0))
    below = legend.orientation == "h" and legend.y is not None and legend.y < 0
    if below and figure.layout.height is None and entries > 4:  # a group's title also takes its gap
        rows_px = LEGEND_ROW_PX * len(names) + GROUP_TITLE_PX * len(titles)
        figure.update_layout(height=min(MAX_HEIGHT_PX, BASE_HEIGHT_PX + rows_px))


def _axes(figure: go.Figure) -> list[str]:
    return [k for k in figure.layout.to_plotly_json() if k[:5] in ("xaxis", "yaxis")]


def _values(figure: go.Figure, key: str) -> list:
    """The values the traces put on axis `key` ('xaxis2' -> the x of traces on 'x2')."""
    letter, ref = key[0], key[0] + key[5:]
    found: list = []
    for trace in figure.data:
        if trace.type not in ("scatter", "scattergl", "bar", "heatmap") or (getattr(trace, letter + "axis", None) or letter) != ref:
            continue
        data = getattr(trace, letter, None)
        if data is not None:
            found += list(data)
    return found


def _shape_values(figure: go.Figure, key: str) -> list[float]:
    """The coordinates that shapes (add_vline, add_hline, rectangles) place on axis `key` in data units."""
    letter, ref = key[0], key[0] + key[5:]
    found: list[float] = []
    for shape in figure.layout.shapes:
        if (getattr(shape, letter + "ref", None) or letter) == ref:
            found += [float(v) for v in (getattr(shape, letter + "0"), getattr(shape, letter + "1")) if _is_number(v)]
    return found


def _log_ticks(figure: go.Figure, axes: list[str]) -> None:
    for key in axes:
        axis = figure.layout[key]
        if axis.type == "log" and is_own_log_ticks(axis):
            values = [v for v in _values(figure, key) if _is_number(v)]
            if values:
                axis.update(exponentformat="power", **log_ticks(values))


def _integer_ticks(figure: go.Figure, axes: list[str]) -> None:
    for key in axes:
        axis = figure.layout[key]
        if axis.type not in (None, "-", "linear") or axis.tickvals is not None or axis.dtick is not None:
            continue
        values = _values(figure, key)
        numbers = [float(v) for v in values if _is_number(v)
                   and math.isfinite(v)]
        if not numbers or len(numbers) != len(values) or not all(v.is_integer() for v in numbers):
            continue
        drawn = numbers + _shape_values(figure, key)  # a line drawn at x = 2048 stretches the axis to it
        low, high = (axis.range if axis.range is not None else (min(drawn), max(drawn)))
        if high - low <= INTEGER_SPAN:
            axis.update(tick0=0, dtick=1)


def _wrap_subplot_titles(figure: go.Figure, axes: list[str]) -> None:
    """make_subplots' titles are annotations centred over each column: wrap one wider than its column."""
    width_px = FIGURE_PX[is_full_width(figure)] - 80
    for annotation in figure.layout.annotations:
        if annotation.xref != "paper" or annotation.yanchor != "bottom" or not annotation.text:
            continue
        domain = _column_width(figure, axes, annotation.x)
        chars = max(8, int(domain * width_px / CHAR_PX))
        text = str(annotation.text)
        if len(text) > chars and "<br>" not in text:
            annotation.text = "<br>".join(textwrap.wrap(text, max(8, int(chars * 14 / 12))))
            annotation.font.size = 12


def _column_width(figure: go.Figure, axes: list[str], x: float | None) -> float:
    """The width (a fraction of the figure) of the x axis domain centred under `x`."""
    for key in axes:
        if key.startswith("xaxis") and figure.layout[key].domain is not None:
            low, high = figure.layout[key].domain
            if x is not None and abs((low + high) / 2 - x) < 1e-6:
                return high - low
    return 1.0


def _axis_title(figure: go.Figure, kind: str, ref: str | None) -> str | None:
    axis = figure.layout[kind + (ref or kind[0])[1:]]
    title = axis.title.text if axis is not None and axis.title is not None else None
    return title.split(" (")[0] if title else None  # "loss (log scale)" -> "loss"


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
