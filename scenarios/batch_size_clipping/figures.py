"""Batch size and clipping, drawn and said: loss against steps and against examples seen, the
mini-batch gradient's variance against B with its fitted slope, the RNN's loss, global gradient
norm and clip coefficient, the learning-rate schedule against its closed form; and the claims."""
import numpy as np
import plotly.graph_objects as go

from scenarios.claims import Claim, Computed, Peak, fmt
from scenarios.explanation import Sentence, join, say, trajectory
from scenarios.plotting import curves_figure, layout
from scenarios.records import Records

NOISE_INIT, NOISE_TRAINED = "noise · at init", "noise · after training"
CLIP_ARMS = {"no clipping": "none", "clip_grad_norm_": "norm", "clip_grad_value_": "value"}


def batch_label(batch: int) -> str:
    return f"B={batch}"


def batch_of(arm: str) -> int:
    return int(arm.split("=")[1])


# --- figures ------------------------------------------------------------------------------------
def examples_figure(records: Records, colors: dict[str, str], arms: list[str]) -> go.Figure:
    """Held-out loss against examples seen (steps × B): what the same data budget buys per batch size. Only
    points past 0 examples: step 0 has no place on the log axis (plotly would draw a flat line to it)."""
    fig = go.Figure()
    for arm in arms:
        loss = records.series(arm, "eval_loss")
        seen = records.series(arm, "examples").reindex(loss.index)
        drawn = (seen > 0).to_numpy()  # step 0 has seen 0 examples
        if not drawn.any():
            continue
        fig.add_scatter(x=seen.to_numpy()[drawn], y=loss.to_numpy()[drawn], name=arm, mode="lines",
                        line=dict(color=colors.get(arm)),
                        hovertemplate=f"{arm}<br>%{{x:,.0f}} examples<br>held-out loss %{{y:.4g}}<extra></extra>")
    fig = layout(fig, "Held-out loss against examples seen", "examples seen (steps × B, log scale)",
                 "cross-entropy (nats)")
    return fig.update_xaxes(type="log")


def noise_figure(records: Records, colors: dict[str, str], arms: list[str]) -> go.Figure:
    """Measured E‖ĝ_B − G‖² against B (markers) beside tr(Σ)/B (dashed), log-log."""
    fig = go.Figure()
    for arm in arms:
        measured, theory = records.series(arm, "grad_var"), records.series(arm, "grad_var_theory")
        if measured.empty:
            continue
        slope = fitted_slope(arm)(records)
        name = f"{arm} (slope {slope:.3f})" if slope is not None else arm
        fig.add_scatter(x=measured.index, y=measured.to_numpy(), name=name, mode="markers",
                        marker=dict(color=colors.get(arm), size=9), legendgroup=arm,
                        hovertemplate=f"{arm}<br>B %{{x}}<br>measured %{{y:.4g}}<extra></extra>")
        fig.add_scatter(x=theory.index, y=theory.to_numpy(), name=f"{arm}: tr(Σ)/B", mode="lines",
                        line=dict(color=colors.get(arm), dash="dash"), legendgroup=arm)
    fig = layout(fig, "Mini-batch gradient variance E‖ĝ_B − G‖² against batch size", "batch size B (log scale)",
                 "E‖ĝ_B − G‖² (log scale)", log_y=True)
    return fig.update_xaxes(type="log")


def grad_norm_figure(records: Records, colors: dict[str, str], arms: list[str], clip_norm: float) -> go.Figure:
    fig = curves_figure(records, colors, "grad_norm", arms=arms, log_y=True, title="RNN: global gradient norm before clipping",
                        y_title="‖g‖ over all parameters")
    fig.add_hline(y=clip_norm, line_dash="dash", line_color="gray", annotation_text=f"c = {clip_norm:g}",
                  annotation_position="bottom right")
    return fig


def schedule_figure(records: Records, colors: dict[str, str], batches: list[str], clips: list[str]) -> go.Figure:
    """The rate each step used (lines) and the closed form (dots): they coincide. The legend groups the
    MLP's batch-size arms and the RNN's clipping arms (a shorter run at its own rate)."""
    arms = batches + clips
    fig = curves_figure(records, colors, "lr", arms=arms, title="Learning rate per step (dots: the closed form)",
                        y_title="learning rate")
    for trace in fig.data:
        group = "MLP, by batch size" if trace.name in batches else "RNN, by clipping" if trace.name in clips else None
        if group:
            trace.update(legendgroup=group, legendgrouptitle_text=group)
    fig.update_layout(legend_groupclick="toggleitem")  # a click on an arm hides that arm, not its group
    for arm in arms:
        closed = records.series(arm, "lr_closed_form")
        if len(closed):
            fig.add_scatter(x=closed.index, y=closed.to_numpy(), name=f"{arm} closed form", mode="markers",
                            marker=dict(color=colors.get(arm), size=4, symbol="circle-open"), showlegend=False)
    return fig


# --- claims -------------------------------------------------------------------------------------
def fitted_slope(arm: str):
    """records -> the least-squares slope of log E‖ĝ_B − G‖² against log B."""
    def compute(records: Records) -> float | None:
        measured = records.series(arm, "grad_var")
        if len(measured) < 2 or (measured <= 0).any():
            return None
        return float(np.polyfit(np.log(measured.index.to_numpy(float)), np.log(measured.to_numpy()), 1)[0])
    return compute


def noise_sentence(records: Records, arms: list[str]) -> Sentence | None:
    """Per noise arm: the fitted slope, and B_simple = tr(Σ)/|G|²."""
    parts = []
    for arm in arms:
        claims: list[Claim] = []
        if (slope := fitted_slope(arm)(records)) is not None:
            claims.append(Computed("the variance falls as B^{}", slope, fitted_slope(arm), shown=f"{slope:.3f}"))
        if (scale := records.first(arm, "noise_scale")) is not None:
            claims.append(Computed("B_simple = tr(Σ)/|G|² = {}", scale, lambda r, a=arm: r.first(a, "noise_scale")))
        if claims:
            parts.append(say("gradient noise {}: " + ", ".join(["{}"] * len(claims)), arm.split(" · ")[1], *claims))
    return join(*parts) if parts else None


def batch_sentence(records: Records, arms: list[str]) -> Sentence | None:
    """Each batch size's held-out loss where it ended, and the examples it had seen by then."""
    claims = []
    for arm in arms:
        step = records.last_step(arm, "eval_loss")
        if step is None:
            continue
        loss, seen = records.at(arm, "eval_loss", step), records.at(arm, "examples", step)
        claims.append(Computed(f"{arm} {{}} after {fmt(seen)} examples (step {step})", loss,
                               lambda r, a=arm, s=step: r.at(a, "eval_loss", s)))
    return say("Held-out loss: " + "; ".join(["{}"] * len(claims)), *claims) if claims else None


def clip_sentence(records: Records, arms: list[str]) -> Sentence | None:
    """Where each arm's raw gradient norm peaked and the clip coefficient at its last logged step."""
    parts = []
    for arm in arms:
        norm = records.series(arm, "grad_norm")
        if norm.empty:
            continue
        claims: list[Claim] = [Peak(arm, "grad_norm", int(norm.idxmax()), float(norm.max()), "‖g‖")]
        step = records.last_step(arm, "clip_coef")
        if arm != "no clipping" and step is not None:
            coef = records.at(arm, "clip_coef", step)
            claims.append(Computed(f"the clip coefficient was {{}} at step {step}", coef,
                                   lambda r, a=arm, s=step: r.at(a, "clip_coef", s)))
        parts.append(say("{}: " + ", ".join(["{}"] * len(claims)), arm, *claims))
    return join(*parts) if parts else None


def schedule_gap(arms: list[str]):
    """records -> the largest |recorded lr − closed form| / closed form over the arms' logged steps."""
    def compute(records: Records) -> float | None:
        gaps = []
        for arm in arms:
            closed = records.by_step(arm, "lr_closed_form")
            gaps += [abs(lr - closed[step]) / max(abs(closed[step]), 1e-300)
                     for step, lr in records.by_step(arm, "lr").items() if step in closed]
        return max(gaps) if gaps else None
    return compute


def schedule_sentence(records: Records, arms: list[str], schedule: str) -> Sentence | None:
    gap = schedule_gap(arms)(records)
    if gap is None:
        return None
    return say(f"The {schedule} schedule from torch's lr_scheduler against its closed form: {{}}",
               Computed("largest relative difference {}", gap, schedule_gap(arms), shown=fmt(gap)))


def clip_fates(records: Records, arms: list[str]) -> list[Sentence]:
    return [say("{}: RNN loss {}", arm, trajectory(records, arm)) for arm in arms if records.series(arm, "loss").size]
