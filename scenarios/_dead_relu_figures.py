"""Dead ReLU, drawn: dead units per layer and step, the loss against the constant-output line,
the gradient norm, pre-activation histograms, and the born-dead probability by width and depth."""
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from scenarios.plotting import layer_table, layout, metric_series


def dead_heatmaps_figure(frame: pd.DataFrame, arms: list[str]) -> go.Figure:
    fig = make_subplots(rows=2, cols=len(arms), shared_xaxes=True, shared_yaxes=True, vertical_spacing=0.08,
                        horizontal_spacing=0.03, subplot_titles=arms)
    rows = (("frac_dead", "dead", "dead: zero gradient<br>hidden layer"),
            ("frac_never_positive", "never > 0", "output never > 0<br>hidden layer"))
    for row, (prefix, word, y_title) in enumerate(rows, start=1):
        table = layer_table(frame, prefix)
        for col, arm in enumerate(arms, start=1):
            grid = table[table["arm"] == arm].pivot_table(index="layer", columns="step", values="value")
            fig.add_heatmap(x=grid.columns, y=grid.index, z=grid.to_numpy() * 100, zmin=0, zmax=100, colorscale="Reds",
                            showscale=row == 1 and col == 1, colorbar=dict(title="% of units", len=0.9), row=row, col=col,
                            hovertemplate=f"{arm}<br>step %{{x}}<br>layer %{{y}}<br>%{{z:.0f}}% {word}<extra></extra>")
            fig.update_xaxes(title_text="step" if row == 2 else None, row=row, col=col)
        fig.update_yaxes(title_text=y_title, dtick=1, row=row, col=1)
    fig.update_layout(title="Dead units per layer and step, on the 256 inputs", height=520,
                      margin=dict(l=70, r=20, t=80, b=50))
    return fig


def loss_figure(frame: pd.DataFrame, arms: list[str], colors: dict[str, str], constant_loss: float) -> go.Figure:
    fig = go.Figure()
    losses = metric_series(frame, "loss")
    for arm in arms:
        rows = losses[losses["arm"] == arm]
        if rows.empty:
            continue
        fig.add_scatter(x=rows["step"], y=rows["value"], name=arm, mode="lines", line=dict(color=colors.get(arm)),
                        hovertemplate=f"{arm}<br>step %{{x}}<br>loss %{{y:.4g}}<extra></extra>")
    fig.add_hline(y=constant_loss, line_dash="dash", line_color="gray",
                  annotation_text=f"constant output: Var(y) = {constant_loss:.3f}",
                  annotation_position="top right")
    return layout(fig, "Training loss", "step", "mean squared error (log scale)", log_y=True)


def grad_norm_figure(frame: pd.DataFrame, arms: list[str], colors: dict[str, str]) -> go.Figure:
    grads = layer_table(frame, "grad_norm")
    # ‖∂L/∂W‖ over all hidden layers = √(Σ_l ‖∂L/∂W_l‖²)
    total = grads.assign(norm=grads["value"] ** 2).groupby(["arm", "step"])["norm"].sum().pow(0.5).reset_index()
    positive = total["norm"][total["norm"] > 0]
    floor = float(positive.min()) / 10 if len(positive) else 1e-12  # where "exactly 0" is drawn on the log axis
    fig = go.Figure()
    for arm in arms:
        rows = total[total["arm"] == arm]
        zero = rows["norm"] <= 0
        fig.add_scatter(x=rows["step"], y=rows["norm"].where(~zero), name=arm, mode="lines", line=dict(color=colors.get(arm)),
                        hovertemplate=f"{arm}<br>step %{{x}}<br>‖∂L/∂W‖ %{{y:.3g}}<extra></extra>")
        if zero.any():
            fig.add_scatter(x=rows["step"][zero], y=[floor] * int(zero.sum()), name=f"{arm}: exactly 0", mode="markers",
                            marker=dict(color=colors.get(arm), symbol="x", size=6),
                            hovertemplate=f"{arm}<br>step %{{x}}<br>gradient exactly 0<extra></extra>")
    return layout(fig, "Gradient norm of all hidden layers", "step", "‖∂L/∂W‖ over hidden layers (log scale)", log_y=True)


def histograms_figure(frame: pd.DataFrame, arms: list[str], colors: dict[str, str], layer: int) -> go.Figure:
    fig = make_subplots(rows=1, cols=len(arms), subplot_titles=arms, horizontal_spacing=0.06)
    for col, arm in enumerate(arms, start=1):
        rows = frame[frame["arm"] == arm]
        for kind, label, opacity in (("preact_start", "start", 0.4), ("preact_end", "end", 0.85)):
            hist = rows[rows["metric"].str.startswith(kind + "/")]
            if hist.empty:
                continue
            at = hist[hist["step"] == hist["step"].max()].set_index("metric")["value"]  # the latest binning
            bins = at[at.index.str.startswith(kind + "/bin_")].sort_index()
            edges = np.linspace(at[kind + "/lo"], at[kind + "/hi"], len(bins) + 1)
            fig.add_bar(x=(edges[:-1] + edges[1:]) / 2, y=bins.to_numpy() * 100, width=np.diff(edges), opacity=opacity,
                        marker_color=colors[arm], name=f"{arm} · {label}", row=1, col=col,
                        hovertemplate=f"{arm} · {label}<br>z ≈ %{{x:.3g}}<br>%{{y:.1f}}% of values<extra></extra>")
        fig.add_vline(x=0, line_dash="dot", line_color="gray", row=1, col=col)
        fig.update_xaxes(title_text="pre-activation z", row=1, col=col)
    fig.update_yaxes(title_text="% of (unit, input) pairs", row=1, col=1)
    fig.update_layout(title=f"Pre-activations of layer {layer} on the 256 inputs: start (faint) vs end",
                      barmode="overlay", margin=dict(l=60, r=20, t=70, b=50), legend=dict(orientation="h", y=-0.25))
    return fig


def born_heatmap_figure(born: pd.DataFrame) -> go.Figure:
    """`born`: the born-dead rows with an integer `width` column; `step` is the depth."""
    grid = born.pivot_table(index="step", columns="width", values="value")
    fig = go.Figure(go.Heatmap(x=[str(w) for w in grid.columns], y=grid.index, z=grid.to_numpy() * 100, zmin=0, zmax=100,
                               colorscale="Reds", colorbar=dict(title="% born dead"),
                               hovertemplate="width %{x}<br>depth %{y}<br>%{z:.1f}% born dead<extra></extra>"))
    fig.update_xaxes(type="category")
    return layout(fig, "Born dead at init: P(output constant on [-1, 1]²)", "width (units per layer)", "depth (hidden layers)")


def born_curves_figure(born: pd.DataFrame) -> go.Figure:
    """`born`: the born-dead rows with an integer `width` column; `step` is the depth."""
    widths = sorted(born["width"].unique())
    shades = sample_colorscale("Viridis", [0.85 * i / max(1, len(widths) - 1) for i in range(len(widths))]) if widths else []
    fig = go.Figure()
    for width, shade in zip(widths, shades):
        rows = born[born["width"] == width].sort_values("step")
        fig.add_scatter(x=rows["step"], y=rows["value"] * 100, name=f"width {width}", mode="lines", line=dict(color=shade),
                        hovertemplate=f"width {width}<br>depth %{{x}}<br>%{{y:.1f}}% born dead<extra></extra>")
    fig = layout(fig, "Born dead: probability vs depth, one line per width", "depth (hidden layers)", "% of networks born dead")
    fig.update_layout(legend_title_text="width")
    return fig
