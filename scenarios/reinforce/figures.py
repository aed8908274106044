"""REINFORCE, drawn: the corridor policy's P(right) and its exact expected steps to the goal against the
solved limits, the Bellman curve v(S) over p, the gradient variance with and without the baseline,
and the bandit's exact expected reward against its optimum."""
import plotly.graph_objects as go

from scenarios.plotting import layout, legend_line
from scenarios.records import Records

# the third arm is the second without its baseline: the same policy step size, so the two tell the baseline's
# effect apart from the step's
CORRIDOR_PLAIN, CORRIDOR_BASE, CORRIDOR_FAST = ("corridor: no baseline", "corridor: learned baseline",
                                                "corridor: no baseline, same policy step size as learned baseline")
BANDIT_PLAIN, BANDIT_BASE, BANDIT_LINEAR = "bandit: MLP, no baseline", "bandit: MLP + baseline", "bandit: linear + baseline"
EXACT = "exact (Bellman)"
LEGEND_Y = -0.3  # a legend below starts this far under the plot (a fraction of its height)
HEIGHT_PX, LEGEND_ROW_PX = 430, 19  # a chart's height on the page, and what a row of legend below adds
CORRIDOR_ARMS, BANDIT_ARMS = [CORRIDOR_PLAIN, CORRIDOR_BASE, CORRIDOR_FAST], [BANDIT_PLAIN, BANDIT_BASE, BANDIT_LINEAR]


def below(fig: go.Figure) -> go.Figure:
    """The legend under the plot, its top 0.3 of the plot's height down, and the figure taller by a row per entry:
    the page's own move (to −0.22 of a plot that a two-line title and the legend's rows had shortened to ~175 px)
    put the first row on the x axis's title."""
    entries = sum(1 for trace in fig.data if trace.showlegend is not False and trace.name)
    return fig.update_layout(legend=dict(orientation="h", yanchor="top", y=LEGEND_Y, x=0),
                             height=HEIGHT_PX + LEGEND_ROW_PX * entries)


def limits(records: Records) -> tuple[float | None, float | None]:
    return records.first(EXACT, "optimum/p_right"), records.first(EXACT, "optimum/v_start")


def policy_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    for arm in CORRIDOR_ARMS:
        series = records.series(arm, "p_right")
        fig.add_scatter(x=series.index, y=series.to_numpy(), name=arm, mode="lines", line=dict(color=colors[arm]),
                        hovertemplate=f"{arm}<br>episode %{{x}}<br>P(right) %{{y:.3f}}<extra></extra>")
    p_star, _ = limits(records)
    last = max((records.last_step(arm, "p_right") or 0 for arm in CORRIDOR_ARMS), default=0)
    if p_star is not None:  # a legend entry rather than an annotation the curves would hide
        fig.add_scatter(x=[0, max(1, last)], y=[p_star, p_star], mode="lines", line=dict(color="gray", dash="dash"),
                        name=f"p* = {p_star:.4f} = 2 − √2 (Bellman solve)",
                        hovertemplate="p* = %{y:.4f} (Bellman solve)<extra></extra>")
    fig.update_yaxes(range=[0, 1])
    return below(layout(fig, "Corridor: the policy's P(right)", "episode", "P(right)"))


def steps_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    """−v(S) of the policies that played each log window (exact, solid) and their mean episode length
    (sampled, dotted): the expected and the actual steps to the goal."""
    fig = go.Figure()
    for arm in CORRIDOR_ARMS:
        exact, sampled = -records.series(arm, "window/v_start"), -records.series(arm, "window/return")
        fig.add_scatter(x=exact.index, y=exact.to_numpy(), name=arm, mode="lines", line=dict(color=colors[arm]),
                        legendgroup=arm, hovertemplate=f"{arm}<br>episode %{{x}}<br>−v(S) = %{{y:.2f}} steps "
                                                       f"(exact, mean over the window)<extra></extra>")
        fig.add_scatter(x=sampled.index, y=sampled.to_numpy(), name=f"{arm}, sampled", mode="lines", legendgroup=arm,
                        line=dict(color=colors[arm], dash="dot", width=1), opacity=0.6, showlegend=False,
                        hovertemplate=f"{arm}<br>episode %{{x}}<br>mean episode length %{{y:.1f}}<extra></extra>")
    _, v_star = limits(records)
    last = max((records.last_step(arm, "window/v_start") or 0 for arm in CORRIDOR_ARMS), default=0)
    if v_star is not None:  # a trace, not add_hline: an hline's annotation on a log axis stretches the range
        fig.add_scatter(x=[0, max(1, last)], y=[-v_star, -v_star], mode="lines", line=dict(color="gray", dash="dash"),
                        name=f"−v* = {-v_star:.2f} = 6 + 4√2 (Bellman solve)",
                        hovertemplate="−v* = %{y:.3f} steps (Bellman solve)<extra></extra>")
    return below(layout(fig, "Corridor: expected steps to the goal, −v(S) (solid: exact; dotted: sampled episodes)",
                        "episode", "steps to the goal, −v(S) (log scale)", log_y=True))


def bellman_figure(records: Records, colors: dict[str, str], episodes: int) -> go.Figure:
    """v(S) solved at each p of the grid, the optimum, and each arm's last-quarter mean P(right) and mean −v(S)
    (above the curve where its p wandered: the mean of v is below v at the mean p)."""
    from scenarios.reinforce.claims import last_quarter
    fig = go.Figure()
    p, v = records.series(EXACT, "curve/p"), records.series(EXACT, "curve/v_start")
    fig.add_scatter(x=p.to_numpy(), y=-v.to_numpy(), name="−vₚ(S), solved", mode="lines", line=dict(color="gray"),
                    hovertemplate="P(right) %{x:.2f}<br>−v(S) = %{y:.2f} steps<extra></extra>")
    p_star, v_star = limits(records)
    if p_star is not None:
        fig.add_scatter(x=[p_star], y=[-v_star], name="optimum", mode="markers", marker=dict(color="black", size=10, symbol="x"),
                        hovertemplate="p* = %{x:.4f}<br>−v* = %{y:.3f}<extra></extra>")
    for arm in CORRIDOR_ARMS:
        p_end, v_end = last_quarter(records, arm, "window/p_right", episodes), last_quarter(records, arm, "window/v_start", episodes)
        if p_end is not None:
            fig.add_scatter(x=[p_end], y=[-v_end], name=f"{arm}: last-quarter means", mode="markers",
                            marker=dict(color=colors[arm], size=9),
                            hovertemplate=f"{arm}<br>mean P(right) %{{x:.3f}}<br>mean −v(S) %{{y:.2f}}<extra></extra>")
    fig = layout(fig, "Corridor: −v(S) for every P(right), from the 3×3 Bellman system", "P(right)",
                 "steps to the goal, −v(S) (log scale)", log_y=True)
    return below(fig).update_yaxes(range=[1, 2])  # 10 to 100 steps: the minimum and the arms' ends, not the walls at p → 0, 1


def variance_figure(records: Records, arms: list[str], x_title: str, title: str) -> go.Figure:
    fig = go.Figure()
    styles = {"plain": ("without the baseline (w = G)", "#d62728"), "baseline": ("with the learned baseline (w = G − v̂)", "#1f77b4")}
    for arm in arms:
        for kind, (words, color) in styles.items():
            series = records.series(arm, f"grad_var/{kind}")
            fig.add_scatter(x=series.index, y=series.to_numpy(), name=words, mode="lines", line=dict(color=color),
                            hovertemplate=f"{words}<br>{x_title} %{{x}}<br>variance %{{y:.4g}}<extra></extra>")
    return below(layout(fig, title, x_title, "total variance of the per-sample gradient (log scale)", log_y=True))


def bandit_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    for arm in BANDIT_ARMS:
        series = records.series(arm, "expected_reward")
        fig.add_scatter(x=series.index, y=series.to_numpy(), name=arm, mode="lines", line=dict(color=colors[arm]),
                        hovertemplate=f"{arm}<br>update %{{x}}<br>expected reward %{{y:.3f}}<extra></extra>")
    best, uniform = records.first(EXACT, "bandit/optimum"), records.first(EXACT, "bandit/uniform")
    if best is not None:  # named in the legend: a curve rising to the optimum ran through a label on its line
        legend_line(fig, best, f"optimum Eₓ[maxₖ μₖ(x)] = {best:.3f} (exact)")
        legend_line(fig, uniform, f"uniform policy = {uniform:.3f}", dash="dot")
    return below(layout(fig, "Bandit: exact expected reward of each policy over the context set", "update",
                        "expected reward Eₓ[Σₖ π(k|x)·μₖ(x)]"))
