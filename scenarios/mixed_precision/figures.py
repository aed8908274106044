"""Mixed precision, drawn and said: the training arms' curves, the number-format sweeps, and
the claims read from them (shares are means over an arm's logged steps)."""
import math

import numpy as np
import plotly.graph_objects as go

from scenarios.claims import Computed, raised
from scenarios.explanation import Sentence, say
from scenarios.plotting import category_color, curves_figure, layout
from scenarios.records import Records
from scenarios.words import counted

UNDERFLOW, ROUNDING, SUM = "x rounded to 16 bits", "w + δ in 16 bits", "10⁴ updates of 1e-4"
FORMATS = ("fp16", "bf16", "fp32")
# A format's traces carry its full name: "fp32" is also a training arm, and a category is never an arm
FORMAT_NAMES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}
HIST_EDGES = list(range(-48, 1, 2))  # engines.numerics.mixed_precision.HIST_EDGES: the bins' log2 |g| edges


def pct(value: float) -> str:
    return f"{value:.1%}"


def power(value: float) -> str:
    return f"2^{value:g}"  # in a sentence: the page and the terminal raise it


def format_color(name: str) -> str:
    return category_color(FORMATS.index(name))


def formats_legend(fig: go.Figure) -> go.Figure:
    fig.update_layout(legend_title_text="format")
    return fig


def nested(fig: go.Figure, arms: list[str]) -> go.Figure:
    """Earlier arms drawn wider, so arms whose curves coincide (fp32, bf16, GradScaler) all show."""
    for trace in fig.data:
        if trace.name in arms:
            trace.line.width = max(1.5, 5.0 - 1.0 * arms.index(trace.name))
    return fig


def as_share(fig: go.Figure) -> go.Figure:
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    return fig


# --- training arms ------------------------------------------------------------------------------
def lost_figure(records: Records, colors: dict[str, str], arms: list[str], master: dict[str, str]) -> go.Figure:
    """Updates lost as stored (solid), and for master-weight arms as they would be in 16 bits (dashed)."""
    fig = curves_figure(records, colors, "lost_updates", arms=arms, log_y=False, y_title="share of the step's updates",
                        title="Updates rounded away (w + δ == w)")
    for arm, dtype in master.items():
        series = records.series(arm, f"lost_if_{dtype}")
        if len(series):
            fig.add_scatter(x=series.index, y=series.to_numpy(), mode="lines", name=f"{arm}, if its weights were {dtype}",
                            line=dict(color=colors.get(arm), dash="dash"))
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, x=0))
    return as_share(fig)


def histogram_figure(records: Records, arm: str, initial_scale: float) -> go.Figure:
    """log2 |∂(weighted loss)/∂w| of the fp32 arm at step 0, against fp16's smallest subnormal."""
    counts = [records.at(arm, f"grad_log2_hist/bin_{i:02d}", 0) for i in range(len(HIST_EDGES) - 1)]
    fig = go.Figure()
    if all(c is not None for c in counts):
        centres = [(a + b) / 2 for a, b in zip(HIST_EDGES, HIST_EDGES[1:])]
        fig.add_bar(x=centres, y=counts, width=2, name="weight-gradient entries", marker_color=category_color(7),
                    hovertemplate="log2 |g| %{x}±1<br>%{y} entries<extra></extra>")
    fig.add_vline(x=-24, line_dash="dash", annotation_text="fp16's smallest: 2⁻²⁴")
    fig.add_vline(x=-24 - math.log2(initial_scale), line_dash="dot",
                  annotation_text=f"2⁻²⁴ / S (S = 2{raised(f'{math.log2(initial_scale):g}')})", annotation_position="bottom left")
    return layout(fig, f"Gradients vs fp16's range ({arm}, step 0)",
                  "log2 |∂(loss_weight·CE)/∂w|", "entries")


# --- number formats ---------------------------------------------------------------------------
def underflow_figure(records: Records) -> go.Figure:
    fig = go.Figure()
    x = records.values(UNDERFLOW, "log2_x")
    for name in FORMATS[:2]:
        error = records.values(UNDERFLOW, f"rel_error/{name}")
        if len(error):
            fig.add_scatter(x=x, y=np.maximum(error, 2.0 ** -40), mode="lines", name=FORMAT_NAMES[name],
                            line=dict(color=format_color(name), width=3),
                            hovertemplate=f"{FORMAT_NAMES[name]}<br>x = 2^%{{x}}<br>|round(x) − x|/x %{{y:.3g}}<extra></extra>")
    fig.add_vline(x=-24, line_dash="dash", annotation_text="2⁻²⁴")
    # at the top: right of 2⁻¹⁴ both formats' errors are below 2⁻⁸, so no curve comes near 1 there
    fig.add_vline(x=-14, line_dash="dot", annotation_text="2⁻¹⁴: fp16 subnormals below", annotation_position="top right")
    return formats_legend(layout(fig, "Relative rounding error of x (1: x became 0)",
                                 "log2 x (bins of ¼)", "|round(x) − x| / x", log_y=True))


def rounding_figure(records: Records) -> go.Figure:
    fig = go.Figure()
    x = records.values(ROUNDING, "log2_ratio")
    for name, (low, high) in (("fp16", (-12, -11)), ("bf16", (-9, -8))):
        fig.add_vrect(x0=low, x1=high, fillcolor=format_color(name), opacity=0.25, line_width=0)
        for metric, dash, words in (("kept", "solid", "random w"), ("kept_up_at_one", "dot", "w = 1, δ > 0")):
            values = records.values(ROUNDING, f"{metric}/{name}")
            if len(values):
                fig.add_scatter(x=x, y=values, mode="lines", name=f"{FORMAT_NAMES[name]}, {words}",
                                line=dict(color=format_color(name), dash=dash, width=3))
    fig = layout(fig, "Updates w + δ that change w (shaded: the bands)",
                 "log2 |δ| / |w|  (fp16 band −12…−11, bf16 −9…−8)", "updates kept")
    return formats_legend(as_share(fig))


def sum_figure(records: Records) -> go.Figure:
    fig = go.Figure()
    # float16 and bfloat16 both round 1 + 1e-4 back to 1, so their lines coincide: float16 wide beneath,
    # bfloat16 dashed on top shows both
    styles = {"fp16": dict(width=7), "bf16": dict(width=3, dash="dash"), "fp32": dict(width=3)}
    for name in FORMATS:
        values, updates = records.values(SUM, f"weight/{name}"), records.values(SUM, "updates")
        if len(values) and len(values) == len(updates):
            label = FORMAT_NAMES[name] + (" (a master copy)" if name == "fp32" else "")
            fig.add_scatter(x=updates, y=values, mode="lines", name=label,
                            line=dict(color=format_color(name), **styles[name]))
    # top left: the float32 line reaches 2 at the right end, through a label there
    fig.add_hline(y=2.0, line_dash="dash", line_color="gray", annotation_text="1 + 10⁴·10⁻⁴ = 2",
                  annotation_position="top left")
    return formats_legend(layout(fig, "A weight of 1.0 after n updates of +1e-4", "updates so far",
                                 "weight"))


# --- claims -------------------------------------------------------------------------------------
def mean_share(arm: str, metric: str):
    """records -> the mean of `metric` over the arm's logged steps."""
    def compute(records: Records) -> float | None:
        values = records.values(arm, metric)
        return float(values.mean()) if len(values) else None
    return compute


def share_claim(records: Records, arm: str, metric: str, words: str) -> Computed | None:
    value = mean_share(arm, metric)(records)
    return None if value is None else Computed(words, value, mean_share(arm, metric), shown=pct(value))


def through(arm: str, metric: str, x_metric: str, value: float):
    """records -> the largest x such that `metric` equals `value` at every x up to it (None: not even the first)."""
    def compute(records: Records) -> float | None:
        x, values = records.values(arm, x_metric), records.values(arm, metric)
        if not len(x) or len(values) != len(x) or values[0] != value:
            return None
        misses = np.flatnonzero(values != value)
        return float(x[misses[0] - 1] if len(misses) else x[-1])
    return compute


def from_on(arm: str, metric: str, x_metric: str, value: float):
    """records -> the smallest x such that `metric` equals `value` at every x from it on (None: not even the last)."""
    def compute(records: Records) -> float | None:
        x, values = records.values(arm, x_metric), records.values(arm, metric)
        if not len(x) or len(values) != len(x) or values[-1] != value:
            return None
        misses = np.flatnonzero(values != value)
        return float(x[misses[-1] + 1] if len(misses) else x[0])
    return compute


def upper_edge(compute, width: float = 0.25):
    """A bin's lower edge (log2) -> its upper edge."""
    return lambda records: None if (low := compute(records)) is None else low + width


def claim(text: str, compute, records: Records, shown=power) -> Computed | None:
    value = compute(records)
    return None if value is None else Computed(text, value, compute, shown=shown(value))


def format_claims(records: Records) -> list[list[Computed]]:
    """Per sweep, the claims it supports (empty lists where the sweep has not run)."""
    flushed = claim("fp16 rounded every sampled x below {} to 0", upper_edge(through(UNDERFLOW, "flushed/fp16", "log2_x", 1.0)), records)
    kept = claim("and none from {} up", from_on(UNDERFLOW, "flushed/fp16", "log2_x", 0.0), records)
    at_one = [claim(f"1 + δ == 1 in {name} for δ up to {{}}", through(ROUNDING, f"kept_up_at_one/{name}", "log2_ratio", 0.0), records) for name in ("fp16", "bf16")]
    lost_all = claim("over random w in fp16 every update with |δ|/|w| ≤ {} was lost",
                     through(ROUNDING, "kept/fp16", "log2_ratio", 0.0), records)
    kept_all = claim("every one from {} up kept", from_on(ROUNDING, "kept/fp16", "log2_ratio", 1.0), records)
    sums = [claim(f"{name} {{}}", lambda r, n=name: r.last(SUM, f"weight/{n}"), records, lambda v: f"{v:.5g}")
            for name in FORMATS]
    return [[c for c in (flushed, kept) if c], [c for c in (*at_one, lost_all, kept_all) if c], [c for c in sums if c]]


def master_sentence(records: Records, master: dict[str, str]) -> Sentence | None:
    """What the master-weight arms' updates would have lost in 16-bit storage, and lost in fp32."""
    would = [c for arm, dtype in master.items()
             if (c := share_claim(records, arm, f"lost_if_{dtype}", f"{{}} of {arm}'s updates ({dtype})"))]
    lost = [c for arm in master if (c := share_claim(records, arm, "lost_updates", f"{{}} ({arm})"))]
    if not would:
        return None
    return say("Stored in 16 bits the weights would have lost " + " and ".join(["{}"] * len(would))
               + "; their fp32 master copies lost " + ", ".join(["{}"] * len(lost)), *would, *lost)


def scale_sentence(records: Records, arm: str) -> Sentence | None:
    """GradScaler's last scale and how many steps it skipped for an inf/NaN."""
    step = records.last_step(arm, "loss_scale")
    if step is None:
        return None
    scale = Computed("ended at S = {}", records.last(arm, "loss_scale"), lambda r: r.last(arm, "loss_scale"),
                     shown=power(math.log2(records.last(arm, "loss_scale"))))
    skipped = Computed("after skipping " + counted(records.last(arm, "skipped_steps"), "step"), records.last(arm, "skipped_steps"),
                       lambda r: r.last(arm, "skipped_steps"),
                       shown=f"{records.last(arm, 'skipped_steps'):.0f}")
    return say(f"GradScaler ({arm}, step {step}): its scale {{}} {{}} whose scaled gradients overflowed to inf", scale, skipped)
