"""Contrastive learning, drawn and told: the InfoNCE loss under log N, alignment against
uniformity, the hardest negative's weight, cosine similarities, the linear probe, the PCA of
the embeddings per arm, and the claims (no optimum in τ is said that the run does not show)."""
import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.claims import Computed
from scenarios.explanation import Sentence, say
from scenarios.plotting import full_width, layout, palette_color
from scenarios.recorded import listed, percent, recorded, snapshot
from scenarios.records import Records

RAW = "raw observations"
UNIFORMITY_TITLE = "uniformity log E exp(−2‖a_i − a_j‖²)<br>(lower: spread over the sphere)"  # two lines fit half a page


def arm_of(tau: float) -> str:
    return f"τ={tau:g}"


def three(value: float) -> str:
    return f"{value:.3g}"


# --- figures ------------------------------------------------------------------------------------
def align_uniform_figure(records: Records, colors: dict[str, str], arms: list[str]) -> go.Figure:
    """Each arm's path in (uniformity, alignment), a marker at its latest step: lower-left is better."""
    fig = go.Figure()
    for arm in arms:
        u, a = records.series(arm, "uniformity"), records.series(arm, "alignment")
        if u.empty or a.empty:
            continue
        steps = [int(s) for s in u.index]
        fig.add_scatter(x=u.to_numpy(), y=a.to_numpy(), name=arm, mode="lines", line=dict(color=colors.get(arm)),
                        customdata=steps, hovertemplate=f"{arm}<br>step %{{customdata}}<br>uniformity %{{x:.3f}}<br>"
                                                        "alignment %{y:.3f}<extra></extra>")
        fig.add_scatter(x=[u.iloc[-1]], y=[a.iloc[-1]], mode="markers", showlegend=False, hoverinfo="skip",
                        marker=dict(color=colors.get(arm), size=10))
    # the x title on two lines: on one (70 characters) it ran past both edges of a half-width chart
    return layout(fig, "Alignment against uniformity (Wang & Isola 2020), step by step", UNIFORMITY_TITLE,
                  "alignment E‖a − b‖²  (lower: views agree)")


def embeddings_figure(records: Records, arms: list[str], classes: int) -> go.Figure:
    """PCA of the held-out embeddings per arm (latest snapshot), coloured by the latent class; raw views first."""
    _, labels = snapshot(records, RAW, "class/")
    point_class = [int(labels[m]) for m in sorted(labels)]
    clouds = [(arm, *snapshot(records, arm, "pca/")) for arm in [RAW, *arms]]
    clouds = [(arm, step, cloud) for arm, step, cloud in clouds if cloud]
    fig = make_subplots(rows=1, cols=max(1, len(clouds)), horizontal_spacing=0.04,
                        subplot_titles=[f"{arm} (step {step})" if arm != RAW else RAW for arm, step, _ in clouds] or None)
    for col, (arm, step, cloud) in enumerate(clouds if point_class else [], start=1):
        xs, ys = ([cloud.get(f"pca/{axis}/{i:03d}") for i in range(len(point_class))] for axis in "xy")
        for c in range(classes):
            keep = [i for i, k in enumerate(point_class) if k == c]
            fig.add_scatter(x=[xs[i] for i in keep], y=[ys[i] for i in keep], mode="markers", name=f"class {c}",
                            legendgroup=f"class {c}", showlegend=col == 1, row=1, col=col,
                            marker=dict(color=palette_color(c), size=6, line=dict(width=0.5, color="#444")),
                            hovertemplate=f"{arm}<br>class {c}<br>PC1 %{{x:.2f}}, PC2 %{{y:.2f}}<extra></extra>")
    fig.update_layout(title="PCA of held-out embeddings (unit vectors; raw: the observations), coloured by latent class",
                      height=380, margin=dict(l=50, r=20, t=80, b=40), legend_title_text="latent class")
    fig.update_xaxes(title_text="PC1")
    fig.update_yaxes(title_text="PC2", row=1, col=1)
    return full_width(fig)


def probe_figure(curves: go.Figure, records: Records, classes: int) -> go.Figure:
    """The shared curves of probe accuracy, with the raw-observation probe and chance as lines."""
    raw = records.first(RAW, "probe_accuracy")
    if raw is not None:
        curves.add_hline(y=raw, line_dash="dash", line_color="gray", annotation_text=f"probe on raw observations {percent(raw)}",
                         annotation_position="bottom right")
    curves.add_hline(y=1 / classes, line_dash="dot", line_color="gray", annotation_text=f"chance 1/{classes}",
                     annotation_position="top right")
    return curves.update_yaxes(range=[0, 1.02], tickformat=".0%")


def hardest_figure(curves: go.Figure, batch: int) -> go.Figure:
    """The shared curves, with 1/(N − 1) (every negative alike) as a dotted trace (a line shape misplaces
    its label on a log axis)."""
    steps = [x for trace in curves.data for x in (trace.x if trace.x is not None else [])]
    if steps:
        floor = 1 / (batch - 1)
        curves.add_scatter(x=[min(steps), max(steps)], y=[floor, floor], mode="lines", name=f"1/(N − 1) = {floor:.4f}",
                           line=dict(color="gray", dash="dot"), hovertemplate="every negative alike: 1/(N − 1) = %{y:.4f}<extra></extra>")
    return curves


def dashed(fig: go.Figure, suffix: str) -> go.Figure:
    for trace in fig.data:
        trace.update(name=f"{trace.name} · {suffix}", line=dict(dash="dash"))
    return fig


# --- claims -------------------------------------------------------------------------------------
def probe_sentence(records: Records, arms: list[str], classes: int, last_step: int) -> Sentence | None:
    slots, present = listed([recorded(records, arm, "probe_accuracy", last_step, f"{arm} {{}}", percent) for arm in arms])
    raw = recorded(records, RAW, "probe_accuracy", 0, shown=percent)
    if not present:
        return say("A linear probe on the raw observations reaches {} on the latent class", raw) if raw else None
    text = f"Linear-probe accuracy on the {classes} latent classes at step {last_step} (chance {percent(1 / classes)}): " + slots
    return say(text + "; on the raw observations {}", *present, raw) if raw else say(text, *present)


def loss_sentence(records: Records, arms: list[str], batch: int, last_step: int) -> Sentence | None:
    slots, present = listed([recorded(records, arm, "loss", last_step, f"{arm} {{}}", three) for arm in arms])
    if not present:
        return None
    done = [arm for arm in arms if records.at(arm, "mi_bound", last_step) is not None]
    best = max(done, key=lambda arm: records.at(arm, "mi_bound", last_step))
    bound = Computed("{}", records.at(best, "mi_bound", last_step), largest_bound(best, done, last_step), shown=three(
        records.at(best, "mi_bound", last_step)))
    return say(f"InfoNCE loss at step {last_step} against log N = log {batch} = {math.log(batch):.2f} (its value at uniform "
               f"similarity): " + slots + f"; log N − L, InfoNCE's lower bound on I(view₁; view₂), is {{}} nats at its largest ({best})",
               *present, bound)


def largest_bound(arm: str, arms: list[str], step: int):
    """records -> arm's log N − L at `step`, only while no arm of `arms` has a larger one."""
    def compute(records: Records) -> float | None:
        values = [records.at(a, "mi_bound", step) for a in arms]
        mine = records.at(arm, "mi_bound", step)
        return None if None in values or mine is None or mine < max(values) else mine
    return compute


def ordered_by_tau(arms: list[str], step: int, metric: str = "hardest_negative_weight"):
    """records -> 1 when `metric` at `step` falls strictly as τ rises over `arms` (given in rising τ)."""
    def compute(records: Records) -> float | None:
        values = [records.at(arm, metric, step) for arm in arms]
        return None if None in values else float(all(a > b for a, b in zip(values, values[1:])))
    return compute


def hardest_sentence(records: Records, arms: list[str], last_step: int) -> Sentence | None:
    """The hardest negative's share at step 0 (one encoder and batch for every τ) and at the end."""
    start = [recorded(records, arm, "hardest_negative_weight", 0, f"{arm} {{}}", three) for arm in arms]
    slots, present = listed(start)
    if len(present) < 2 or len(present) < len(arms):
        return None
    text = "The hardest negative's share of the negatives' softmax weight at step 0 (the same encoder and batch for every τ): " + slots
    claims = list(present)
    if ordered_by_tau(arms, 0)(records) == 1.0:
        text += " — {}"
        claims.append(Computed("the lower τ, the larger", 1.0, ordered_by_tau(arms, 0)))
    end_slots, end = listed([recorded(records, arm, "hardest_negative_weight", last_step, f"{arm} {{}}", three) for arm in arms])
    if end:
        text += f"; at step {last_step}: " + end_slots
        claims += end
    return say(text, *claims)


def cosine_sentence(records: Records, arms: list[str], last_step: int) -> Sentence | None:
    parts = []
    for arm in arms:
        pos, neg = (recorded(records, arm, m, last_step, shown=three) for m in ("cos_pos", "cos_neg"))
        if pos is not None and neg is not None:
            parts.append((arm, pos, neg))
    if not parts:
        return None
    return say(f"Mean cosine similarity at step {last_step}, positive pairs / negatives: "
               + ", ".join(f"{arm} {{}} / {{}}" for arm, _, _ in parts), *(c for _, pos, neg in parts for c in (pos, neg)))


def best_probe(arms: list[str], step: int):
    """records -> the index in `arms` of the highest final probe accuracy (None while any is missing)."""
    def compute(records: Records) -> float | None:
        values = [records.at(arm, "probe_accuracy", step) for arm in arms]
        if None in values:
            return None
        best = max(values)
        return float(values.index(best)) if values.count(best) == 1 else -1.0  # -1: a tie, no single best
    return compute


def spread_points(arms: list[str], step: int):
    """records -> max − min of the arms' probe accuracies at `step`, in percentage points."""
    def compute(records: Records) -> float | None:
        values = [records.at(arm, "probe_accuracy", step) for arm in arms]
        return None if None in values else 100 * (max(values) - min(values))
    return compute


def optimum_sentence(records: Records, arms: list[str], last_step: int, scored: int) -> Sentence | None:
    """Where the best probe accuracy lies in the τ sweep (inside it, or at an end), how far apart
    the arms are, and the binomial standard error of one accuracy on `scored` held-out views."""
    if len(arms) < 3:
        return None
    index = best_probe(arms, last_step)(records)
    if index is None or index < 0:
        return None
    where = "inside the sweep: both ends score lower" if 0 < index < len(arms) - 1 else "at an end of the sweep"
    best = records.at(arms[int(index)], "probe_accuracy", last_step)
    spread = spread_points(arms, last_step)
    error = 100 * math.sqrt(best * (1 - best) / scored)
    return say(f"The highest probe accuracy is {arms[int(index)]}'s, {{}}; the arms span {{}} points, and one accuracy on "
               f"{scored} held-out views has a standard error of {{}} points.",
               Computed(where, index, best_probe(arms, last_step), shown=""),
               Computed("{}", spread(records), spread, shown=f"{spread(records):.1f}"),
               Computed("{}", error, lambda r: 100 * math.sqrt(
                   (b := r.at(arms[int(index)], "probe_accuracy", last_step)) * (1 - b) / scored), shown=f"{error:.1f}"))
