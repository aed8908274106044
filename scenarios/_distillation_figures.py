"""Temperature in distillation, drawn: student accuracy against T, loss and accuracy curves per arm,
one test example's soft targets at each T, and the soft-loss gradient norm with and without T².
"""
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.plotting import layout, metric_series

# The arm and record names the figures read; the scenario writes its records with these.
HARD = "hard labels"
CLASS_PREFIX = "soft_target/class_"  # one row per class: the example's soft targets at each T


def arm_of(temperature: float) -> str:
    return f"T={temperature:g}"


def per_arm(frame: pd.DataFrame, metric: str, at: int = -1) -> dict[str, float]:
    """arm -> the metric's value at its last (at=-1) or first (at=0) logged step."""
    return {str(arm): float(r["value"].iloc[at]) for arm, r in metric_series(frame, metric).groupby("arm", sort=False)}


def accuracy_figure(frame: pd.DataFrame, temperatures: list[float], colors: dict[str, str], alpha: float,
                    t_squared: bool, student_steps: int) -> go.Figure:
    final = per_arm(frame, "final/test_accuracy")
    done = [t for t in temperatures if arm_of(t) in final]
    fig = go.Figure()
    fig.add_scatter(x=done, y=[100 * final[arm_of(t)] for t in done], mode="lines", line=dict(color="lightgray"),
                    showlegend=False, hoverinfo="skip")
    for t in done:
        fig.add_scatter(x=[t], y=[100 * final[arm_of(t)]], mode="markers", name=arm_of(t),
                        marker=dict(size=11, color=colors[arm_of(t)]),
                        hovertemplate=f"{arm_of(t)}<br>step {student_steps - 1}<br>"
                                      "test accuracy %{y:.1f}%<extra></extra>")
    teacher = per_arm(frame, "teacher/test_accuracy").get("teacher")
    for value, name, color, dash in ((final.get(HARD), HARD, colors[HARD], "solid"), (teacher, "teacher", "gray", "dash")):
        if value is not None:  # a horizontal line, drawn as a trace so it has a legend entry and a hover
            fig.add_scatter(x=[min(temperatures), max(temperatures)], y=[100 * value] * 2, mode="lines", name=f"{name}: {value:.1%}",
                            line=dict(color=color, dash=dash),
                            hovertemplate=f"{name}<br>test accuracy %{{y:.1f}}%<extra></extra>")
    layout(fig, f"Student accuracy vs T (α = {alpha:g}, {'× T²' if t_squared else 'without T²'})",
           "temperature T (log scale)", "test accuracy (%)")
    return fig.update_xaxes(type="log", tickvals=temperatures)


def curves_figure(frame: pd.DataFrame, colors: dict[str, str], metric: str, title: str, y_title: str,
                  scale: float = 1.0, fig: go.Figure | None = None, row: int | None = None) -> go.Figure:
    """One line per student arm (in arm order), alone or into row `row` of a subplot figure."""
    fig = fig or go.Figure()
    series = metric_series(frame, metric)
    for arm, color in colors.items():
        rows = series[series["arm"] == arm]
        fig.add_scatter(x=rows["step"], y=rows["value"] * scale, name=arm, mode="lines", legendgroup=arm,
                        showlegend=row in (None, 1), line=dict(color=color),
                        hovertemplate=f"{arm}<br>step %{{x}}<br>{metric} %{{y:.4g}}<extra></extra>",
                        **(dict(row=row, col=1) if row else {}))
    return fig if row else layout(fig, title, "student step", y_title)


def loss_figure(frame: pd.DataFrame, colors: dict[str, str]) -> go.Figure:
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12, subplot_titles=[
        "objective on the transfer set (what each arm minimises)", "test cross-entropy against the true labels"])
    curves_figure(frame, colors, "loss", "", "", fig=fig, row=1)
    curves_figure(frame, colors, "test_loss", "", "", fig=fig, row=2)
    objective = metric_series(frame, "loss")
    objective = objective[objective["arm"] != "teacher"]["value"]
    log_top = bool(len(objective) and objective.min() > 0 and objective.max() / objective.min() > 100)
    layout(fig, "Loss per arm", "", "loss (nats)")
    fig.update_xaxes(title_text="student step", row=2, col=1)
    fig.update_yaxes(type="log" if log_top else "linear", dtick=1 if log_top else None,
                     title_text="nats" + (" (log)" if log_top else ""), row=1, col=1)
    return fig.update_yaxes(title_text="nats", row=2, col=1)


def soft_targets_figure(frame: pd.DataFrame, temperatures: list[float], colors: dict[str, str], example: int,
                        n_classes: int) -> go.Figure:
    entropy = per_arm(frame, "soft_target/entropy_nats", at=0)
    fig = go.Figure()
    for t in temperatures:
        arm = arm_of(t)
        rows = frame[(frame["arm"] == arm) & frame["metric"].str.startswith(CLASS_PREFIX)]
        if rows.empty:
            continue
        classes = rows["metric"].str.slice(len(CLASS_PREFIX)).astype(int)
        fig.add_bar(x=classes, y=rows["value"], name=f"{arm} · entropy {entropy.get(arm, float('nan')):.2f} nats",
                    marker_color=colors[arm], hovertemplate=f"{arm}<br>class %{{x}}<br>p = %{{y:.3f}}<extra></extra>")
    fig.add_hline(y=1 / n_classes, line_dash="dot", line_color="gray", annotation_text=f"uniform 1/{n_classes}")
    label = per_arm(frame, "example/label").get("teacher")
    true_class = f" (true class {int(label)})" if label is not None else ""
    layout(fig, f"Soft targets softmax(v/T), test example {example}{true_class}", "class", "probability")
    fig.update_layout(barmode="group", legend=dict(title_text="", orientation="h", yanchor="top", y=-0.28, x=0),
                      margin=dict(b=110))
    return fig.update_xaxes(dtick=1)


def grad_figure(frame: pd.DataFrame, temperatures: list[float], colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    temps = [t for t in temperatures if arm_of(t) in per_arm(frame, "grad_norm/soft_without_t2", at=0)]
    for metric, name, dash in (("grad_norm/soft_with_t2", "soft loss × T²", "solid"),
                               ("grad_norm/soft_without_t2", "soft loss without T²", "dash")):
        values = per_arm(frame, metric, at=0)
        fig.add_scatter(x=temps, y=[values[arm_of(t)] for t in temps], name=name, mode="lines+markers",
                        line=dict(color="black", dash=dash), customdata=[arm_of(t) for t in temps],
                        marker=dict(size=10, color=[colors[arm_of(t)] for t in temps]),
                        hovertemplate=f"%{{customdata}}<br>step 0<br>{name}<br>‖∇θ‖ %{{y:.3g}}<extra></extra>")
    if temps:
        anchor = per_arm(frame, "grad_norm/soft_without_t2", at=0)[arm_of(temps[0])]
        fig.add_scatter(x=temps, y=[anchor * (temps[0] / t) ** 2 for t in temps], name="∝ 1/T²", mode="lines",
                        line=dict(color="gray", dash="dot"), hoverinfo="skip")
    layout(fig, "Soft-loss gradient norm at initialization, with and without T²", "temperature T (log scale)",
           "‖∂ soft loss / ∂θ‖ (log scale)", log_y=True)
    return fig.update_xaxes(type="log", tickvals=temperatures)
