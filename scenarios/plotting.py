"""Shared figure helpers, so every scenario's plots look alike: one color per arm on
every figure of a page, labelled axes, hover that names arm/step/value."""
import pandas as pd
import plotly.graph_objects as go

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]


def arm_colors(arms: list[str]) -> dict[str, str]:
    return {arm: PALETTE[i % len(PALETTE)] for i, arm in enumerate(arms)}


def layout(fig: go.Figure, title: str, x_title: str, y_title: str, *, log_y: bool = False) -> go.Figure:
    fig.update_layout(title=title, margin=dict(l=60, r=20, t=50, b=50), legend_title_text="arm",
                      hovermode="closest")
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title, type="log" if log_y else "linear", exponentformat="power")
    if log_y:
        fig.update_yaxes(dtick=log_dtick(fig))
    return fig


def full_width(fig: go.Figure) -> go.Figure:
    """Ask the page to give this figure the whole width (long axes, several rows of subplots)."""
    fig.update_layout(meta={"full_width": True})
    return fig


def is_full_width(fig: go.Figure) -> bool:
    return isinstance(fig.layout.meta, dict) and bool(fig.layout.meta.get("full_width"))


def log_dtick(fig: go.Figure) -> int | str:
    """Label every decade when the data spans several; else decades plus 2s and 5s ("D2")."""
    values = [v for trace in fig.data if trace.y is not None for v in trace.y if v is not None and v > 0]
    if not values:
        return "D2"
    import math
    return 1 if math.log10(max(values) / min(values)) > 2 else "D2"


def metric_series(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Rows of one metric, sorted by arm then step."""
    return frame[frame["metric"] == metric].sort_values(["arm", "step"])


def layer_table(frame: pd.DataFrame, prefix: str) -> pd.DataFrame:
    """Per-layer rows (`prefix/layer_XX`) with an integer `layer` column (1-based)."""
    head = prefix + "/layer_"
    rows = frame[frame["metric"].str.startswith(head)]
    return rows.assign(layer=rows["metric"].str.slice(len(head)).astype(int))


def arms_in_order(frame: pd.DataFrame) -> list[str]:
    return [str(arm) for arm in frame["arm"].unique()]  # unique() keeps first-seen order
