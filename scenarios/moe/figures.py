"""Mixture of experts, drawn: the load per expert, the largest share, the balancing loss, the
z-loss, the dropped share at three capacity factors, and the held-out error of every arm."""
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from scenarios.plotting import curves_figure, layout
from scenarios.records import Records

FACTORS = ("1", "1.25", "2")  # engines.supervised.moe.CAPACITY_FACTORS as the metrics name them
LOAD = "load/expert_"
BALANCE_LABEL = "perfect balance: 1 (the loss = α)"


def load_table(records: Records, arm: str) -> pd.DataFrame:
    """step × expert: f_i, the share of the held-out assignments routed to expert i (0-based)."""
    names = sorted(m for m in records.metrics(arm) if m.startswith(LOAD))
    if not names:
        return pd.DataFrame()
    return pd.DataFrame({int(m[len(LOAD):]): records.series(arm, m) for m in names}).sort_index().dropna()


def load_figure(records: Records, moe_arms: list[str], n_experts: int) -> go.Figure:
    titles = [arm.replace(", ", ",<br>").replace(" + ", " +<br>") for arm in moe_arms]  # three narrow panels
    fig = make_subplots(rows=1, cols=len(moe_arms), shared_yaxes=True, subplot_titles=titles, horizontal_spacing=0.04)
    fig.update_annotations(font_size=12)
    shades = sample_colorscale("Turbo", [0.05 + 0.9 * e / max(1, n_experts - 1) for e in range(n_experts)])
    for col, arm in enumerate(moe_arms, start=1):
        table = load_table(records, arm)
        for e, shade in zip(table.columns, shades):
            fig.add_scatter(x=table.index, y=table[e] * 100, mode="lines", line=dict(color=shade, width=1.5),
                            name=f"expert {e}", legendgroup=f"expert {e}", showlegend=col == 1, row=1, col=col,
                            hovertemplate=f"{arm}<br>expert {e}<br>step %{{x}}<br>%{{y:.1f}}% of assignments<extra></extra>")
        fig.add_hline(y=100 / n_experts, line_dash="dot", line_color="gray", row=1, col=col)
        fig.update_xaxes(title_text="step", row=1, col=col)
    fig.update_yaxes(title_text="% of assignments (held-out set)", row=1, col=1)
    # the legend's top 0.3 of the plot's height below it: at y = −0.22, anchored at its bottom, the expert rows
    # grew up onto the three "step" titles
    fig.update_layout(title=f"Load per expert (dotted: even, 1/E = {100 / n_experts:.1f}%)", height=440,
                      margin=dict(l=60, r=20, t=100, b=50), legend=dict(orientation="h", yanchor="top", y=-0.3, x=0))
    return fig


def top_share_figure(records: Records, colors: dict[str, str], moe_arms: list[str], n_experts: int) -> go.Figure:
    fig = go.Figure()
    for arm in moe_arms:
        series = records.series(arm, "top_share") * n_experts
        fig.add_scatter(x=series.index, y=series, name=arm, mode="lines", line=dict(color=colors[arm]),
                        hovertemplate=f"{arm}<br>step %{{x}}<br>busiest expert: %{{y:.2f}}× 1/E<extra></extra>")
    fig.add_hline(y=1, line_dash="dot", line_color="gray", annotation_text="even load", annotation_position="bottom right")
    return layout(fig, "The busiest expert's share, in units of 1/E", "step", "largest f_i ÷ (1/E)")


def balance_figure(records: Records, colors: dict[str, str], moe_arms: list[str]) -> go.Figure:
    fig = go.Figure()
    for arm in moe_arms:
        series = records.series(arm, "aux_unit")
        fig.add_scatter(x=series.index, y=series, name=arm, mode="lines", line=dict(color=colors[arm]),
                        hovertemplate=f"{arm}<br>step %{{x}}<br>E·Σ f_i·P_i = %{{y:.3f}}<extra></extra>")
    # the axis is the loss ÷ α, so the line's label gives its value on this axis: 1 (the loss itself is α there)
    fig.add_hline(y=1, line_dash="dot", line_color="gray", annotation_text=BALANCE_LABEL,
                  annotation_position="bottom right")
    return layout(fig, "Balancing loss ÷ α = E·Σ f_i·P_i (held-out set)", "step", "E·Σ f_i·P_i")


def dropped_figure(records: Records, colors: dict[str, str], moe_arms: list[str]) -> go.Figure:
    fig = go.Figure()
    for arm in moe_arms:
        values = [records.last(arm, f"dropped/cf_{f}") for f in FACTORS]
        if all(v is None for v in values):
            continue
        # the factor alone under each group (the axis title names it: "capacity factor 1.25" was cut off)
        fig.add_bar(x=[str(f) for f in FACTORS], y=[100 * (v or 0) for v in values], name=arm,
                    marker_color=colors[arm], text=[f"{100 * (v or 0):.1f}%" for v in values], textposition="outside",
                    textfont=dict(size=11),
                    hovertemplate=f"{arm}<br>capacity factor %{{x}}<br>%{{y:.1f}}% of assignments dropped<extra></extra>")
    # the legend below and the labels at 10 px at least: beside a legend the nine bars were too narrow to
    # hold their labels, which plotly then shrank to ~6 px
    fig.update_layout(barmode="group", uniformtext=dict(minsize=10, mode="show"),
                      legend=dict(orientation="h", yanchor="top", y=-0.25, x=0))
    fig.update_xaxes(type="category")
    return layout(fig, "Dropped at the last step: assignments past C = ⌈factor·T·k/E⌉ (T = batch)", "capacity factor",
                  "% of assignments dropped")


def z_loss_figure(records: Records, colors: dict[str, str], moe_arms: list[str]) -> go.Figure:
    return curves_figure(records, colors, "z_loss", arms=moe_arms, title="Router z-loss: mean (logsumexp of the logits)²",
                         y_title="z-loss", log_y=True)


def quality_figure(records: Records, colors: dict[str, str], arms: list[str], variance: float | None) -> go.Figure:
    return curves_figure(records, colors, "test_mse", arms=arms, title="Held-out error, MoE against dense",
                         y_title="held-out mean squared error", log_y=True, chance=variance,
                         chance_label=f"constant output: Var(y) = {variance:.3f}" if variance else "")


NO_AUX, AUX, TOP2 = "top-1, no balancing loss", "top-1 + balancing loss", "top-2 + balancing loss"
DENSE_ACTIVE, DENSE_TOTAL = "dense, same active params", "dense, same total params"
MOE_ARMS, DENSE_ARMS = [NO_AUX, AUX, TOP2], [DENSE_ACTIVE, DENSE_TOTAL]
