"""Quantization error, drawn: accuracy and loss against bits, the channel ranges against the per-tensor
Δ/2, the weight histogram with both grids, per-layer MSE/SQNR against Δ²/12, and QAT against PTQ."""
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.plotting import layout


class Records:
    """The frame indexed once by (arm, metric): summaries and figures ask for dozens of series."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.series = {key: rows.sort_values("step", kind="stable")
                       for key, rows in frame.groupby(["arm", "metric"], sort=False)}

    def by_step(self, arm: str, metric: str) -> dict[int, float]:
        """{step: value}; in a sweep arm the step is the bit width."""
        rows = self.series.get((arm, metric))
        return {} if rows is None else dict(zip(rows["step"].astype(int).tolist(), rows["value"].tolist()))

    def values(self, arm: str, metric: str) -> np.ndarray:
        rows = self.series.get((arm, metric))
        return np.array([]) if rows is None else rows["value"].to_numpy()

    def last(self, arm: str, metric: str) -> float | None:
        values = self.values(arm, metric)
        return float(values[-1]) if len(values) else None


def per_tensor_half_step(absmax: np.ndarray, bits: int) -> float:
    """Δ/2 of the symmetric per-tensor grid: Δ = max|w| / ((2^b − 1)/2). Smaller weights round to 0."""
    return float(absmax.max()) / ((2 ** bits - 1) / 2) / 2


LAYER_TITLES = ["layer 1 (rescaled)", "layer 2", "layer 3 (head)"]
BELOW = dict(orientation="h", yanchor="top", y=-0.25, x=0)  # legends under narrow multi-panel figures


def vs_bits_figure(records: Records, colors: dict[str, str], arms: list[str], metric: str, activation_bits: str,
                   n_classes: int) -> go.Figure:
    accuracy = metric == "test/accuracy"
    scale = 100 if accuracy else 1
    fig = go.Figure()
    for arm in arms:
        values, qat = records.by_step(arm, metric), arm.startswith("QAT")
        fig.add_scatter(x=list(values), y=[v * scale for v in values.values()], name=arm, mode="lines+markers",
                        line=dict(color=colors.get(arm), dash="dash" if qat else "solid"),
                        marker=dict(symbol="diamond" if qat else "circle", size=8),
                        hovertemplate=f"{arm}<br>%{{x}} bits<br>%{{y:.4g}}<extra></extra>")
    float_value = records.last("float", metric)
    if float_value is not None:
        fig.add_hline(y=float_value * scale, line_dash="dot", line_color=colors["float"],
                      annotation_text=f"float {float_value * scale:.3g}", annotation_position="bottom right")
    fig.add_hline(y=100 / n_classes if accuracy else float(np.log(n_classes)), line_dash="dash", line_color="gray",
                  annotation_text="chance", annotation_position="top right" if accuracy else "bottom right")
    fig.update_xaxes(dtick=1)
    title = ("Test accuracy" if accuracy else "Test loss") + f" vs weight bits (activations: {activation_bits})"
    fig = layout(fig, title, "weight bits", "test accuracy (%)" if accuracy else "cross-entropy (nats, log scale)",
                 log_y=not accuracy)
    return fig if accuracy else fig.update_yaxes(dtick=1)  # decades only: the loss spans ~2 of them


def per_layer_figure(records: Records, colors: dict[str, str], arms: list[str], measured: str, theory: str,
                     title: str, y_title: str) -> go.Figure:
    log_y = "mse" in measured
    fig = make_subplots(rows=1, cols=3, subplot_titles=LAYER_TITLES, shared_yaxes=True, horizontal_spacing=0.04)
    traces, cols = [], []
    for layer in (1, 2, 3):
        for arm in arms:
            for name, dash in ((measured, "solid"), (theory, "dash")):
                values = records.by_step(arm, f"{name}/layer_{layer:02d}")
                kind = "measured" if dash == "solid" else "Δ²/12 theory"
                traces.append(go.Scatter(
                    x=list(values), y=list(values.values()), name=arm, legendgroup=arm,
                    showlegend=layer == 1 and dash == "solid", mode="lines+markers" if dash == "solid" else "lines",
                    line=dict(color=colors.get(arm), dash=dash, width=1.5), marker=dict(size=5),
                    hovertemplate=f"{arm} ({kind})<br>layer {layer}<br>%{{x}} bits<br>%{{y:.3g}}<extra></extra>"))
                cols.append(layer)
    fig.add_traces(traces, rows=[1] * len(traces), cols=cols)
    fig.update_xaxes(title_text="weight bits", dtick=2)
    fig.update_yaxes(type="log" if log_y else "linear", exponentformat="power", dtick=1 if log_y else None)
    fig.update_yaxes(title_text=y_title, row=1, col=1)
    fig.update_layout(title=title, margin=dict(l=60, r=20, t=70, b=50), legend=BELOW, hovermode="closest")
    return fig


def histogram_figure(records: Records, layer: int, bits: int) -> go.Figure:
    weights = records.values("float", f"weights/layer_{layer:02d}")
    tensor_grid, channel_grid = records.values("float", "grid/per_tensor"), records.values("float", "grid/per_channel_typical")
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=["whole layer", "zoom: a typical channel"])
    zoom = 1.1 * float(np.abs(channel_grid).max()) if len(channel_grid) else 1.0
    grids = ((tensor_grid, "#d62728", 2, f"per-tensor {bits}-bit grid"),
             (channel_grid, "#2ca02c", 1, f"per-channel {bits}-bit grid (typical channel)"))
    for col, values, bins in ((1, weights, 80), (2, weights[np.abs(weights) <= zoom], 40)):
        if not len(values):
            continue
        counts, edges = np.histogram(values, bins=bins)
        top = float(counts.max()) * 1.05
        for grid, color, width, label in grids[: col]:  # the whole-layer panel shows only the per-tensor grid
            levels = grid[(grid >= edges[0]) & (grid <= edges[-1])]
            fig.add_scatter(x=[v for level in levels for v in (level, level, None)],
                            y=[v for _ in levels for v in (0, top, None)], mode="lines", name=label,
                            line=dict(color=color, width=width), legendgroup=label,
                            showlegend=color == "#2ca02c" or col == 1, row=1, col=col, hoverinfo="skip")
        fig.add_bar(x=(edges[:-1] + edges[1:]) / 2, y=counts, width=np.diff(edges), marker_color="rgba(80,80,80,0.75)",
                    name="weights", showlegend=col == 1, row=1, col=col,
                    hovertemplate="w ≈ %{x:.3g}<br>%{y} weights<extra></extra>")
        fig.update_xaxes(title_text="weight value", row=1, col=col)
    fig.update_yaxes(title_text="weights per bin", row=1, col=1)
    fig.update_layout(title=f"Layer {layer} weights and the symmetric {bits}-bit grids", bargap=0,
                      margin=dict(l=60, r=20, t=70, b=50), legend=BELOW)
    return fig


def ranges_figure(records: Records, bits: int, color: str) -> go.Figure:
    fig = make_subplots(rows=1, cols=3, subplot_titles=LAYER_TITLES, shared_yaxes=True, horizontal_spacing=0.04)
    for layer in (1, 2, 3):
        absmax = np.sort(records.values("float", f"channel_absmax/layer_{layer:02d}"))[::-1]
        fig.add_scatter(x=np.arange(1, len(absmax) + 1), y=absmax, mode="markers", marker=dict(color=color, size=5),
                        name="max |w| of one output channel", showlegend=layer == 1, row=1, col=layer,
                        hovertemplate=f"layer {layer}<br>channel rank %{{x}}<br>max|w| %{{y:.3g}}<extra></extra>")
        if len(absmax):
            half_step = per_tensor_half_step(absmax, bits)
            fig.add_scatter(x=[1, len(absmax)], y=[half_step] * 2, mode="lines", line=dict(color="#d62728", dash="dash"),
                            name=f"per-tensor Δ/2 at {bits} bits: channels below round to 0", showlegend=layer == 1,
                            row=1, col=layer, hovertemplate=f"Δ/2 = {half_step:.3g}<extra></extra>")
        fig.update_xaxes(title_text="channel (widest first)", row=1, col=layer)
    fig.update_yaxes(type="log", exponentformat="power", dtick="D2")
    fig.update_yaxes(title_text="max |w| per channel (log)", row=1, col=1)
    fig.update_layout(title="Per-channel weight ranges vs the per-tensor Δ/2",
                      margin=dict(l=60, r=20, t=70, b=50), legend=BELOW)
    return fig


def qat_figure(records: Records, colors: dict[str, str], scheme: str, ptq_arm: str, qat_arm: str,
               qat_bits: list[int]) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=[f"test accuracy ({scheme})", "QAT fine-tuning loss"])
    for arm in (ptq_arm, qat_arm):
        values, qat = records.by_step(arm, "test/accuracy"), arm.startswith("QAT")
        fig.add_scatter(x=list(values), y=[100 * v for v in values.values()], name=arm, mode="lines+markers",
                        line=dict(color=colors.get(arm), dash="dash" if qat else "solid"),
                        marker=dict(symbol="diamond" if qat else "circle", size=8), row=1, col=1,
                        hovertemplate=f"{arm}<br>%{{x}} bits<br>%{{y:.1f}}%<extra></extra>")
    float_acc = records.last("float", "test/accuracy")
    if float_acc is not None:
        fig.add_hline(y=100 * float_acc, line_dash="dot", line_color=colors["float"], row=1, col=1,
                      annotation_text="float", annotation_position="bottom right")
    for dash, bits in zip(["solid", "dash", "dot", "dashdot"], qat_bits):
        rows = records.by_step(qat_arm, f"qat_loss/bits_{bits:02d}")
        fig.add_scatter(x=list(rows), y=list(rows.values()), name=f"QAT {bits}-bit, training batch", mode="lines",
                        line=dict(color=colors.get(qat_arm), dash=dash), row=1, col=2,
                        hovertemplate=f"QAT {bits}-bit<br>step %{{x}}<br>loss %{{y:.4f}}<extra></extra>")
    fig.update_xaxes(title_text="weight bits", dtick=1, row=1, col=1)
    fig.update_xaxes(title_text="QAT step", row=1, col=2)
    fig.update_yaxes(title_text="test accuracy (%)", row=1, col=1)
    fig.update_yaxes(title_text="cross-entropy (nats)", row=1, col=2)
    fig.update_layout(title="Quantization-aware training vs post-training quantization",
                      margin=dict(l=60, r=20, t=70, b=50), legend=BELOW)
    return fig


def training_figure(records: Records, color: str) -> go.Figure:
    loss = records.by_step("float", "loss")
    fig = go.Figure()
    fig.add_scatter(x=list(loss), y=list(loss.values()), name="float", mode="lines", line=dict(color=color),
                    hovertemplate="float<br>step %{x}<br>loss %{y:.4f}<extra></extra>")
    return layout(fig, "Float model: training loss (before quantization)", "step", "cross-entropy (nats)")
