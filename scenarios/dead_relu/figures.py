"""Dead ReLU, drawn: dead units per layer and step, the gradient norm, pre-activation histograms,
and the born-dead probability by width and depth (the loss is the shared `curves_figure`)."""
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from scenarios.plotting import full_width, layout
from scenarios.records import Records

BORN_PREFIX = "born_dead/width_"


def dead_heatmaps_figure(records: Records, arms: list[str]) -> go.Figure:
    fig = make_subplots(rows=2, cols=len(arms), shared_xaxes=True, shared_yaxes=True, vertical_spacing=0.08,
                        horizontal_spacing=0.03, subplot_titles=arms)
    rows = (("frac_dead", "dead", "dead: zero gradient<br>hidden layer"),
            ("frac_never_positive", "never > 0", "output never > 0<br>hidden layer"))
    for row, (prefix, word, y_title) in enumerate(rows, start=1):
        for col, arm in enumerate(arms, start=1):
            grid = records.layers(arm, prefix).T  # (layer, step)
            fig.add_heatmap(x=grid.columns, y=grid.index, z=grid.to_numpy() * 100, zmin=0, zmax=100, colorscale="Reds",
                            showscale=row == 1 and col == 1, colorbar=dict(title="% of units", len=0.9), row=row, col=col,
                            hovertemplate=f"{arm}<br>step %{{x}}<br>layer %{{y}}<br>%{{z:.0f}}% {word}<extra></extra>")
            fig.update_xaxes(title_text="step" if row == 2 else None, row=row, col=col)
        fig.update_yaxes(title_text=y_title, dtick=1, row=row, col=1)
    fig.update_layout(title="Dead units per layer and step, on the 256 inputs", height=520,
                      margin=dict(l=70, r=20, t=80, b=50))
    return full_width(fig)  # one panel per arm and row: in half a narrow page their titles ran together


def total_grad_norm(records: Records, arm: str) -> pd.Series:
    """‖∂L/∂W‖ over all hidden layers = √(Σ_l ‖∂L/∂W_l‖²), by step."""
    grads = records.layers(arm, "grad_norm")
    return np.sqrt((grads ** 2).sum(axis=1)) if not grads.empty else pd.Series(dtype=float)


def grad_norm_figure(records: Records, arms: list[str], colors: dict[str, str]) -> go.Figure:
    totals = {arm: total_grad_norm(records, arm) for arm in arms}
    positive = [v for total in totals.values() for v in total if v > 0]
    floor = min(positive) / 10 if positive else 1e-12  # where "exactly 0" is drawn on the log axis
    fig = go.Figure()
    for arm, total in totals.items():
        zero = total <= 0
        fig.add_scatter(x=total.index, y=total.where(~zero), name=arm, mode="lines", line=dict(color=colors.get(arm)),
                        hovertemplate=f"{arm}<br>step %{{x}}<br>‖∂L/∂W‖ %{{y:.3g}}<extra></extra>")
        if zero.any():
            fig.add_scatter(x=total.index[zero], y=[floor] * int(zero.sum()), name=f"{arm}: exactly 0", mode="markers",
                            marker=dict(color=colors.get(arm), symbol="x", size=6),
                            hovertemplate=f"{arm}<br>step %{{x}}<br>gradient exactly 0<extra></extra>")
    return layout(fig, "Gradient norm of all hidden layers", "step", "‖∂L/∂W‖ over hidden layers (log scale)", log_y=True)


def histogram_of(records: Records, arm: str, name: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(bin edges, fractions) of the latest binning recorded under `name` (`preact_end/layer_02`)."""
    bins = sorted(m for m in records.metrics(arm) if m.startswith(name + "/bin_"))
    if not bins or not records.has(name + "/lo", arm):
        return None
    fractions = np.array([records.last(arm, m) for m in bins])
    return np.linspace(records.last(arm, name + "/lo"), records.last(arm, name + "/hi"), len(bins) + 1), fractions


def histograms_figure(records: Records, arms: list[str], colors: dict[str, str], layer: int) -> go.Figure:
    fig = make_subplots(rows=1, cols=len(arms), subplot_titles=arms, horizontal_spacing=0.06)
    for col, arm in enumerate(arms, start=1):
        for kind, label, opacity in (("preact_start", "start", 0.4), ("preact_end", "end", 0.85)):
            histogram = histogram_of(records, arm, f"{kind}/layer_{layer:02d}")
            if histogram is None:
                continue
            edges, fractions = histogram
            fig.add_bar(x=(edges[:-1] + edges[1:]) / 2, y=fractions * 100, width=np.diff(edges), opacity=opacity,
                        marker_color=colors[arm], name=f"{arm} · {label}", row=1, col=col,
                        hovertemplate=f"{arm} · {label}<br>z ≈ %{{x:.3g}}<br>%{{y:.1f}}% of values<extra></extra>")
        fig.add_vline(x=0, line_dash="dot", line_color="gray", row=1, col=col)
        fig.update_xaxes(title_text="pre-activation z", row=1, col=col)
    fig.update_yaxes(title_text="% of (unit, input) pairs", row=1, col=1)
    fig.update_layout(title=f"Pre-activations of layer {layer} on the 256 inputs: start (faint) vs end",
                      barmode="overlay", margin=dict(l=60, r=20, t=70, b=50), legend=dict(orientation="h", y=-0.25))
    return fig


def born_dead(records: Records, arm: str) -> dict[int, pd.Series]:
    """width -> P(born dead) indexed by depth, widths in increasing order."""
    names = [m for m in records.metrics(arm) if m.startswith(BORN_PREFIX)]
    return {int(m[len(BORN_PREFIX):]): records.series(arm, m) for m in sorted(names, key=lambda m: int(m[len(BORN_PREFIX):]))}


def born_heatmap_figure(born: dict[int, pd.Series]) -> go.Figure:
    grid = pd.DataFrame(born)  # (depth, width); a width still being sampled has gaps
    fig = go.Figure(go.Heatmap(x=[str(w) for w in grid.columns], y=grid.index, z=grid.to_numpy() * 100, zmin=0, zmax=100,
                               colorscale="Reds", colorbar=dict(title="% born dead"),
                               hovertemplate="width %{x}<br>depth %{y}<br>%{z:.1f}% born dead<extra></extra>"))
    fig.update_xaxes(type="category")
    return layout(fig, "Born dead at init: P(output constant on [-1, 1]²)", "width (units per layer)", "depth (hidden layers)")


def born_curves_figure(born: dict[int, pd.Series]) -> go.Figure:
    widths = list(born)
    shades = sample_colorscale("Viridis", [0.85 * i / max(1, len(widths) - 1) for i in range(len(widths))]) if widths else []
    fig = go.Figure()
    for (width, p), shade in zip(born.items(), shades):
        fig.add_scatter(x=p.index, y=p.to_numpy() * 100, name=f"width {width}", mode="lines", line=dict(color=shade),
                        hovertemplate=f"width {width}<br>depth %{{x}}<br>%{{y:.1f}}% born dead<extra></extra>")
    fig = layout(fig, "Born dead: probability vs depth, one line per width", "depth (hidden layers)", "% of networks born dead")
    fig.update_layout(legend_title_text="width")
    return fig
