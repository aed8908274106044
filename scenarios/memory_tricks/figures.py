"""Memory tricks, drawn: saved bytes and step time against k, accumulated gradients against the
full batch's, and a resumed run against the one that never stopped (said in claims.py)."""
import math

import numpy as np
import plotly.graph_objects as go

from scenarios.plotting import category_color, curves_figure, layout, legend_line
from scenarios.records import Records
from scenarios.words import byte_size

CHECKPOINTING, ACCUMULATION = "activation checkpointing", "gradient accumulation"
UNINTERRUPTED, RESUMED = "uninterrupted", "resumed from the checkpoint"
VARIANTS = ("mean loss ÷ K", "mean loss, not ÷ K", "BatchNorm, ÷ K")  # engines.distributed.activation_memory.VARIANTS
PARTS = ("model", "optimizer", "scheduler", "rng")


def sweep(records: Records, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """The checkpointing sweep's (k, values) for the checkpointed points (k ≥ 1)."""
    k, values = records.values(CHECKPOINTING, "segments"), records.values(CHECKPOINTING, metric)
    if len(values) != len(k):
        return np.array([]), np.array([])
    return k[k > 0], values[k > 0]


def none_value(records: Records, metric: str) -> float | None:
    """The sweep's value without checkpointing (its first point, k recorded as 0)."""
    return records.at(CHECKPOINTING, metric, 0) if records.at(CHECKPOINTING, "segments", 0) == 0 else None


def segments_axis(fig: go.Figure, k: np.ndarray) -> None:
    """A log axis labelled at the k that were run."""
    fig.update_xaxes(type="log", tickvals=list(k), ticktext=[f"{v:.0f}" for v in k])


def memory_figure(records: Records, layers: int) -> go.Figure:
    fig = go.Figure()
    for i, (metric, model, words) in enumerate((("saved_peak_bytes", "model_peak_bytes", "peak during backward"),
                                                ("saved_after_forward_bytes", "model_after_forward_bytes",
                                                 "held when forward ends"))):
        k, measured = sweep(records, metric)
        _, predicted = sweep(records, model)
        fig.add_scatter(x=k, y=measured / 1024, mode="lines+markers", name=f"{words} (counted)",
                        line=dict(color=category_color(i), width=4), marker=dict(size=10))
        fig.add_scatter(x=k, y=predicted / 1024, mode="markers", name=f"{words}: model (k + n/k)·a" if i == 0 else f"{words}: model (k + 1)·a", marker=dict(
            color="black", symbol="x", size=7))
        full = none_value(records, metric)
        if full is not None and i == 0:  # named in the legend: on the line, the curve's end markers sat on its label
            legend_line(fig, full / 1024, f"no checkpointing: {byte_size(full)}", dash="dot")
    # the label placed by hand: plotly puts a vline's annotation at x in log units on a log axis (10^4 for k = 4),
    # which stretched the axis far past the k run
    fig.add_vline(x=math.sqrt(layers), line_dash="dash")
    fig.add_annotation(x=math.log10(math.sqrt(layers)), y=1, yref="paper", text=f"k = √n = {math.sqrt(layers):.3g}",
                       showarrow=False, xanchor="right", yanchor="top")
    segments_axis(fig, sweep(records, "saved_peak_bytes")[0])
    fig = layout(fig, f"Bytes saved for backward vs k (n = {layers} layers)",
                 "segments k", "KiB (parameters excluded)")
    fig.update_layout(legend_title_text="saved bytes")
    return fig


def time_figure(records: Records) -> go.Figure:
    fig = go.Figure()
    k, times = sweep(records, "step_time_ms")
    fig.add_scatter(x=k, y=times, mode="lines+markers", name="checkpointed", line=dict(color=category_color(4)))
    full = none_value(records, "step_time_ms")
    if full is not None:
        fig.add_hline(y=full, line_dash="dot", annotation_text=f"no checkpointing: {full:.1f} ms")
    segments_axis(fig, k)
    fig = layout(fig, "Step time vs k (median, measured here on a shared CPU: a few % either way is noise)",
                 "segments k", "ms per step")
    fig.update_yaxes(rangemode="tozero")
    return fig


def accumulation_figure(records: Records) -> go.Figure:
    fig = go.Figure()
    k = records.values(ACCUMULATION, "micro_batches")
    for i, name in enumerate(VARIANTS):
        values = records.values(ACCUMULATION, f"rel_diff/{name}")
        if len(values) == len(k) and len(k) > 1:
            fig.add_scatter(x=k[1:], y=np.maximum(values[1:], 1e-12), mode="lines+markers", name=name,
                            line=dict(color=category_color((0, 1, 3)[i]), width=3))
    segments_axis(fig, k[1:])
    fig = layout(fig, "K accumulated micro-batches vs one full batch",
                 "micro-batches K", "‖g_K − g_full‖ / ‖g_full‖ (1e-7: float rounding)", log_y=True)
    fig.update_layout(legend_title_text="loss")
    return fig


def gap_figure(records: Records, colors: dict[str, str], arms: list[str]) -> go.Figure:
    """|loss − uninterrupted loss| per step of each resumed run (0: the same floats)."""
    fig = go.Figure()
    reference = records.series(UNINTERRUPTED, "loss")
    for arm in arms[1:]:
        series = records.series(arm, "loss")
        common = series.index.intersection(reference.index)
        fig.add_scatter(x=common, y=(series[common] - reference[common]).abs().to_numpy(), mode="lines", name=arm,
                        line=dict(color=colors.get(arm), width=3))
    return layout(fig, "Resumed minus uninterrupted loss (0: bitwise equal)", "step", "|Δ loss|")


def resume_figure(records: Records, colors: dict[str, str], arms: list[str], metric: str, title: str,
                  y_title: str, log_y: bool) -> go.Figure:
    fig = curves_figure(records, colors, metric, arms=arms, title=title, y_title=y_title, log_y=log_y)
    for trace in fig.data:  # the uninterrupted run widest: a resumed run that equals it shows inside it
        trace.line.width = 6 if trace.name == UNINTERRUPTED else 2.5 if trace.name == RESUMED else 1.5
    start = resumed_at(records, arms[1]) if len(arms) > 1 else None
    if start is not None:
        fig.add_vline(x=start, line_dash="dash", annotation_text=f"saved and resumed at step {start}")
    return fig


def contents_figure(records: Records, arm: str) -> go.Figure:
    step = resumed_at(records, arm)
    fig = go.Figure()
    if step is not None:
        sizes = [records.at(arm, f"checkpoint_bytes/{part}", step) or 0.0 for part in PARTS]
        fig.add_bar(x=list(PARTS), y=[s / 1024 for s in sizes], marker_color=[category_color(i) for i in range(4)],
                    name="saved part", hovertemplate="%{x}: %{y:.1f} KiB<extra></extra>")
        total = records.at(arm, "checkpoint_bytes/file", step)
        fig.update_layout(title_text=f"What the checkpoint holds (file: {byte_size(total or 0)})")
    return layout(fig, fig.layout.title.text or "What the checkpoint holds", "part (each saved alone)", "KiB")


def resumed_at(records: Records, arm: str) -> int | None:
    series = records.series(arm, "checkpoint_bytes/file")
    return int(series.index[0]) if len(series) else None
