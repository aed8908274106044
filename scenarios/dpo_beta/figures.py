"""DPO β's figures: each level's reward-vs-KL frontier against the exact optimum π*, the tabular
policy against π*, and per-step log-probabilities and implicit-reward margins per β arm (with the
pairs' true Bradley–Terry gap). Everything reads the frame through `Records`."""
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.plotting import add_curve, layout
from scenarios.records import Records

LOG2 = math.log(2)  # the DPO loss at π = π_ref, drawn as a reference line
FAR_ABOVE = 2.0  # an arm peaking more than this many of the other curves' spans above their top is drawn off the top


def arm_of(level: str, beta: float) -> str:
    return f"{level} β={beta:g}"


def beta_label(beta: float) -> str:
    return f"β={beta:g}"


def optimum_arm(level: str) -> str:
    return f"{level} π*"


def beta_arms(records: Records, level: str, betas: list[float], colors: dict[str, str]) -> list[tuple[str, str, str]]:
    """(β label, colour, arm) for each β arm of a level that has records, in sweep order."""
    return [(beta_label(b), colors.get(beta_label(b), "gray"), arm_of(level, b)) for b in betas
            if arm_of(level, b) in records.arms()]


def paired(records: Records, arm: str, x: str, y: str) -> pd.DataFrame:
    """Two metrics of one arm side by side, on the steps where both are recorded."""
    return pd.concat({x: records.series(arm, x), y: records.series(arm, y)}, axis=1).dropna()


def frontier_figure(records: Records, level: str, betas: list[float], colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    curve = paired(records, optimum_arm(level), "frontier/kl", "frontier/true_reward")
    if len(curve):
        beta = records.series(optimum_arm(level), "frontier/beta")
        curve = curve[curve["frontier/kl"] > 1e-4]
        fig.add_scatter(x=curve["frontier/kl"], y=curve["frontier/true_reward"], mode="lines", name="π* (exact optimum)",
                        line=dict(color="gray", width=2), customdata=beta.loc[curve.index],
                        hovertemplate="π* at β=%{customdata:.3g}<br>KL %{x:.3g} nats<br>E[r] %{y:.3f}<extra></extra>")
    optima = []
    for label, color, arm in beta_arms(records, level, betas, colors):
        path = paired(records, arm, "kl", "true_reward")
        path = path[path["kl"] > 1e-4]  # KL is 0 at step 0: off a log axis
        fig.add_scatter(x=path["kl"], y=path["true_reward"], mode="lines+markers", name=label, line=dict(color=color),
                        marker=dict(size=[4] * (len(path) - 1) + [11]), customdata=path.index,
                        hovertemplate=f"{label}<br>step %{{customdata}}<br>KL %{{x:.3g}} nats<br>E[r] %{{y:.3f}}<extra></extra>")
        kl, reward = records.first(arm, "optimum/kl"), records.first(arm, "optimum/true_reward")
        if kl is not None and reward is not None:
            optima.append((label, color, kl, reward))
    if optima:
        labels, marker_colors, kls, rewards = zip(*optima)
        fig.add_scatter(x=kls, y=rewards, mode="markers", name="π* for that β", text=labels,
                        marker=dict(symbol="diamond-open", size=13, color=list(marker_colors), line=dict(width=2)),
                        hovertemplate="π* at %{text}<br>KL %{x:.3g} nats<br>E[r] %{y:.3f}<extra></extra>")
    fig.update_xaxes(type="log", exponentformat="power")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return layout(fig, f"{level.capitalize()}: reward vs KL, learned path and π* (◇)", "KL(π‖π_ref) (nats, log scale)",
                  "expected true reward E_π[r]")


def policy_figure(records: Records, betas: list[float], colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    task = optimum_arm("tabular")
    keys = [m.split("/")[1] for m in records.metrics(task) if m.startswith("true_reward/")]
    keys = [k for k in keys if records.has(f"reference/{k}", task)]
    keys.sort(key=lambda k: records.first(task, f"true_reward/{k}"))
    labels = [f"r={records.first(task, f'true_reward/{k}'):.2f}" for k in keys]
    if keys:
        fig.add_bar(x=labels, y=[records.first(task, f"reference/{k}") for k in keys], name="π_ref",
                    marker_color="lightgray", hovertemplate="π_ref<br>%{x}<br>prob %{y:.3g}<extra></extra>")
    for label, color, arm in beta_arms(records, "tabular", betas, colors):
        if keys and all(records.has(f"optimum/{k}", arm) for k in keys):
            fig.add_scatter(x=labels, y=[records.first(arm, f"optimum/{k}") for k in keys], mode="lines",
                            name=f"{label} π*", line=dict(color=color, dash="dash", width=1), legendgroup=label,
                            showlegend=False, hovertemplate=f"π* at {label}<br>%{{x}}<br>prob %{{y:.3g}}<extra></extra>")
        if keys and all(records.has(f"policy/{k}", arm) for k in keys):
            fig.add_scatter(x=labels, y=[records.last(arm, f"policy/{k}") for k in keys], mode="markers",
                            name=label, marker=dict(color=color, size=9), legendgroup=label,
                            hovertemplate=f"{label} learned<br>%{{x}}<br>prob %{{y:.3g}}<extra></extra>")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, x=0))
    return layout(fig, "Tabular: learned policy (dots) vs π* ∝ π_ref·exp(r/β) (dashes)",
                  "response, sorted by true reward r", "probability (log scale)", log_y=True)



def logps_figure(records: Records, level: str, betas: list[float], colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    for label, color, arm in beta_arms(records, level, betas, colors):
        for side, dash in (("chosen", "solid"), ("rejected", "dot")):
            add_curve(fig, records, arm, f"dataset/logps_{side}", label, color, dash=dash, label=f"{label} {side}",
                      legendgroup=label, showlegend=side == "chosen")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return layout(fig, f"{level.capitalize()}: log π of chosen (solid) and rejected (dotted)", "step",
                  "mean log π(y) over the pairs (nats)")


def margins_figure(records: Records, level: str, betas: list[float], colors: dict[str, str],
                   last_step: int) -> go.Figure:
    """trl's margin and accuracy per β, and the pairs' mean true reward gap r_w − r_l: with soft
    Bradley–Terry labels, the margin that minimises the loss."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    for label, color, arm in beta_arms(records, level, betas, colors):
        for row, metric in ((1, "rewards/margins"), (2, "rewards/accuracies")):
            add_curve(fig, records, arm, metric, label, color, legendgroup=label, showlegend=row == 1, row=row, col=1)
    gap = records.first(optimum_arm(level), "pairs/true_margin")
    if gap is not None:
        fig.add_scatter(x=[0, last_step], y=[gap, gap], mode="lines", name="true gap r_w − r_l (Bradley–Terry)",
                        line=dict(color="gray", dash="dash"), row=1, col=1,
                        hovertemplate="mean r(y_w) − r(y_l) over the pairs<br>%{y:.4g}<extra></extra>")
    fig.update_yaxes(title_text="rewards/margins", row=1, col=1)
    fig.update_yaxes(title_text="rewards/accuracies", range=[0, 1.02], row=2, col=1)
    fig.update_xaxes(title_text="step", row=2, col=1)
    fig.update_layout(title=f"{level.capitalize()}: implicit-reward margin and accuracy (trl's logs)",
                      margin=dict(l=60, r=20, t=50, b=50), legend_title_text="arm", hovermode="closest")
    return fig



LAST = {"kl": "kl", "true_reward": "true_reward", "tv_to_optimum": "tv_to_optimum", "accuracy": "rewards/accuracies",
        "margin": "rewards/margins", "loss": "loss", "chosen_logp": "dataset/logps_chosen",
        "rejected_logp": "dataset/logps_rejected", "policy_mass": "dataset/policy_mass"}
FIRST = {"first_loss": "loss", "optimum_kl": "optimum/kl", "optimum_true_reward": "optimum/true_reward",
         "first_chosen_logp": "dataset/logps_chosen", "first_rejected_logp": "dataset/logps_rejected",
         "first_policy_mass": "dataset/policy_mass"}


def arm_summary(records: Records, arm: str) -> dict:
    """One β arm for summary.json: its last and first values of the metrics that tell its story."""
    losses = records.values(arm, "loss")
    return {"last_step": records.last_step(arm, "loss"), "max_loss": float(losses.max()) if len(losses) else None,
            "diverged_at": records.diverged_at(arm), **{key: records.last(arm, m) for key, m in LAST.items()},
            **{key: records.first(arm, m) for key, m in FIRST.items()}}


def follow_bulk(fig: go.Figure, records: Records, arms: list[str], metric: str, reference: float) -> go.Figure:
    """Fit the y range to most curves and `reference` when a few arms (at most half) peak far above them: one
    spike would squash the rest into a sliver. Each arm left off the top says its peak in the legend and a ▲
    marks the step; its hover keeps every value."""
    values = {arm: v[np.isfinite(v)] for arm in arms if len(v := records.values(arm, metric))}
    values = {arm: v for arm, v in values.items() if len(v)}
    if len(values) < 3 or fig.layout.yaxis.type == "log":
        return fig
    order = sorted(values, key=lambda arm: values[arm].max(), reverse=True)
    for k in range(1, len(order) // 2 + 1):
        rest = np.concatenate([values[arm] for arm in order[k:]] + [[reference]])
        top, span = float(rest.max()), float(rest.max() - rest.min())
        if span > 0 and values[order[k - 1]].max() > top + FAR_ABOVE * span:
            break
    else:
        return fig
    fig.update_yaxes(range=[float(rest.min()) - 0.08 * span, top + 0.08 * span])
    for arm in order[:k]:
        series, peak = records.series(arm, metric), float(values[arm].max())  # finite: a diverged arm's inf is not a peak
        step = int(series.index[series.to_numpy() == peak][0])
        color = next(trace.line.color for trace in fig.data if trace.name == arm)
        fig.update_traces(name=f"{arm} (▲ peak {peak:.3g})", selector=dict(name=arm))
        fig.add_annotation(x=step, y=1, yref="paper", yanchor="bottom", text="▲", showarrow=False,
                           font=dict(color=color, size=12), hovertext=f"{arm}: peak {peak:.4g} at step {step}, above the range drawn")
    return fig
