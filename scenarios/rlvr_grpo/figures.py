"""RLVR with GRPO, drawn: held-out accuracy, the length of wrong and right answers, where the answers sit
(after how many tokens, and how accurate each place is), each prompt's gradient weight against
1/√(p(1 − p)), the groups that carried no signal, KL and clip, and the warm start."""
import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.plotting import add_curve, full_width, layout
from scenarios.records import Records

GRPO, DR, WARM = "GRPO", "Dr. GRPO", "warm start"
GOAL = 0.9  # the held-out accuracy the default run is held to (tests/test_rlvr_grpo.py)
POLICIES = (GRPO, DR)


def chance(bits: int) -> float:
    """One answer of the bits + 1 the warm start writes (0…bits), uniformly."""
    return 1 / (bits + 1)


def steps_of(records: Records) -> list[int]:
    return [int(s) for arm in POLICIES for s in records.series(arm, "heldout/accuracy").index]


def hline(fig: go.Figure, steps: list[int], value: float, name: str, dash: str, **kwargs) -> None:
    if steps:
        fig.add_scatter(x=[min(steps), max(steps)], y=[value, value], mode="lines", name=name,
                        line=dict(color="gray", dash=dash), hovertemplate=f"{name} %{{y:.3g}}<extra></extra>", **kwargs)


def accuracy_figure(records: Records, palette: dict[str, str], bits: int) -> go.Figure:
    """Held-out accuracy of one sample at temperature 1 (solid) and of the greedy answer (dotted)."""
    fig = go.Figure()
    for arm in POLICIES:
        add_curve(fig, records, arm, "heldout/accuracy", f"{arm}: sampled answer", palette[arm], legendgroup=arm)
        add_curve(fig, records, arm, "heldout/greedy_accuracy", f"{arm}: greedy answer", palette[arm], dash="dot",
                  legendgroup=arm)
    steps = steps_of(records)
    hline(fig, steps, chance(bits), f"chance (1 answer of {bits + 1})", "dash")
    hline(fig, steps, GOAL, f"the goal: {GOAL:.0%} answered right", "dashdot")
    fig.update_yaxes(range=[0, 1.02])
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return layout(fig, "Held-out accuracy (prompts never trained on)", "policy update", "fraction answered right")


def length_figure(records: Records, palette: dict[str, str]) -> go.Figure:
    """Mean |o| (EOS included) of the wrong (solid) and right (dotted) sampled responses in each log window."""
    fig = go.Figure()
    for arm in POLICIES:
        add_curve(fig, records, arm, "length_wrong", f"{arm}: wrong answers", palette[arm], legendgroup=arm)
        add_curve(fig, records, arm, "length_right", f"{arm}: right answers", palette[arm], dash="dot", legendgroup=arm)
    warm = records.last(WARM, "heldout/length")
    if warm is not None:
        hline(fig, steps_of(records), warm, "warm start, held out (all answers)", "dash")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return layout(fig, "Response length: wrong vs right answers (training samples)", "policy update",
                  "mean tokens per response |o|")


def places(records: Records, arm: str) -> list[int]:
    """The k of every `answer_at/k` the arm recorded: its answer can come after k tokens, k = 0…max_len − 2."""
    return sorted(int(m.split("/")[1]) for m in records.metrics(arm) if m.startswith("answer_at/"))


def where(records: Records, arm: str) -> tuple[list[int], list[float], list[float]]:
    """At the arm's last evaluation: k, the share of its sampled held-out answers after k tokens, and its greedy
    accuracy when made to answer after k fillers."""
    ks = places(records, arm)
    return ks, [records.last(arm, f"answer_at/{k}") for k in ks], [records.last(arm, f"forced_at/{k}") for k in ks]


def place_figure(records: Records, palette: dict[str, str], bits: int) -> go.Figure:
    """Each arm's last evaluation (the warm start's beside them): the share of sampled held-out answers written
    after k tokens (bars, left), and the greedy accuracy when made to answer there (lines, right). A response's
    length is its answer's place + 2 (the answer, then EOS): a change of length is a move of the answers."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("share of sampled answers written after k tokens",
                                        "greedy accuracy when made to answer after k tokens"))
    for arm in (*POLICIES, WARM):
        ks, shares, forced = where(records, arm)
        if not ks:
            continue
        step = records.last_step(arm, f"answer_at/{ks[0]}")
        fig.add_bar(x=ks, y=shares, name=f"{arm}: share of answers", marker_color=palette[arm], legendgroup=arm,
                    row=1, col=1, hovertemplate=f"{arm}, step {step}<br>after %{{x}} tokens: %{{y:.0%}} of answers<extra></extra>")
        fig.add_scatter(x=ks, y=forced, mode="lines+markers", name=f"{arm}: greedy accuracy there", legendgroup=arm,
                        line=dict(color=palette[arm], dash="dash" if arm == WARM else "solid"), row=1, col=2,
                        hovertemplate=f"{arm}, step {step}<br>made to answer after %{{x}} tokens: %{{y:.0%}} right<extra></extra>")
    ks = sorted({k for arm in (*POLICIES, WARM) for k in places(records, arm)})
    if ks:
        fig.add_scatter(x=[min(ks), max(ks)], y=[chance(bits)] * 2, mode="lines", name=f"chance (1 answer of {bits + 1})",
                        line=dict(color="gray", dash="dot"), row=1, col=2, hoverinfo="skip")
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%")
    fig.update_yaxes(title_text="share of sampled answers", row=1, col=1)
    fig.update_yaxes(title_text="greedy accuracy", row=1, col=2)
    fig.update_xaxes(title_text="tokens before the answer (0: right after '=')", dtick=1)
    fig.update_layout(title="Where the answers sit (held-out prompts, each arm's last evaluation)", barmode="group",
                      height=420, margin=dict(l=60, r=20, t=80, b=50), legend_title_text="arm", hovermode="closest")
    return full_width(fig)


def weights(records: Records) -> list[tuple[int, float, float, float]]:
    """(step, p, ‖∇‖ with std, ‖∇‖ without) of every measured group with 0 < p < 1 (GRPO's rollouts)."""
    out = []
    for metric in records.metrics(GRPO):
        if metric.startswith("weight/") and metric.endswith("/p"):
            key = metric[: -len("/p")]
            for step, p in records.by_step(GRPO, metric).items():
                std, plain = records.at(GRPO, f"{key}/std", step), records.at(GRPO, f"{key}/plain", step)
                if std is not None and plain:
                    out.append((int(step), p, std, plain))
    return out


def weight_figure(records: Records, palette: dict[str, str]) -> go.Figure:
    """Each measured group's gradient-norm ratio (with the std ÷ without) against its success rate p,
    with the formula 1/√(p(1 − p))."""
    fig = go.Figure()
    grid = [k / 200 for k in range(4, 197)]
    fig.add_scatter(x=grid, y=[1 / math.sqrt(p * (1 - p)) for p in grid], mode="lines", name="1/√(p(1 − p))",
                    line=dict(color="gray", dash="dash"), hoverinfo="skip")
    points = weights(records)
    if points:
        steps, ps, std, plain = zip(*points)
        fig.add_scatter(x=ps, y=[s / q for s, q in zip(std, plain)], mode="markers", name="measured: ‖∇‖ std ÷ ‖∇‖ no std",
                        marker=dict(color=palette[GRPO], size=9, line=dict(width=1, color="black")), customdata=steps,
                        hovertemplate="step %{customdata}<br>p %{x:.3f}<br>ratio %{y:.4f}<extra></extra>")
    fig.update_xaxes(range=[0, 1])
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return layout(fig, "How much dividing by the std weighs a prompt: its group's gradient norm with the division ÷ without",
                  "p: the group's success rate", "gradient-norm ratio")


def signal_figure(records: Records, palette: dict[str, str], group: int) -> go.Figure:
    """The share of groups whose G rewards were all equal (A = 0: no policy gradient), and of those all wrong."""
    fig = go.Figure()
    for arm in POLICIES:
        add_curve(fig, records, arm, "zero_advantage_groups", f"{arm}: all G rewards equal", palette[arm], legendgroup=arm)
        add_curve(fig, records, arm, "all_wrong_groups", f"{arm}: all G wrong", palette[arm], dash="dot", legendgroup=arm)
    fig.update_yaxes(range=[0, 1.02])
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.28, x=0))
    return layout(fig, f"Groups that carried no signal (G = {group})", "policy update", "fraction of groups")


def kl_figure(records: Records, palette: dict[str, str], clip: float) -> go.Figure:
    """KL(π‖π_ref) per token (k3) and the share of tokens whose ratio the clip stopped."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1)
    for arm in POLICIES:
        add_curve(fig, records, arm, "kl", f"{arm}: KL(π‖π_ref)", palette[arm], row=1, col=1, legendgroup=arm)
        add_curve(fig, records, arm, "clipfrac", f"{arm}: clipped (ε={clip:g})", palette[arm], dash="dot", row=2, col=1,
                  legendgroup=arm)
    fig.update_yaxes(title_text="nats per token", row=1, col=1)
    fig.update_yaxes(title_text="share of tokens", row=2, col=1)
    fig.update_xaxes(title_text="policy update", row=2, col=1)
    fig.update_layout(title="KL to the reference; tokens clipped", margin=dict(l=60, r=20, t=50, b=50),
                      legend=dict(orientation="h", yanchor="top", y=-0.22, x=0), legend_title_text="arm")
    return fig


def warm_figure(records: Records, palette: dict[str, str]) -> go.Figure:
    """The warm start's teacher-forcing loss on well-formed responses with random answers."""
    fig = go.Figure()
    add_curve(fig, records, WARM, "loss", "warm start: cross-entropy per response token", palette[WARM])
    return layout(fig, "Warm start: learning the format (answers random)", "step", "nats per response token")
