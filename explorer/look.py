"""Page-side finishing of a scenario's figures, the same for every scenario.

The theme is the page's (explorer/chart.py draws with Streamlit's font and colours, light
or dark), so no template is set here. What is added, only where the scenario left it open:
- hover: a line or marker trace without a hover template gets one naming the trace (the
  arm), the x value and the y value, with the axis titles as labels;
- room: a legend of long names (overlays add "[what differs]") moves below the plot, and a
  figure whose legend sits below grows with it, so the plot itself keeps its size;
- log ticks: a log axis labelled every decade over many decades is labelled every few.
"""
import math

import plotly.graph_objects as go

BASE_HEIGHT_PX = 430    # plotly's default is 450; a legend below adds rows
LEGEND_ROW_PX = 19
MAX_HEIGHT_PX = 1100
MAX_LOG_LABELS = 8
LONG_NAME_CHARS = 24    # legend entries longer than this go below the plot, not beside it


def polish(figure: go.Figure) -> go.Figure:
    _hover(figure)
    _fit_legend(figure)
    _thin_log_ticks(figure)
    return figure


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
    if legend.orientation is None and len(names) > 1 and max(map(len, names)) > LONG_NAME_CHARS:
        # a legend of long names at the right would squeeze the plot to a strip: put it below
        figure.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, x=0))
    below = legend.orientation == "h" and legend.y is not None and legend.y < 0
    entries = sum(1 for t in figure.data if t.showlegend is not False and t.name)
    if below and figure.layout.height is None and entries > 4:
        figure.update_layout(height=min(MAX_HEIGHT_PX, BASE_HEIGHT_PX + LEGEND_ROW_PX * entries))


def _thin_log_ticks(figure: go.Figure) -> None:
    for key in [k for k in figure.layout if k.startswith("yaxis")]:
        axis = figure.layout[key]
        if axis.type != "log" or axis.dtick not in (1, "1"):
            continue
        ref = "y" + key[5:]
        values = [v for t in figure.data if (getattr(t, "yaxis", None) or "y") == ref and getattr(t, "y", None) is not None
                  for v in t.y if isinstance(v, (int, float)) and v > 0 and math.isfinite(v)]
        if values:
            decades = math.log10(max(values) / min(values))
            if decades > MAX_LOG_LABELS:
                axis.dtick = math.ceil(decades / MAX_LOG_LABELS)


def _axis_title(figure: go.Figure, kind: str, ref: str | None) -> str | None:
    axis = figure.layout[kind + (ref or kind[0])[1:]]
    title = axis.title.text if axis is not None and axis.title is not None else None
    return title.split(" (")[0] if title else None  # "loss (log scale)" -> "loss"
