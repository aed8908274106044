"""DPO β's figures: each level's reward-vs-KL frontier against the exact optimum π*, the tabular
policy against π*, and per-step log-probabilities, implicit-reward margins and loss per β arm."""
import math
from collections.abc import Iterator

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.plotting import layout

LOG2 = math.log(2)  # the DPO loss at π = π_ref, drawn as a reference line


def arm_tables(wide: dict[str, pd.DataFrame], level: str,
               colors: dict[str, str]) -> Iterator[tuple[str, str, pd.DataFrame]]:
    """(trace name, color, step × metric table) per β arm of a level, in run order. An overlaid run's
    arms ("tabular β=0.1 [label]") keep their β's color and their tag in the name."""
    for arm, table in wide.items():
        if arm.startswith(f"{level} β="):
            beta, _, tag = arm.removeprefix(f"{level} ").partition(" ")
            yield (f"{beta} {tag}" if tag else beta), colors.get(beta, "gray"), table


def column(table: pd.DataFrame, metric: str) -> pd.Series:
    return table[metric].dropna() if metric in table else pd.Series(dtype=float)


def frontier_figure(wide: dict[str, pd.DataFrame], level: str, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    curve = wide.get(f"{level} π*", pd.DataFrame())
    if "frontier/kl" in curve:
        curve = curve[curve["frontier/kl"] > 1e-4]
        fig.add_scatter(x=curve["frontier/kl"], y=curve["frontier/true_reward"], mode="lines", name="π* (exact optimum)",
                        line=dict(color="gray", width=2), customdata=curve["frontier/beta"],
                        hovertemplate="π* at β=%{customdata:.3g}<br>KL %{x:.3g} nats<br>E[r] %{y:.3f}<extra></extra>")
    optima = []
    for beta, color, table in arm_tables(wide, level, colors):
        path = table[table["kl"] > 1e-4] if "kl" in table else table.iloc[:0]  # KL is 0 at step 0: off a log axis
        fig.add_scatter(x=column(path, "kl"), y=column(path, "true_reward"), mode="lines+markers", name=beta,
                        line=dict(color=color), marker=dict(size=[4] * (len(path) - 1) + [11]), customdata=path.index,
                        hovertemplate=f"{beta}<br>step %{{customdata}}<br>KL %{{x:.3g}} nats<br>E[r] %{{y:.3f}}<extra></extra>")
        if "optimum/kl" in table:
            optima.append((beta, color, table["optimum/kl"].dropna().iloc[0], table["optimum/true_reward"].dropna().iloc[0]))
    if optima:
        labels, marker_colors, kls, rewards = zip(*optima)
        fig.add_scatter(x=kls, y=rewards, mode="markers", name="π* for that β", text=labels,
                        marker=dict(symbol="diamond-open", size=13, color=list(marker_colors), line=dict(width=2)),
                        hovertemplate="π* at %{text}<br>KL %{x:.3g} nats<br>E[r] %{y:.3f}<extra></extra>")
    fig.update_xaxes(type="log", exponentformat="power")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return layout(fig, f"{level.capitalize()}: reward vs KL, learned path and π* (◇)", "KL(π‖π_ref) (nats, log scale)",
                  "expected true reward E_π[r]")


def policy_figure(wide: dict[str, pd.DataFrame], colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    task = wide.get("tabular π*", pd.DataFrame()).bfill().iloc[:1]
    keys = sorted((m.split("/")[1] for m in task if m.startswith("true_reward/")), key=lambda k: task[f"true_reward/{k}"].iloc[0])
    labels = [f"r={task[f'true_reward/{k}'].iloc[0]:.2f}" for k in keys]
    if keys:
        fig.add_bar(x=labels, y=[task[f"reference/{k}"].iloc[0] for k in keys], name="π_ref", marker_color="lightgray",
                    hovertemplate="π_ref<br>%{x}<br>prob %{y:.3g}<extra></extra>")
    for beta, color, table in arm_tables(wide, "tabular", colors):
        if keys and f"optimum/{keys[0]}" in table:
            fig.add_scatter(x=labels, y=[column(table, f"optimum/{k}").iloc[0] for k in keys], mode="lines",
                            name=f"{beta} π*", line=dict(color=color, dash="dash", width=1), legendgroup=beta,
                            showlegend=False, hovertemplate=f"π* at {beta}<br>%{{x}}<br>prob %{{y:.3g}}<extra></extra>")
        if keys and f"policy/{keys[0]}" in table:
            fig.add_scatter(x=labels, y=[column(table, f"policy/{k}").iloc[-1] for k in keys], mode="markers",
                            name=beta, marker=dict(color=color, size=9), legendgroup=beta,
                            hovertemplate=f"{beta} learned<br>%{{x}}<br>prob %{{y:.3g}}<extra></extra>")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, x=0))
    return layout(fig, "Tabular: learned policy (dots) vs π* ∝ π_ref·exp(r/β) (dashes)",
                  "response, sorted by true reward r", "probability (log scale)", log_y=True)


def add_curve(fig: go.Figure, table: pd.DataFrame, metric: str, name: str, color: str, *, dash: str = "solid",
              label: str | None = None, **kwargs) -> None:
    """One metric of one arm over steps; hover names the arm, the step and the value."""
    points = column(table, metric)
    fig.add_scatter(x=points.index, y=points, mode="lines", name=name, line=dict(color=color, dash=dash),
                    hovertemplate=f"{label or name}<br>step %{{x}}<br>{metric} %{{y:.4g}}<extra></extra>", **kwargs)


def logps_figure(wide: dict[str, pd.DataFrame], level: str, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    for beta, color, table in arm_tables(wide, level, colors):
        for side, dash in (("chosen", "solid"), ("rejected", "dot")):
            add_curve(fig, table, f"dataset/logps_{side}", beta, color, dash=dash, label=f"{beta} {side}",
                      legendgroup=beta, showlegend=side == "chosen")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return layout(fig, f"{level.capitalize()}: log π of chosen (solid) and rejected (dotted)", "step",
                  "mean log π(y) over the pairs (nats)")


def margins_figure(wide: dict[str, pd.DataFrame], level: str, colors: dict[str, str]) -> go.Figure:
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    for beta, color, table in arm_tables(wide, level, colors):
        for row, metric in ((1, "rewards/margins"), (2, "rewards/accuracies")):
            add_curve(fig, table, metric, beta, color, legendgroup=beta, showlegend=row == 1, row=row, col=1)
    fig.update_yaxes(title_text="rewards/margins", row=1, col=1)
    fig.update_yaxes(title_text="rewards/accuracies", range=[0, 1.02], row=2, col=1)
    fig.update_xaxes(title_text="step", row=2, col=1)
    fig.update_layout(title=f"{level.capitalize()}: implicit-reward margin and accuracy (trl's logs)",
                      margin=dict(l=60, r=20, t=50, b=50), legend_title_text="arm", hovermode="closest")
    return fig


def loss_figure(wide: dict[str, pd.DataFrame], levels: list[str], colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    for level, dash in zip(levels, ("solid", "dot")):
        for beta, color, table in arm_tables(wide, level, colors):
            add_curve(fig, table, "loss", f"{level} {beta}", color, dash=dash)
    fig.add_hline(y=LOG2, line_dash="dash", line_color="gray", annotation_text="log 2 (π = π_ref)",
                  annotation_position="top right")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return layout(fig, "DPO loss" + (" (tabular solid, sequence dotted)" if len(levels) > 1 else ""), "step", "loss (nats)")
