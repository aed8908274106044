"""RLHF beside DPO, drawn: the reward model's fit and calibration, the reward-vs-KL frontier, true
against reward-model reward over the steps, PPO's clip fraction and KL, and (tabular) each
response's probability under every policy. Everything reads the frame through `Records`."""
import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.plotting import add_curve, arm_colors, category_color, layout, spans_decades
from scenarios.records import Records

LOG2 = math.log(2)  # the Bradley–Terry loss of a reward model that scores every response alike
POLICIES = ("PPO", "DPO")


def colors(universe: list[str]) -> dict[str, str]:
    return arm_colors(universe, universe)


def paired(records: Records, arm: str, x: str, y: str) -> pd.DataFrame:
    """Two metrics of one arm side by side, on the steps where both are recorded."""
    return pd.concat({x: records.series(arm, x), y: records.series(arm, y)}, axis=1).dropna()



def subplots_layout(fig: go.Figure, title: str, y_titles: list[str]) -> go.Figure:
    for row, y_title in enumerate(y_titles, start=1):
        ref = "y" if row == 1 else f"y{row}"
        shown = [v for t in fig.data if (t.yaxis or "y") == ref and t.y is not None for v in t.y]
        fig.update_yaxes(title_text=y_title, type="log" if spans_decades(shown) else None, row=row, col=1)
    fig.update_xaxes(title_text="step", row=len(y_titles), col=1)
    fig.update_layout(title=title, margin=dict(l=60, r=20, t=50, b=50), legend_title_text="curve", hovermode="closest")
    return fig


def legend_by_panel(fig: go.Figure, top: str, bottom: str) -> None:
    """The legend in two titled groups, one per panel of a two-row figure: the same arm's solid line stands
    for another quantity in each. A click still hides one line."""
    for trace in fig.data:
        group = top if (trace.yaxis or "y") == "y" else bottom
        trace.update(legendgroup=group, legendgrouptitle_text=group)
    fig.update_layout(legend_groupclick="toggleitem")


def fit_figure(records: Records, palette: dict[str, str]) -> go.Figure:
    """The reward model's Bradley–Terry loss (its pairs, and held-out pairs) and its accuracy."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    arm, color = "reward model", palette["reward model"]
    add_curve(fig, records, arm, "loss", "NLL on its pairs", color, row=1, col=1)
    add_curve(fig, records, arm, "heldout/loss", "NLL on held-out pairs", color, dash="dot", row=1, col=1)
    add_curve(fig, records, arm, "accuracy", "agrees with its pairs' labels", color, row=2, col=1)
    add_curve(fig, records, arm, "heldout/accuracy", "orders held-out pairs as r does", color, dash="dot", row=2, col=1)
    steps = records.series(arm, "heldout/loss").index
    if len(steps):
        fig.add_scatter(x=[steps.min(), steps.max()], y=[LOG2, LOG2], mode="lines", name="log 2 (all scores equal)",
                        line=dict(color="gray", dash="dash"), row=1, col=1, hoverinfo="skip")
    fig.update_yaxes(range=[0, 1.02], row=2, col=1)
    legend_by_panel(fig, "top: loss", "bottom: accuracy")
    # the loss's formula in the title: as the top panel's axis title it ran taller than the panel
    return subplots_layout(fig, "Reward model: Bradley–Terry loss −log σ(r_φ(y_w) − r_φ(y_l)) and accuracy",
                           ["loss (nats)", "fraction of pairs"])


def calibration_figure(records: Records) -> go.Figure:
    """Held-out pairs binned by the predicted σ(r_φ(a) − r_φ(b)): the labeller's probability per bin."""
    fig = go.Figure()
    arm = "reward model"
    keys = sorted({m.split("/")[1] for m in records.metrics(arm) if m.startswith("calibration/")})
    rows = [(records.last(arm, f"calibration/{k}/predicted"), records.last(arm, f"calibration/{k}/labeller"),
             records.last(arm, f"calibration/{k}/pairs")) for k in keys]
    fig.add_scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfectly calibrated", line=dict(color="gray", dash="dash"),
                    hoverinfo="skip")
    if rows:
        predicted, labeller, pairs = zip(*rows)
        total = sum(pairs)
        fig.add_scatter(x=predicted, y=labeller, mode="lines+markers", name="reward model (one dot per bin)",
                        marker=dict(size=[6 + 24 * math.sqrt(n / total) for n in pairs], color=category_color(0),
                                    line=dict(width=1, color="black")), customdata=pairs,
                        hovertemplate="predicted %{x:.3f}<br>labeller %{y:.3f}<br>%{customdata:.0f} pairs<extra></extra>")
    ece = records.last(arm, "heldout/ece")
    title = "Reward model calibration, held-out pairs" + (f" (ECE {ece:.3f})" if ece is not None else "")
    fig.update_xaxes(range=[0, 1])
    fig.update_yaxes(range=[0, 1])
    return layout(fig, title, "predicted P(chosen ≻ rejected) = σ(r_φ(y_w) − r_φ(y_l))",
                  "labeller's P(chosen ≻ rejected)").update_layout(legend_title_text="")


def frontier_figure(records: Records, palette: dict[str, str], beta: float) -> go.Figure:
    """True reward against KL: the exact optimum π* for every β, the optimum of the reward model for
    every β (its true reward), PPO's and DPO's paths, and both optima at this β (◇)."""
    fig = go.Figure()
    for prefix, name, dash in (("frontier", "π* = π_ref·exp(r/β)/Z, every β", "solid"),
                               ("rm_frontier", "π_ref·exp(r_φ/β)/Z, every β (its true reward)", "dash")):
        curve = paired(records, "π*", f"{prefix}/kl", f"{prefix}/true_reward")
        curve = curve[curve[f"{prefix}/kl"] > 1e-4]
        if len(curve):
            betas = records.series("π*", "frontier/beta").loc[curve.index]
            fig.add_scatter(x=curve[f"{prefix}/kl"], y=curve[f"{prefix}/true_reward"], mode="lines", name=name,
                            line=dict(color="gray", dash=dash, width=2), customdata=betas,
                            hovertemplate=f"{name}<br>β=%{{customdata:.3g}}<br>KL %{{x:.3g}}<br>E[r] %{{y:.3f}}<extra></extra>")
    for arm in POLICIES:
        path = paired(records, arm, "kl", "true_reward")
        path = path[path["kl"] > 1e-4]  # KL is 0 at step 0: off a log axis
        if len(path):
            fig.add_scatter(x=path["kl"], y=path["true_reward"], mode="lines+markers", name=f"{arm} path",
                            line=dict(color=palette[arm]), marker=dict(size=[4] * (len(path) - 1) + [11]),
                            customdata=path.index,
                            hovertemplate=f"{arm}<br>step %{{customdata}}<br>KL %{{x:.3g}}<br>E[r] %{{y:.3f}}<extra></extra>")
    for prefix, name in (("optimum", f"π* at β={beta:g}"), ("rm_optimum", f"reward model's optimum at β={beta:g}")):
        kl, reward = records.first("π*", f"{prefix}/kl"), records.first("π*", f"{prefix}/true_reward")
        if kl is not None and reward is not None and kl > 1e-4:
            fig.add_scatter(x=[kl], y=[reward], mode="markers", name=name,
                            marker=dict(symbol="diamond-open" if prefix == "optimum" else "diamond", size=14,
                                        color="black", line=dict(width=2)),
                            hovertemplate=f"{name}<br>KL %{{x:.3g}}<br>E[r] %{{y:.3f}}<extra></extra>")
    fig.update_xaxes(type="log", exponentformat="power")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    shown = [kl for trace in fig.data if "every β" not in (trace.name or "") for kl in trace.x]
    if shown:  # the paths and the optima, with the frontiers around them (they reach KL 10⁻⁴)
        fig.update_xaxes(range=[math.log10(min(shown)) - 1.5, math.log10(max(shown)) + 0.3])
    return layout(fig, f"True reward against KL (β={beta:g}), and the optima",
                  "KL(π‖π_ref) (nats, log scale)", "expected true reward E_π[r]")


def rewards_figure(records: Records, palette: dict[str, str]) -> go.Figure:
    """Per policy, E_π[r] (solid) and E_π[r_φ] (dotted) over the steps, beside π_ref's and π*'s true reward."""
    fig = go.Figure()
    for arm in POLICIES:
        add_curve(fig, records, arm, "true_reward", f"{arm}: true reward E[r]", palette[arm], legendgroup=arm)
        add_curve(fig, records, arm, "rm_reward", f"{arm}: reward model's E[r_φ]", palette[arm], dash="dot",
                 legendgroup=arm)
    steps = [s for arm in POLICIES for s in records.series(arm, "true_reward").index]
    for metric, name, dash in (("reference/true_reward", "π_ref's true reward", "dash"),
                               ("optimum/true_reward", "π*'s true reward", "dashdot")):
        value = records.first("π*", metric)
        if value is not None and steps:
            fig.add_scatter(x=[min(steps), max(steps)], y=[value, value], mode="lines", name=name,
                            line=dict(color="gray", dash=dash), hovertemplate=f"{name} %{{y:.3f}}<extra></extra>")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return layout(fig, "True reward (solid) vs the reward model's (dotted)", "step",
                  "expected reward under the policy")


def diagnostics_figure(records: Records, palette: dict[str, str], clip: float) -> go.Figure:
    """PPO's clip fraction and its old-to-new KL per log window; both policies' KL(π‖π_ref)."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    add_curve(fig, records, "PPO", "ppo/clipfrac", f"PPO: share of samples clipped (ε={clip:g})", palette["PPO"],
             row=1, col=1)
    add_curve(fig, records, "PPO", "ppo/approx_kl", "PPO: ½·mean (log π − log π_old)²", palette["PPO"], dash="dot",
             row=1, col=1)
    for arm in POLICIES:
        add_curve(fig, records, arm, "kl", f"{arm}: KL(π‖π_ref)", palette[arm], row=2, col=1)
    legend_by_panel(fig, "top: per PPO update", "bottom: from π_ref")
    for trace in fig.data:  # KL is 0 at step 0 (π = π_ref): its ~1e-8 of rounding put the row on a log axis,
        if trace.yaxis == "y2":  # where the growth from 1 to 6 nats was a flat line at the top
            kept = [(x, y) for x, y in zip(trace.x, trace.y) if y > 1e-6]
            trace.update(x=[x for x, _ in kept], y=[y for _, y in kept])
    fig = subplots_layout(fig, "PPO's clip fraction; KL from π_ref", ["per PPO update", "KL(π‖π_ref) (nats)"])
    return fig.update_yaxes(rangemode="tozero", row=2, col=1)


def policy_figure(records: Records, palette: dict[str, str], beta: float) -> go.Figure:
    """Tabular: every response's probability under π_ref, π*, the reward model's optimum, PPO and DPO."""
    fig = go.Figure()
    keys = sorted((m.split("/")[1] for m in records.metrics("π*") if m.startswith("true_reward/")),
                  key=lambda k: records.first("π*", f"true_reward/{k}"))
    labels = [f"r={records.first('π*', f'true_reward/{k}'):.2f}" for k in keys]
    if keys:
        fig.add_bar(x=labels, y=[records.first("π*", f"reference/{k}") for k in keys], name="π_ref",
                    marker_color="lightgray", hovertemplate="π_ref<br>%{x}<br>%{y:.3g}<extra></extra>")
        for prefix, name, dash in (("optimum", f"π* (β={beta:g})", "dash"), ("rm_optimum", "reward model's optimum", "dot")):
            fig.add_scatter(x=labels, y=[records.first("π*", f"{prefix}/{k}") for k in keys], mode="lines", name=name,
                            line=dict(color="black", dash=dash), hovertemplate=f"{name}<br>%{{x}}<br>%{{y:.3g}}<extra></extra>")
    for arm in POLICIES:
        if keys and all(records.has(f"policy/{k}", arm) for k in keys):
            fig.add_scatter(x=labels, y=[records.last(arm, f"policy/{k}") for k in keys], mode="markers", name=arm,
                            marker=dict(color=palette[arm], size=10, symbol="circle" if arm == "PPO" else "x"),
                            hovertemplate=f"{arm} at its last step<br>%{{x}}<br>%{{y:.3g}}<extra></extra>")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, x=0))
    return layout(fig, "Tabular: learned (markers) and optimal (lines) policies",
                  "response, sorted by true reward r", "probability (log scale)", log_y=True)
