"""LoRA rank sweep, drawn and said: loss per arm, final loss, trainable parameters and peft's scale
against rank, the full fine-tune's singular values, the subspace similarity φ of two ranks'
learned A — and the claims the explanation makes about them.
"""
import math
from collections.abc import Callable

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engines.supervised.lora_rules import FULL, WIDTH, comparison_ranks, lora_scale
from scenarios.claims import Computed, DivergedAt, fmt
from scenarios.explanation import Sentence, say
from scenarios.plotting import curves_figure, layout
from scenarios.records import Records

LEFT = "final/relative_loss"  # held-out MSE over the base model's: 1 = nothing learned


def percent(value: float) -> str:
    if 0.1 <= value < 10:
        return f"{value:.0%}"
    return f"{value * 100:.2g}%" if value < 0.1 else f"{fmt(value * 100)}%"


def under(records: Records, prefix: str, arm: str | None = None) -> dict[str, float]:
    """The last value of every metric named `prefix…` (of one arm, or any), keyed by the rest of the name."""
    arms = [arm] if arm is not None else records.arms()
    return {metric[len(prefix):]: records.last(name, metric) for name in arms for metric in sorted(records.metrics(name))
            if metric.startswith(prefix)}


def per_rank(records: Records, metric: str) -> list[tuple[str, int, float, int]]:
    """(arm, step, value, rank) of every LoRA arm that recorded `metric`, by rank."""
    rows = [(arm, records.last_step(arm, metric), records.last(arm, metric), int(records.last(arm, "rank")))
            for arm in records.arms() if arm != FULL and records.has(metric, arm) and records.has("rank", arm)]
    return sorted(rows, key=lambda row: row[3])


# --- figures ---------------------------------------------------------------------------------
def loss_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    fig = curves_figure(records, colors, "loss", title="Training loss per arm", y_title="MSE to the task's targets",
                        log_y=True)
    base = [records.last(arm, "final/base_loss") for arm in records.arms_with("final/base_loss")]
    steps = [records.last_step(arm, "loss") for arm in records.arms_with("loss")]
    if base and steps:  # a trace, not add_hline: hline labels land off-target on log axes
        fig.add_scatter(x=[0, max(steps)], y=[base[0]] * 2, mode="lines", name="base model",
                        line=dict(color="gray", dash="dash"),
                        hovertemplate="base model (B = 0)<br>MSE %{y:.3g}<extra></extra>")
    return fig


def full_line(fig: go.Figure, ranks: tuple[int, ...], value: float, colors: dict[str, str], what: str) -> None:
    """The full fine-tune's value as a dashed line across the swept ranks."""
    fig.add_scatter(x=[min(ranks), max(ranks)], y=[value, value], mode="lines", name=f"{FULL} fine-tune",
                    line=dict(color=colors.get(FULL), dash="dash"),
                    hovertemplate=f"{FULL} fine-tune<br>{what} %{{y:,.3g}}<extra></extra>")


def rank_axis(fig: go.Figure, ranks: tuple[int, ...], k: int) -> None:
    fig.update_xaxes(type="log", tickvals=list(ranks), ticktext=[str(r) for r in ranks])
    fig.add_vline(x=k, line_dash="dot", line_color="gray")
    # An annotation on a log axis takes log10(x); a shape takes x itself.
    fig.add_annotation(x=math.log10(k), y=1, yref="paper", text=f"k = {k}", showarrow=False,
                       xanchor="left", yanchor="top")


def rank_markers(fig: go.Figure, rows: list, colors: dict[str, str], what: str) -> None:
    for arm, step, value, rank in rows:
        fig.add_scatter(x=[rank], y=[value], name=arm, mode="markers", marker=dict(color=colors.get(arm), size=11),
                        hovertemplate=f"{arm}<br>step {step}<br>{what} %{{y:.3g}}<extra></extra>")


def final_loss_figure(records: Records, ranks: tuple[int, ...], k: int, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    rows = per_rank(records, LEFT)
    fig.add_scatter(x=[row[3] for row in rows], y=[row[2] for row in rows], mode="lines", line=dict(color="lightgray"),
                    showlegend=False, hoverinfo="skip")
    rank_markers(fig, rows, colors, "loss left")
    if records.has(LEFT, FULL):
        full_line(fig, ranks, records.last(FULL, LEFT), colors, "loss left")
    rank_axis(fig, ranks, k)
    return layout(fig, "Final loss vs LoRA rank", "LoRA rank r (log scale)",
                  "held-out MSE / base model's MSE (log scale)", log_y=True)


def params_figure(records: Records, ranks: tuple[int, ...], targets: tuple[str, ...], k: int,
                  colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    layers = len(targets)
    fig.add_scatter(x=list(ranks), y=[r * 2 * WIDTH * layers for r in ranks], mode="lines",
                    name="r·(d_in + d_out)·layers", line=dict(color="gray", dash="dash"),
                    hovertemplate="r %{x}<br>%{y:,} parameters<extra>formula</extra>")
    rank_markers(fig, per_rank(records, "trainable_params"), colors, "trainable parameters")
    full_line(fig, ranks, WIDTH * WIDTH * layers, colors, "trainable parameters")
    rank_axis(fig, ranks, k)
    return layout(fig, "Trainable parameters vs rank", "LoRA rank r (log scale)", "trainable parameters (log scale)",
                  log_y=True)


def scale_figure(records: Records, ranks: tuple[int, ...], k: int, alpha_rule: str,
                 colors: dict[str, str]) -> go.Figure:
    """peft's scale s of each arm (read from its layer) beside the rule's formula."""
    fig = go.Figure()
    fig.add_scatter(x=list(ranks), y=[lora_scale(r, alpha_rule) for r in ranks], mode="lines",
                    name=f"formula ({alpha_rule})", line=dict(color="gray", dash="dash"),
                    hovertemplate="r %{x}<br>s %{y:.3g}<extra>formula</extra>")
    rank_markers(fig, per_rank(records, "scale"), colors, "s (peft)")
    rank_axis(fig, ranks, k)
    scales = {lora_scale(r, alpha_rule) for r in ranks}
    spread = max(scales) / min(scales) if min(scales) > 0 else 1.0
    log_y = spread > 3  # a rule that keeps s fixed (alpha = 2r) is a flat line: a log axis of one value only crowds labels
    return layout(fig, f"LoRA scale s in ΔW = s·B A vs rank ({alpha_rule})", "LoRA rank r (log scale)",
                  "scale s (log scale)" if log_y else "scale s", log_y=log_y)


def singular_value_figure(records: Records, targets: tuple[str, ...], k: int, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    shown = min(WIDTH, max(16, 2 * k))
    index = np.arange(1, shown + 1)
    fig.add_scatter(x=index, y=np.where(index <= k, 1.0, 0.0), mode="markers", name=f"task's ΔW* (rank {k})",
                    marker=dict(color="gray", symbol="line-ew-open", size=14),
                    hovertemplate="index %{x}<br>σ %{y:.3f}<extra>task's ΔW*</extra>")
    for dash, target in zip(["solid", "dash"], targets):
        sv = np.array(list(under(records, f"delta_sv/{target}/index_", FULL).values()))[:shown]
        fig.add_scatter(x=index[: len(sv)], y=sv, mode="lines+markers", name=f"full fine-tune · {target}",
                        line=dict(color=colors.get(FULL), dash=dash),
                        hovertemplate=f"full · {target}<br>index %{{x}}<br>σ %{{y:.3f}}<extra></extra>")
    return layout(fig, f"Singular values of the full fine-tune's ΔW (first {shown} of {WIDTH})",
                  "singular value index (largest first)", "singular value σ of ΔW")


def subspace_figure(records: Records, ranks: tuple[int, ...], targets: tuple[str, ...], k: int) -> go.Figure:
    pair = comparison_ranks(ranks, k)
    small, large = pair if pair else ("?", "?")
    # Past j ≈ 16 the large rank's A spans most of ℝ^64 and φ → 1 whatever was learned: show the top directions.
    shown = max(16, 2 * k)
    fig = make_subplots(rows=1, cols=len(targets), subplot_titles=[f"layer {t}" for t in targets], shared_yaxes=True,
                        horizontal_spacing=0.05)
    for col, target in enumerate(targets, start=1):
        cells = {tuple(int(part[2:]) for part in key.split("/")): value
                 for key, value in under(records, f"subspace/{target}/").items()}  # (i, j) -> φ
        rows = sorted({i for i, _ in cells})
        columns = [j for j in sorted({j for _, j in cells}) if j <= shown]
        z = np.array([[cells.get((i, j), np.nan) for j in columns] for i in rows])
        fig.add_heatmap(x=columns, y=rows, z=z, zmin=0, zmax=1, colorscale="Viridis",
                        showscale=col == 1, colorbar=dict(title="φ"), row=1, col=col,
                        hovertemplate=f"{target}<br>top %{{y}} of r={small}, top %{{x}} of r={large}"
                                      "<br>φ %{z:.2f}<extra></extra>")
        fig.update_xaxes(title_text=f"j: top directions, r = {large}", row=1, col=col)
    fig.update_yaxes(title_text=f"i: top directions, r = {small}", dtick=1, row=1, col=1)
    fig.update_layout(title=f"Subspace similarity φ(i, j) of learned A: r = {small} vs r = {large}",
                      margin=dict(l=60, r=20, t=70, b=50))
    return fig


# --- claims ------------------------------------------------------------------------------------
def steps_to_tenth(arm: str) -> Callable[[Records], float | None]:
    """records -> the first logged step whose training loss is below 10% of the base model's held-out loss."""
    def compute(records: Records) -> float | None:
        base, losses = records.last(arm, "final/base_loss"), records.series(arm, "loss")
        reached = losses[losses < 0.1 * base] if base else losses.iloc[:0]
        return float(reached.index[0]) if len(reached) else None
    return compute


def last_of(arm: str, metric: str) -> Callable[[Records], float | None]:
    return lambda records: records.last(arm, metric)


def anywhere(metric: str) -> Callable[[Records], float | None]:
    """records -> the last value of `metric` in the first arm that recorded it."""
    return lambda records: next((records.last(arm, metric) for arm in records.arms_with(metric)), None)


def extreme(arms: list[str], pick) -> Callable[[Records], float]:
    """records -> min or max of the loss left over `arms`."""
    return lambda records: pick(records.last(arm, LEFT) for arm in arms)


def left_claim(records: Records, arm: str, text: str = "{}") -> Computed:
    value = records.last(arm, LEFT)
    return Computed(text, value, last_of(arm, LEFT), shown=percent(value))


def span(arms: list[str]) -> str:
    return ", ".join(arms) if len(arms) <= 2 else f"{arms[0]} … {arms[-1]}"


def cliff(records: Records, names: list[str], k: int) -> Sentence | None:
    """Loss left below k (its smallest) and from k on (its largest), and the full fine-tune's."""
    done = [arm for arm in names if arm != FULL and records.has(LEFT, arm)]
    below = [arm for arm in done if records.last(arm, "rank") < k]
    above = [arm for arm in done if records.last(arm, "rank") >= k]
    parts = []
    for arms, pick, words in ((below, min, f"below k = {k} ({span(below)}) at least {{}}"),
                              (above, max, f"from k = {k} on ({span(above)}) at most {{}}")):
        if arms:
            value = pick(records.last(arm, LEFT) for arm in arms)
            parts.append(Computed(words, value, extreme(arms, pick), shown=percent(value)))
    if records.has(LEFT, FULL):
        parts.append(left_claim(records, FULL, "the full fine-tune {}"))
    if not parts:
        return None
    return say("Loss left (held-out MSE over the base model's): " + ", ".join(["{}"] * len(parts)), *parts)


def per_arm(records: Records, names: list[str]) -> Sentence | None:
    """Each arm's loss left, or where it diverged."""
    words, parts = [], []
    for arm in names:
        if records.has(LEFT, arm):
            words.append("{}")
            parts.append(left_claim(records, arm, f"{arm} {{}}"))
        elif (step := records.diverged_at(arm)) is not None:
            words.append(f"{arm} {{}}")
            parts.append(DivergedAt(arm, step))
    return say("Per arm: " + ", ".join(words), *parts) if parts else None


def energy(records: Records, targets: tuple[str, ...], k: int) -> Sentence | None:
    parts = [Computed(f"{{}} ({target})", value, last_of(FULL, f"top_k_energy/{target}"), shown=f"{value:.1%}")
             for target in targets if (value := records.last(FULL, f"top_k_energy/{target}")) is not None]
    return say(f"The full fine-tune's ΔW puts {', '.join(['{}'] * len(parts))} of ‖ΔW‖²_F in its top {k} singular "
               "values", *parts) if parts else None


def subspace(records: Records, ranks: tuple[int, ...], targets: tuple[str, ...], k: int) -> Sentence | None:
    pair = comparison_ranks(ranks, k)
    if pair is None:
        return None
    top = min(k, pair[0])
    parts = [Computed(f"{{}} ({target})", value, anywhere(f"subspace_top_k/{target}"), shown=f"{value:.2f}")
             for target in targets if (value := anywhere(f"subspace_top_k/{target}")(records)) is not None]
    return say(f"φ between the top {top} directions of A at r = {pair[0]} and r = {pair[1]}: "
               f"{', '.join(['{}'] * len(parts))} (1: the same subspace; random ones in ℝ^{WIDTH} give ≈ "
               f"{fmt(top / WIDTH)})", *parts) if parts else None


def alpha(records: Records, names: list[str], alpha_rule: str) -> Sentence | None:
    """peft's scale s at the smallest and the largest rank, and the steps each arm took to 10% of the base loss."""
    lora = [arm for arm in names if arm != FULL and records.has("scale", arm)]
    if not lora:
        return None
    ends = list(dict.fromkeys([lora[0], lora[-1]]))
    scales = [Computed(f"{{}} at {arm}", records.last(arm, "scale"), last_of(arm, "scale")) for arm in ends]
    speeds = [Computed(f"{arm} {{}}", value, steps_to_tenth(arm), shown=str(int(value)))
              for arm in lora if (value := steps_to_tenth(arm)(records)) is not None]
    text = f"{alpha_rule}: peft's scale s is " + " and ".join(["{}"] * len(scales))
    if speeds:
        text += "; steps to reach 10% of the base loss: " + ", ".join(["{}"] * len(speeds))
    return say(text, *scales, *speeds)
