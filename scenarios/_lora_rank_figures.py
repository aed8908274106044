"""LoRA rank sweep, drawn: loss per arm, final loss and trainable parameters against rank, the
full fine-tune's singular values, and the subspace similarity φ of two ranks' learned A.
"""
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engines.lora import FULL, WIDTH, comparison_ranks
from scenarios.plotting import layout, metric_series


def sv_profile(frame: pd.DataFrame, arm: str, target: str) -> np.ndarray:
    head = f"delta_sv/{target}/index_"
    rows = frame[(frame["arm"] == arm) & frame["metric"].str.startswith(head)]
    return rows.sort_values("metric")["value"].to_numpy()


def subspace_table(frame: pd.DataFrame, target: str) -> pd.DataFrame:
    """φ cells of one layer as a (i × j) table."""
    rows = frame[frame["metric"].str.startswith(f"subspace/{target}/")]
    parts = rows["metric"].str.extract(r"i_(\d+)/j_(\d+)$").astype(int)
    return rows.assign(i=parts[0], j=parts[1]).pivot_table(index="i", columns="j", values="value")


def loss_figure(frame: pd.DataFrame, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    losses = metric_series(frame, "loss")
    for arm in colors:
        rows = losses[losses["arm"] == arm]
        if len(rows):
            fig.add_scatter(x=rows["step"], y=rows["value"], name=arm, mode="lines", line=dict(color=colors[arm]),
                            hovertemplate=f"{arm}<br>step %{{x}}<br>MSE %{{y:.3g}}<extra></extra>")
    for _, row in metric_series(frame, "diverged").iterrows():
        fig.add_vline(x=row["step"], line_dash="dot", line_color=colors.get(row["arm"]),
                      annotation_text=f"{row['arm']} diverged at step {int(row['step'])}")
    base = metric_series(frame, "final/base_loss")["value"]
    if len(base) and len(losses):  # a trace, not add_hline: hline labels land off-target on log axes
        fig.add_scatter(x=[0, losses["step"].max()], y=[float(base.iloc[0])] * 2, mode="lines", name="base model",
                        line=dict(color="gray", dash="dash"),
                        hovertemplate="base model (B = 0)<br>MSE %{y:.3g}<extra></extra>")
    return layout(fig, "Training loss per arm", "step", "MSE to the task's targets (log scale)", log_y=True)


def full_line(fig: go.Figure, ranks: tuple[int, ...], value: float, colors: dict[str, str], what: str) -> None:
    """The full fine-tune's value as a dashed line across the swept ranks."""
    fig.add_scatter(x=[min(ranks), max(ranks)], y=[value, value], mode="lines", name=f"{FULL} fine-tune",
                    line=dict(color=colors.get(FULL), dash="dash"),
                    hovertemplate=f"{FULL} fine-tune<br>{what} %{{y:,.3g}}<extra></extra>")


def per_rank(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One row per LoRA arm that has `metric`: arm, step, value and its rank."""
    rows = metric_series(frame, metric)
    ranks = metric_series(frame, "rank").set_index("arm")["value"]
    rows = rows[(rows["arm"] != FULL) & rows["arm"].isin(ranks.index)]
    return rows.assign(rank=rows["arm"].map(ranks)).sort_values("rank")


def rank_axis(fig: go.Figure, ranks: tuple[int, ...], k: int) -> None:
    fig.update_xaxes(type="log", tickvals=list(ranks), ticktext=[str(r) for r in ranks])
    fig.add_vline(x=k, line_dash="dot", line_color="gray")
    # An annotation on a log axis takes log10(x); a shape takes x itself.
    fig.add_annotation(x=math.log10(k), y=1, yref="paper", text=f"k = {k}", showarrow=False,
                       xanchor="left", yanchor="top")


def rank_markers(fig: go.Figure, rows: pd.DataFrame, colors: dict[str, str], what: str) -> None:
    for _, row in rows.iterrows():
        fig.add_scatter(x=[row["rank"]], y=[row["value"]], name=row["arm"], mode="markers",
                        marker=dict(color=colors.get(row["arm"]), size=11),
                        hovertemplate=f"{row['arm']}<br>step {int(row['step'])}<br>{what} %{{y:.3g}}<extra></extra>")


def final_loss_figure(frame: pd.DataFrame, ranks: tuple[int, ...], k: int, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    rows = per_rank(frame, "final/relative_loss")
    fig.add_scatter(x=rows["rank"], y=rows["value"], mode="lines", line=dict(color="lightgray"), showlegend=False,
                    hoverinfo="skip")
    rank_markers(fig, rows, colors, "loss left")
    full = metric_series(frame[frame["arm"] == FULL], "final/relative_loss")["value"]
    if len(full):
        full_line(fig, ranks, float(full.iloc[0]), colors, "loss left")
    rank_axis(fig, ranks, k)
    return layout(fig, "Final loss vs LoRA rank", "LoRA rank r (log scale)",
                  "held-out MSE / base model's MSE (log scale)", log_y=True)


def params_figure(frame: pd.DataFrame, ranks: tuple[int, ...], targets: tuple[str, ...], k: int,
                  colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    layers = len(targets)
    fig.add_scatter(x=list(ranks), y=[r * 2 * WIDTH * layers for r in ranks], mode="lines",
                    name="r·(d_in + d_out)·layers", line=dict(color="gray", dash="dash"),
                    hovertemplate="r %{x}<br>%{y:,} parameters<extra>formula</extra>")
    rank_markers(fig, per_rank(frame, "trainable_params"), colors, "trainable parameters")
    full_line(fig, ranks, WIDTH * WIDTH * layers, colors, "trainable parameters")
    rank_axis(fig, ranks, k)
    return layout(fig, "Trainable parameters vs rank", "LoRA rank r (log scale)", "trainable parameters (log scale)",
                  log_y=True)


def singular_value_figure(frame: pd.DataFrame, targets: tuple[str, ...], k: int, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    shown = min(WIDTH, max(16, 2 * k))
    index = np.arange(1, shown + 1)
    fig.add_scatter(x=index, y=np.where(index <= k, 1.0, 0.0), mode="markers",
                    name=f"task's ΔW* (rank {k})",
                    marker=dict(color="gray", symbol="line-ew-open", size=14),
                    hovertemplate="index %{x}<br>σ %{y:.3f}<extra>task's ΔW*</extra>")
    for dash, target in zip(["solid", "dash"], targets):
        sv = sv_profile(frame, FULL, target)[:shown]
        fig.add_scatter(x=index[: len(sv)], y=sv, mode="lines+markers", name=f"full fine-tune · {target}",
                        line=dict(color=colors.get(FULL), dash=dash),
                        hovertemplate=f"full · {target}<br>index %{{x}}<br>σ %{{y:.3f}}<extra></extra>")
    return layout(fig, f"Singular values of the full fine-tune's ΔW (first {shown} of {WIDTH})",
                  "singular value index (largest first)", "singular value σ of ΔW")


def subspace_figure(frame: pd.DataFrame, ranks: tuple[int, ...], targets: tuple[str, ...], k: int) -> go.Figure:
    pair = comparison_ranks(ranks, k)
    small, large = pair if pair else ("?", "?")
    # Past j ≈ 16 the large rank's A spans most of ℝ^64 and φ → 1 whatever was learned: show the top directions.
    shown = max(16, 2 * k)
    fig = make_subplots(rows=1, cols=len(targets), subplot_titles=[f"layer {t}" for t in targets], shared_yaxes=True,
                        horizontal_spacing=0.05)
    for col, target in enumerate(targets, start=1):
        table = subspace_table(frame, target)
        table = table.loc[:, [j for j in table.columns if j <= shown]]
        fig.add_heatmap(x=table.columns, y=table.index, z=table.to_numpy(), zmin=0, zmax=1, colorscale="Viridis",
                        showscale=col == 1, colorbar=dict(title="φ"), row=1, col=col,
                        hovertemplate=f"{target}<br>top %{{y}} of r={small}, top %{{x}} of r={large}"
                                      "<br>φ %{z:.2f}<extra></extra>")
        fig.update_xaxes(title_text=f"j: top directions, r = {large}", row=1, col=col)
    fig.update_yaxes(title_text=f"i: top directions, r = {small}", dtick=1, row=1, col=1)
    fig.update_layout(title=f"Subspace similarity φ(i, j) of learned A: r = {small} vs r = {large}",
                      margin=dict(l=60, r=20, t=70, b=50))
    return fig
