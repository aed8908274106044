"""Temperature in distillation, drawn and told: student accuracy against T, the teacher's soft
targets for one test example at each T, the soft-loss gradient norm with and without T², and the
claims the explanation is built from. Everything reads the frame through `Records`.
"""
import math
from collections.abc import Callable

import plotly.graph_objects as go

from scenarios.claims import Computed
from scenarios.explanation import Sentence, say
from scenarios.plotting import curves_figure, layout
from scenarios.recorded import percent, recorded
from scenarios.records import Records

# The arm and record names the figures read; the scenario writes its records with these.
HARD = "hard labels"
TEACHER = "teacher"
SOFT_PREFIX = "soft_target/"  # soft_target/ex_07/class_03, soft_target/ex_07/entropy_nats (T arms, step 0)
LABEL_PREFIX = "example/label_"  # example/label_07: the true class of test example 7 (teacher arm)


def arm_of(temperature: float) -> str:
    return f"T={temperature:g}"


def soft_metric(example: int, what: str) -> str:
    """`what`: "class_03" or "entropy_nats"."""
    return f"{SOFT_PREFIX}ex_{example:02d}/{what}"


def soft_target_metrics(probs: list[list[float]], entropies: list[float]) -> dict[str, float]:
    """The records of one T arm's step 0: each example's soft targets and their entropy in nats."""
    metrics = {soft_metric(e, f"class_{c:02d}"): p for e, row in enumerate(probs) for c, p in enumerate(row)}
    return {**metrics, **{soft_metric(e, "entropy_nats"): h for e, h in enumerate(entropies)}}


def label_metrics(labels: list[int]) -> dict[str, float]:
    return {f"{LABEL_PREFIX}{e:02d}": float(c) for e, c in enumerate(labels)}



# --- numbers the summary and the claims both read --------------------------------------------
def final_accuracy(records: Records, arm: str, last_step: int) -> float | None:
    """An arm's test accuracy at its last step (None while it is still training, or if it diverged)."""
    return records.at(arm, "test_accuracy", last_step)


def grad_spread(records: Records, arms: list[str]) -> float | None:
    """max / min over the arms of the soft term's gradient norm with T², at initialization (step 0)."""
    norms = [records.at(arm, "grad_norm/soft_with_t2", 0) for arm in arms]
    if len(arms) < 2 or any(n is None or n <= 0 for n in norms):
        return None
    return max(norms) / min(norms)


def grad_drop(records: Records, low: str, high: str) -> float | None:
    """The soft term's gradient norm without T² at the lowest T over that at the highest (step 0)."""
    a, b = (records.at(arm, "grad_norm/soft_without_t2", 0) for arm in (low, high))
    return a / b if a is not None and b and b > 0 else None


def gradient_summary(records: Records, temperatures: list[float]) -> dict:
    """The soft term's gradient at initialization across the sweep's ends, with T² and without."""
    temps = [t for t in temperatures if records.at(arm_of(t), "grad_norm/soft_without_t2", 0) is not None]
    arms = [arm_of(t) for t in temps]
    return {"grad_t_range": [temps[0], temps[-1]] if len(temps) > 1 else None,
            "grad_with_t2_spread": grad_spread(records, arms),
            "grad_without_t2_drop": grad_drop(records, arms[0], arms[-1]) if len(arms) > 1 else None}


# --- claims -----------------------------------------------------------------------------------

def accuracy_claim(records: Records, arm: str, last_step: int, text: str = "{}") -> Computed:
    return recorded(records, arm, "test_accuracy", last_step, text, shown=percent)


def count_above(arms: list[str], reference: str, last_step: int) -> Callable[[Records], float | None]:
    """records -> how many of `arms` end with a higher test accuracy than `reference`."""
    def compute(records: Records) -> float | None:
        ref = final_accuracy(records, reference, last_step)
        values = [final_accuracy(records, arm, last_step) for arm in arms]
        return None if ref is None or None in values else float(sum(v > ref for v in values))
    return compute


def highest(arm: str, arms: list[str], last_step: int) -> Callable[[Records], float | None]:
    """records -> `arm`'s final accuracy, only while no arm of `arms` ends higher."""
    def compute(records: Records) -> float | None:
        values = [final_accuracy(records, a, last_step) for a in arms]
        mine = final_accuracy(records, arm, last_step)
        return None if None in values or mine is None or mine < max(values) else mine
    return compute


def spread_points(arms: list[str], last_step: int) -> Callable[[Records], float | None]:
    """records -> max − min of the arms' final test accuracies, in percentage points."""
    def compute(records: Records) -> float | None:
        values = [final_accuracy(records, arm, last_step) for arm in arms]
        return None if None in values else 100 * (max(values) - min(values))
    return compute


def verdict(records: Records, distilled: list[str], last_step: int, transfer_size: int) -> Sentence:
    """The takeaway: how many temperatures beat hard labels, and the best of them."""
    beat = count_above(distilled, HARD, last_step)(records)
    lead = ("distillation beats hard labels" if beat == len(distilled) else
            "no temperature beats hard labels" if beat == 0 else "some temperatures beat hard labels")
    best = max(distilled, key=lambda arm: final_accuracy(records, arm, last_step))
    value = final_accuracy(records, best, last_step)
    return say(f"From {transfer_size} transfer examples, {lead}: {{}} end above the "
               "hard-label student's {} test accuracy; the best, {}, at {}",
               Computed(f"{{}} of {len(distilled)} distilled students", beat, count_above(distilled, HARD, last_step),
                        shown=f"{beat:.0f}"),
               accuracy_claim(records, HARD, last_step), best,
               Computed("{}", value, highest(best, distilled, last_step), shown=percent(value)))


def accuracy_sentence(records: Records, distilled: list[str], last_step: int, alpha: float,
                      t_squared: bool) -> Sentence:
    """Every distilled arm's final accuracy, and their spread across T (no optimum is promised)."""
    scaling = "soft loss × T²" if t_squared else "soft loss without T²"
    listing = [accuracy_claim(records, arm, last_step, f"{arm} {{}}") for arm in distilled]
    template = f"Test accuracy at step {last_step} (α = {alpha:g}, {scaling}): " + ", ".join(["{}"] * len(listing))
    if len(distilled) < 2:
        return say(template + ".", *listing)
    spread = spread_points(distilled, last_step)
    return say(template + "; {} points from the lowest to the highest.", *listing,
               Computed("{}", spread(records), spread, shown=f"{spread(records):.1f}"))


def gradient_sentences(records: Records, temperatures: list[float]) -> list[Sentence]:
    """The soft term's gradient at initialization: level across T with T², 1/T² without."""
    temps = [t for t in temperatures if records.at(arm_of(t), "grad_norm/soft_without_t2", 0) is not None]
    if len(temps) < 2:
        return []
    arms, (low, high) = [arm_of(t) for t in temps], (temps[0], temps[-1])
    spread, drop = grad_spread(records, arms), grad_drop(records, arms[0], arms[-1])
    if spread is None or drop is None:
        return []
    change = "falls" if drop > 1 else "rises"
    return [say(f"At initialization the soft term's gradient norm spans ×{{}} across T = {low:g}…{high:g} with T²; "
                f"without it, it {change} ×{{}} from T={low:g} to T={high:g} (1/T² alone: ×{(high / low) ** 2:.0f}).",
                Computed("{}", spread, lambda r: grad_spread(r, arms), shown=f"{spread:.1f}"),
                Computed("{}", drop, lambda r: grad_drop(r, arms[0], arms[-1]),
                         shown=f"{drop if drop > 1 else 1 / drop:.3g}"))]


def entropy_sentences(records: Records, temperatures: list[float], example: int, n_classes: int) -> list[Sentence]:
    """The drawn example's soft targets: their entropy at the sweep's lowest and highest T."""
    metric = soft_metric(example, "entropy_nats")
    temps = [t for t in temperatures if records.at(arm_of(t), metric, 0) is not None]
    if len(temps) < 2:
        return []
    low, high = (recorded(records, arm_of(t), metric, 0, shown=lambda h: f"{h:.2f}") for t in (temps[0], temps[-1]))
    label = recorded(records, TEACHER, f"{LABEL_PREFIX}{example:02d}", shown=lambda c: f"{c:.0f}")
    parts = [label] if label else []
    head = f"Test example {example}" + (" (true class {})" if label else "")
    return [say(head + f": the teacher's soft targets have entropy {{}} nats at T={temps[0]:g} and {{}} at "
                f"T={temps[-1]:g} (uniform: ln {n_classes} = {math.log(n_classes):.2f}).", *parts, low, high)]


# --- figures ----------------------------------------------------------------------------------
def accuracy_figure(records: Records, temperatures: list[float], colors: dict[str, str], alpha: float,
                    t_squared: bool, student_steps: int) -> go.Figure:
    last = student_steps - 1
    final = {arm_of(t): final_accuracy(records, arm_of(t), last) for t in temperatures}
    done = [t for t in temperatures if final[arm_of(t)] is not None]
    fig = go.Figure()
    fig.add_scatter(x=done, y=[100 * final[arm_of(t)] for t in done], mode="lines", line=dict(color="lightgray"),
                    showlegend=False, hoverinfo="skip")
    for t in done:
        fig.add_scatter(x=[t], y=[100 * final[arm_of(t)]], mode="markers", name=arm_of(t),
                        marker=dict(size=11, color=colors[arm_of(t)]),
                        hovertemplate=f"{arm_of(t)}<br>step {last}<br>test accuracy %{{y:.1f}}%<extra></extra>")
    teacher = records.last(TEACHER, "teacher/test_accuracy")
    for value, name, color, dash in ((final_accuracy(records, HARD, last), HARD, colors[HARD], "solid"),
                                     (teacher, TEACHER, "gray", "dash")):
        if value is not None:  # a horizontal line, drawn as a trace so it has a legend entry and a hover
            fig.add_scatter(x=[min(temperatures), max(temperatures)], y=[100 * value] * 2, mode="lines",
                            name=f"{name}: {value:.1%}", line=dict(color=color, dash=dash),
                            hovertemplate=f"{name}<br>test accuracy %{{y:.1f}}%<extra></extra>")
    layout(fig, f"Student accuracy vs T (α = {alpha:g}, {'× T²' if t_squared else 'without T²'})",
           "temperature T (log scale)", "test accuracy (%)")
    return fig.update_xaxes(type="log", tickvals=temperatures)


def teacher_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    """The teacher's training loss: it trains first, before any student has a point."""
    return curves_figure(records, colors, "loss", arms=[TEACHER], x_title="teacher step", y_title="nats",
                         title="The teacher's training loss (it trains first; then each student)")


def as_percent(fig: go.Figure) -> go.Figure:
    """A curve of fractions read as percentages: on the axis and in the hover."""
    fig.for_each_trace(lambda t: t.update(hovertemplate=t.hovertemplate.replace("%{y:.4g}", "%{y:.1%}")))
    return fig.update_yaxes(tickformat=".0%")


def soft_targets_figure(records: Records, temperatures: list[float], colors: dict[str, str], example: int,
                        n_classes: int) -> go.Figure:
    fig = go.Figure()
    for t in temperatures:
        arm = arm_of(t)
        probs = [records.at(arm, soft_metric(example, f"class_{c:02d}"), 0) for c in range(n_classes)]
        entropy = records.at(arm, soft_metric(example, "entropy_nats"), 0)
        if None in probs or entropy is None:  # not recorded yet
            continue
        fig.add_bar(x=list(range(n_classes)), y=probs, name=f"{arm} · entropy {entropy:.2f} nats",
                    marker_color=colors[arm], hovertemplate=f"{arm}<br>class %{{x}}<br>p = %{{y:.3f}}<extra></extra>")
    if fig.data:  # named in the legend: a label on the line was printed over the bars it crosses
        fig.add_scatter(x=[-0.5, n_classes - 0.5], y=[1 / n_classes] * 2, mode="lines", name=f"uniform 1/{n_classes}",
                        line=dict(color="gray", dash="dot"), hovertemplate=f"uniform 1/{n_classes}<extra></extra>")
    label = records.last(TEACHER, f"{LABEL_PREFIX}{example:02d}")
    true_class = f" (true class {int(label)})" if label is not None else ""
    layout(fig, f"Soft targets softmax(v/T), test example {example}{true_class}", "class", "probability")
    fig.update_layout(barmode="group", legend=dict(title_text="", orientation="h", yanchor="top", y=-0.28, x=0),
                      margin=dict(b=110))
    return fig.update_xaxes(dtick=1)


def grad_figure(records: Records, temperatures: list[float], colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    temps = [t for t in temperatures if records.at(arm_of(t), "grad_norm/soft_without_t2", 0) is not None]
    for metric, name, dash in (("grad_norm/soft_with_t2", "soft loss × T²", "solid"),
                               ("grad_norm/soft_without_t2", "soft loss without T²", "dash")):
        fig.add_scatter(x=temps, y=[records.at(arm_of(t), metric, 0) for t in temps], name=name, mode="lines+markers",
                        line=dict(color="black", dash=dash), customdata=[arm_of(t) for t in temps],
                        marker=dict(size=10, color=[colors[arm_of(t)] for t in temps]),
                        hovertemplate=f"%{{customdata}}<br>step 0<br>{name}<br>‖∇θ‖ %{{y:.3g}}<extra></extra>")
    if temps:
        anchor = records.at(arm_of(temps[0]), "grad_norm/soft_without_t2", 0)
        fig.add_scatter(x=temps, y=[anchor * (temps[0] / t) ** 2 for t in temps], name="∝ 1/T²", mode="lines",
                        line=dict(color="gray", dash="dot"), hoverinfo="skip")
    layout(fig, "Soft-loss gradient norm at initialization, with and without T²", "temperature T (log scale)",
           "‖∂ soft loss / ∂θ‖ (log scale)", log_y=True)
    return fig.update_xaxes(type="log", tickvals=temperatures)

