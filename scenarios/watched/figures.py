"""A watched run's figures: the loss, and module × step maps of what the hooks measured.

Modules are rows in the order the model registers them (1 = first, next to the input in most
models); the row labels and the hover name each by its module path. The heatmaps are the
vanishing-gradients page's own (scenarios/gradients.py), on log10; the dead-unit map is a share,
drawn on a linear 0–1 scale.
"""
import numpy as np
import plotly.graph_objects as go

from scenarios.gradients import layer_heatmap_figure
from scenarios.plotting import Figures, arm_colors, curves_figure, full_width
from scenarios.records import Records

MODULE_AXIS = "module (1 = first registered)"
MAX_TICKS = 40  # past this many modules, every k-th is labelled


def name_modules(fig: go.Figure, names: list[str]) -> go.Figure:
    """Row labels `3 · blocks.0.attn`, and the module path in each cell's hover."""
    if not names:
        return fig
    every = max(1, -(-len(names) // MAX_TICKS))
    ticks = list(range(1, len(names) + 1, every))
    fig.layout.yaxis.update(tickmode="array", tickvals=ticks, ticktext=[f"{i} · {names[i - 1]}" for i in ticks])
    for trace in fig.data:
        if trace.type == "heatmap" and trace.y is not None:
            rows = [names[int(y) - 1] if 0 < int(y) <= len(names) else "" for y in trace.y]
            trace.customdata = np.array([[name] * len(trace.x) for name in rows], dtype=object)
            trace.hovertemplate = trace.hovertemplate.replace("layer %{y}", "module %{y}: %{customdata}")
    fig.update_layout(margin=dict(l=40 + 6 * max(len(n) for n in names[::every])))
    return fig


def share_heatmap(records: Records, arms: list[str], prefix: str, *, title: str, z_title: str) -> go.Figure:
    """A share per module and step (0–1, linear), one panel per arm."""
    fig = go.Figure()
    for arm in arms[:1]:
        table = records.layers(arm, prefix).T  # (module, step)
        if table.empty:
            continue
        fig.add_heatmap(x=table.columns, y=table.index, z=table.to_numpy(), zmin=0, zmax=1, colorscale="Magma",
                        colorbar=dict(title=z_title),
                        hovertemplate=f"{arm}<br>step %{{x}}<br>layer %{{y}}<br>%{{z:.0%}}<extra></extra>")
    fig.update_layout(title=title, margin=dict(l=60, r=20, t=70, b=50))
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text=MODULE_AXIS)
    return fig


def steady_axis(fig: go.Figure) -> go.Figure:
    """A constant positive curve (a fixed learning rate) drawn from 0 to twice its value, not around it."""
    values = {float(v) for trace in fig.data if trace.y is not None for v in trace.y}
    if len(values) == 1 and (value := values.pop()) > 0 and fig.layout.yaxis.type != "log":
        fig.update_yaxes(range=[0, 2 * value])
    return fig


def watched_figures(records: Records, names: list[str]) -> Figures:
    arms = records.arms()
    colors = arm_colors(arms)

    def heatmap(prefix: str, title: str, z_title: str) -> go.Figure:
        return full_width(name_modules(layer_heatmap_figure(records, arms[:1], prefix, title=title, z_title=z_title,
                                                            layer_title=MODULE_AXIS), names))

    return Figures({
        "loss": lambda: curves_figure(records, colors, "loss", title="Training loss (every step run.log gave)",
                                      y_title="loss"),
        "lr": lambda: steady_axis(curves_figure(records, colors, "lr", title="Learning rate (param group 0)",
                                                y_title="learning rate")),
        "grad_heatmap": lambda: heatmap("grad_norm", "log10 gradient norm, module × step (vertical bands: vanishing "
                                        "or exploding)", "log10 ‖∂L/∂θ‖"),
        "update_ratio": lambda: heatmap("update_ratio", "log10 update-to-weight ratio ‖ΔW‖/‖W‖, module × step "
                                        "(usual: about −3)", "log10 ‖ΔW‖/‖W‖"),
        "activation_std": lambda: heatmap("act_std", "log10 std of each module's output, module × step",
                                          "log10 std"),
        "dead_units": lambda: full_width(name_modules(share_heatmap(
            records, arms, "frac_dead_always", title="Units ≤ 0 on every logged batch so far (dead where a ReLU "
            "follows), module × step", z_title="share"), names)),
    })
