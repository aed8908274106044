"""Next-token prediction, drawn: held-out loss against the floor and the counted baselines, the loss in
three units, the prose in bits per byte, error along a line (true prefix against own samples), and
sampling entropy against temperature."""
import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.claims import three_digits
from scenarios.plotting import add_curve, full_width, layout, legend_line
from scenarios.records import Records

TF, SS, PROSE = "teacher forcing · topic lines", "scheduled sampling · topic lines", "teacher forcing · prose"
SOURCE, UNI_T, BI_T = "topic lines: exact", "unigram · topic lines", "bigram · topic lines"
PROSE_FACTS, UNI_P, BI_P = "prose (stdlib docstrings)", "unigram · prose", "bigram · prose"
TOPIC_ARMS = (TF, SS)
MODES = {"teacher_forced": "true prefix", "free_running": "own samples"}
TEMPERATURE_PREFIX = "sampling/entropy/T_"
PROMPT_TOKENS, SAMPLED_TOKENS = 2, 16  # engines/sequence/next_token.py: up to 16 tokens drawn after a line's first two
FLOOR_HOVER = "exact: the entropy of each token given the line before it, averaged over every position of a line"


# --- reading the records --------------------------------------------------------------------------
def exposure_profile(records: Records, arm: str, mode: str) -> dict[int, float]:
    """Line position -> error, at the arm's last measurement."""
    prefix = f"exposure/{mode}/pos_"
    names = [m for m in records.metrics(arm) if m.startswith(prefix)]
    return {int(m[len(prefix):]): records.last(arm, m) for m in sorted(names)}


def quarter_median(profile: dict[int, float], last: bool) -> float | None:
    """The median over the first (or last) quarter of the positions measured (at least one): a single
    position's spike (the model unsure where a line ends) does not move it."""
    if not profile:
        return None
    positions = sorted(profile)
    count = max(1, len(positions) // 4)
    return float(np.median([profile[p] for p in (positions[-count:] if last else positions[:count])]))


def exposure_end(records: Records, arm: str, mode: str) -> float | None:
    return quarter_median(exposure_profile(records, arm, mode), last=True)


def temperatures(records: Records, arm: str) -> list[float]:
    return sorted(float(m[len(TEMPERATURE_PREFIX):]) for m in records.metrics(arm) if m.startswith(TEMPERATURE_PREFIX))


def floor_profile(records: Records) -> dict[int, float]:
    return {int(m[len("floor/pos_"):]): records.first(SOURCE, m) for m in records.metrics(SOURCE) if m.startswith("floor/pos_")}


def sampled_floor(records: Records) -> tuple[int, int, float] | None:
    """The source's exact entropy per token over the positions the temperature sweep draws (2 … 17, or to
    the line's end): (first position, last position, mean). Not the entropy rate H, which averages every
    position of a line, the topic word and the first word included."""
    floors = floor_profile(records)
    drawn = sorted(p for p in floors if PROMPT_TOKENS <= p < PROMPT_TOKENS + SAMPLED_TOKENS)
    if not drawn:
        return None
    return drawn[0], drawn[-1], float(np.mean([floors[p] for p in drawn]))


def line_length(records: Records) -> int:
    """Positions in a line (the source's per-position floors: one for each)."""
    return len(floor_profile(records))


# --- figures ----------------------------------------------------------------------------------------
def reference_lines(fig: go.Figure, lines: list[tuple[float | None, str, str]], hover: str = "") -> None:
    """Gray lines named in the legend (a label on the line sat where the curves run); `hover` says more."""
    for value, label, dash in lines:
        if value is not None:
            legend_line(fig, value, f"{label} {three_digits(value)}", dash,
                        hover=f"{label}<br>{round(value, 9):.4g}" + (f"<br>{hover}" if hover else ""))


def below(fig: go.Figure) -> go.Figure:
    """The legend under the plot, far enough down that its first row clears the x axis's title."""
    return fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.3, x=0))


def heldout_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    for arm in TOPIC_ARMS:
        add_curve(fig, records, arm, "heldout_nats", arm, colors[arm])
    # H: the source's exact entropy per token, averaged over every position of a line (the temperature chart's
    # line averages only the positions it draws, so the two differ)
    reference_lines(fig, [(records.first(SOURCE, "entropy_rate"), f"entropy rate H (positions 0–{line_length(records) - 1})",
                           "solid")], hover=FLOOR_HOVER)
    reference_lines(fig, [(records.first(BI_T, "heldout_nats"), "bigram (counted)", "dash"),
                          (records.first(UNI_T, "heldout_nats"), "unigram (counted)", "dot")])
    layout(fig, "Topic lines: held-out loss against the entropy-rate floor", "step", "held-out loss (nats per token)")
    return below(fig)


def prose_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    add_curve(fig, records, PROSE, "heldout_bpb", PROSE, colors[PROSE])
    reference_lines(fig, [(records.first(BI_P, "heldout_bpb"), "bigram (counted)", "dash"),
                          (records.first(UNI_P, "heldout_bpb"), "unigram (counted)", "dot")])
    size = records.first(PROSE_FACTS, "prose_bytes")
    title = "Prose: held-out bits per byte" + (f" ({size / 1024:.0f} KiB of docstrings)" if size else "")
    layout(fig, title, "step", "held-out bits per byte")
    return below(fig)


def units_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    """The last held-out value of every model and baseline in nats per token, bits per byte and perplexity."""
    units = (("heldout_nats", "nats per token"), ("heldout_bpb", "bits per byte"), ("heldout_ppl", "perplexity (e^loss)"))
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08)
    floor = records.first(SOURCE, "entropy_rate")
    floor_units = {"heldout_nats": floor, "heldout_bpb": records.first(SOURCE, "entropy_rate_bpb"),
                   "heldout_ppl": math.exp(floor) if floor is not None else None}
    for col, (metric, title) in enumerate(units, start=1):
        names, values, shades = [], [], []
        for arm in (TF, SS, BI_T, UNI_T, PROSE, BI_P, UNI_P):
            value = records.last(arm, metric)
            if value is not None:
                names.append(arm), values.append(value), shades.append(colors.get(arm))
        if floor_units[metric] is not None:
            names.append("entropy rate H (topic lines)"), values.append(floor_units[metric]), shades.append("gray")
        fig.add_bar(x=values, y=names, orientation="h", marker_color=shades, showlegend=False, row=1, col=col,
                    text=[f"{v:.3g}" for v in values], textposition="auto",
                    hovertemplate=f"%{{y}}<br>{title} %{{x:.4g}}<extra></extra>")
        fig.update_xaxes(title_text=title, row=1, col=col)
    fig.update_yaxes(autorange="reversed")
    fig.update_yaxes(title_text="model or baseline", col=1)
    fig.update_yaxes(showticklabels=False, col=2)
    fig.update_yaxes(showticklabels=False, col=3)
    fig.update_layout(title="The held-out loss in three units (last evaluation)", height=420,
                      margin=dict(l=230, r=20, t=80, b=40))
    return full_width(fig)


def exposure_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    for arm in TOPIC_ARMS:
        for mode, dash in zip(MODES, ("solid", "dash")):
            profile = exposure_profile(records, arm, mode)
            if profile:
                fig.add_scatter(x=list(profile), y=list(profile.values()), mode="lines+markers", name=f"{arm}: {MODES[mode]}",
                                line=dict(color=colors[arm], dash=dash), marker=dict(size=4),
                                hovertemplate=f"{arm}<br>{MODES[mode]}<br>position %{{x}}<br>error %{{y:.3f}}<extra></extra>")
    layout(fig, "Error along a line: the true prefix against the model's own samples", "position in the line (token)",
           "probability on tokens the source forbids")
    return below(fig)


def temperature_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for arm in (TF,):
        found = temperatures(records, arm)
        if not found:
            continue
        entropy = [records.last(arm, f"{TEMPERATURE_PREFIX}{t:.2f}") for t in found]
        forbidden = [records.last(arm, f"sampling/forbidden/T_{t:.2f}") for t in found]
        fig.add_scatter(x=found, y=entropy, mode="lines+markers", name=f"{arm}: entropy", line=dict(color=colors[arm]),
                        hovertemplate=f"{arm}<br>T %{{x}}<br>%{{y:.3f}} nats per token<extra></extra>")
        fig.add_scatter(x=found, y=forbidden, mode="lines+markers", name=f"{arm}: forbidden share", secondary_y=True,
                        line=dict(color=colors[arm], dash="dot"), marker=dict(symbol="x"),
                        hovertemplate=f"{arm}<br>T %{{x}}<br>forbidden share %{{y:.3f}}<extra></extra>")
    drawn = sampled_floor(records)
    if drawn is not None:  # H averages every position of a line; this, only those the sweep draws
        first, last, mean = drawn
        reference_lines(fig, [(mean, f"source's entropy (positions {first}–{last})", "dash")],
                        hover="exact, averaged over the positions drawn after the two-token prompt "
                              "(H averages every position of a line)")
    # a y title short enough for the chart's height once the legend below takes its rows
    layout(fig, "Sampling temperature against the entropy of what is drawn", "temperature T",
           "entropy of a draw (nats per token)")
    # its own round ticks (not the left axis's grid lines, synced) and a title short enough for a half-width chart
    fig.update_yaxes(title_text="forbidden share of draws", secondary_y=True, rangemode="tozero", tickmode="auto",
                     showgrid=False)
    return below(fig)
