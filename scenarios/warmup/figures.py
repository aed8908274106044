"""Warmup, drawn and said: the shared curves and profiles with nested line widths (arms whose
first steps coincide exactly both show), and the claims about first steps and block gradients."""
import numpy as np
import pandas as pd
import plotly.graph_objects as go

from scenarios.base import COLUMNS
from scenarios.claims import AT_CHANCE, AtChance, Claim, Computed, Low, Peak, StayedNear, fmt
from scenarios.explanation import Sentence, say, trajectory
from scenarios.plotting import Figures, curves_figure, profile_figure
from scenarios.records import Records


def line_width(arm_index: int) -> float:
    """Line width by arm order, widest first: the no-warmup arms' first steps coincide exactly."""
    return max(1.5, 4.0 - 1.25 * arm_index)


def legend_below(fig: go.Figure) -> go.Figure:
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return fig


def nested(fig: go.Figure, arms: list[str], markers: bool = False) -> go.Figure:
    """Each arm's traces drawn wider than the arms after it, so arms that coincide both show."""
    for trace in fig.data:
        arm = next((a for a in arms if trace.name == a or trace.name.startswith(a + " · step")), None)
        if arm is not None:
            trace.line.width = line_width(arms.index(arm))
            if markers:
                trace.marker.size = line_width(arms.index(arm)) + 5
    return legend_below(fig)


def mean_update_ratio(records: Records) -> Records:
    """A records view with one `update_ratio` per arm and step: the mean over blocks."""
    rows = [(arm, int(step), "update_ratio", float(value)) for arm in records.arms()
            for step, value in records.layers(arm, "update_ratio").mean(axis=1).items()]
    return Records(pd.DataFrame(rows, columns=COLUMNS))


def block_profile(records: Records, colors: dict[str, str], arms: list[str], prefix: str, title: str,
                  y_title: str) -> go.Figure:
    fig = nested(profile_figure(records, colors, prefix, title=title, y_title=y_title), arms, markers=True)
    fig.update_xaxes(dtick=1, title_text="encoder block (1 = next to the input)")
    return fig


def figures_of(records: Records, colors: dict[str, str], arms: list[str], chance: float, vocab: int) -> Figures:
    curves = dict(arms=arms, log_y=False)
    logged = dict(arms=arms, log_y=True)
    return Figures({
        "loss": lambda: legend_below(curves_figure(records, colors, "loss", title="Training loss", **curves,
                                                   y_title="cross-entropy per token (nats)", chance=chance,
                                                   chance_label=f"chance: ln {vocab} = {chance:.2f}")),
        "lr_schedule": lambda: nested(curves_figure(records, colors, "lr", title="Learning-rate schedule",
                                                    y_title="learning rate (per step)", **curves), arms),
        "grad_norm": lambda: legend_below(curves_figure(records, colors, "grad_norm_global", title="Global gradient norm",
                                                        y_title="‖∂L/∂θ‖ over all parameters", **logged)),
        "update_ratio": lambda: legend_below(curves_figure(mean_update_ratio(records), colors, "update_ratio", **logged,
                                                           title="Update-to-weight ratio ‖Δθ‖/‖θ‖ (mean over blocks)",
                                                           y_title="‖Δθ‖/‖θ‖ per step")),
        "grad_profile": lambda: block_profile(records, colors, arms, "grad_norm", "Gradient norm by block", "‖∂L/∂θ_block‖"),
        "update_profile": lambda: block_profile(records, colors, arms, "update_ratio", "Update-to-weight ratio by block",
                                                "‖Δθ‖/‖θ‖ of the block")})


# --- claims ------------------------------------------------------------------------------------
def fate(records: Records, arm: str, chance: float, chance_name: str) -> list[Claim]:
    """The arm's `trajectory`; a curve that ended at chance says since when it stayed there and,
    when it had fallen to half its start or less before, how low it got and how high it went after."""
    claims = trajectory(records, arm, chance=chance, chance_name=chance_name)
    if not claims or not isinstance(claims[-1], AtChance):
        return claims
    series = records.series(arm, "loss")
    away = series[abs(series - chance) > AT_CHANCE * abs(chance)]
    since = series.index[series.index > away.index[-1]] if len(away) else series.index
    if len(since) > 1:
        claims[-1] = StayedNear(arm, "loss", chance, int(since[0]), int(since[-1]), f"chance ({chance_name} = {fmt(chance)})")
    low_step, low = int(series.idxmin()), float(series.min())
    if len(claims) == 1 and low < 0.5 * float(series.iloc[0]) and low_step > int(series.index[0]):  # learned, then lost it
        peak_step, peak = int(series.idxmax()), float(series.max())
        claims = [Low(arm, "loss", low_step, low)] + [Peak(arm, "loss", peak_step, peak)] * (peak_step > low_step) + claims
    return claims


def first_update(arm: str):
    """records -> the arm's first logged step's update ratio, averaged over blocks."""
    def compute(records: Records) -> float | None:
        table = records.layers(arm, "update_ratio")
        return float(table.iloc[0].mean()) if not table.empty else None
    return compute


def first_update_sentence(records: Records, arms: list[str], no_warmup: str, warmup: str) -> Sentence | None:
    """Each arm's first step as ‖Δθ‖/‖θ‖ (mean over blocks), and no warmup's over warmup's."""
    claims: list[Claim] = [Computed(f"{{}} ({arm})", value, first_update(arm), shown=f"{value:.3g}")
                           for arm in arms if (value := first_update(arm)(records)) is not None]
    if not claims:
        return None
    template = "The first step's ‖Δθ‖/‖θ‖, mean over blocks: " + ", ".join(["{}"] * len(claims))
    a, b = first_update(no_warmup)(records), first_update(warmup)(records)
    if a is not None and b:
        claims.append(Computed("the no-warmup arm's first step is {}× the warmup arm's", a / b,
                               lambda r: (first_update(no_warmup)(r) or np.nan) / (first_update(warmup)(r) or np.nan)))
        template += "; {}"
    return say(template, *claims)


def block_ratio(arm: str, step: int, last_block: int):
    """records -> block 1's gradient norm over the last block's at `step`."""
    def compute(records: Records) -> float | None:
        first, last = (records.at(arm, f"grad_norm/layer_{b:02d}", step) for b in (1, last_block))
        return first / last if first is not None and last else None
    return compute


def block_gradient_sentence(records: Records, arms: list[str], blocks: int) -> Sentence | None:
    """At each arm's last logged step: block 1's gradient norm over the last block's."""
    if blocks < 2:
        return None
    claims = []
    for arm in arms:
        table = records.layers(arm, "grad_norm")
        step = int(table.index[-1]) if not table.empty else None
        value = block_ratio(arm, step, blocks)(records) if step is not None else None
        if value is not None:
            claims.append(Computed(f"{{}} ({arm}, step {step})", value, block_ratio(arm, step, blocks), shown=fmt(value)))
    return say(f"Block 1's gradient norm over block {blocks}'s: " + ", ".join(["{}"] * len(claims)), *claims) \
        if claims else None


def peak_gradient_sentence(records: Records, arms: list[str]) -> Sentence | None:
    """Where each arm's global gradient norm peaked."""
    claims = []
    for arm in arms:
        series = records.series(arm, "grad_norm_global")
        if len(series):
            claims.append(Peak(arm, "grad_norm_global", int(series.idxmax()), float(series.max()), label=arm))
    return say("The global gradient norm: " + "; ".join(["{}"] * len(claims)), *claims) if claims else None
