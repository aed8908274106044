"""Quantization error, drawn: accuracy and loss against bits, the channel ranges against the per-tensor
Δ/2, the weight histogram with both grids, per-layer MSE/SQNR against Δ²/12, the observers' scale and
zero-point, QAT against PTQ, and what the straight-through gradient reaches during QAT."""
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.plotting import curves_figure, layout, legend_line
from scenarios.records import Records

TENSOR, CHANNEL = "PTQ sym · per-tensor", "PTQ sym · per-channel"  # the grids drawn are these arms' schemes


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
    if float_value is not None:  # named in the legend: a label on the line sat under the widest bit width's markers
        legend_line(fig, float_value * scale, f"unquantized float model {float_value * scale:.3g}", dash="dot")
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


def symmetric_grid(scale: float | None, bits: int) -> np.ndarray:
    """The levels q·Δ, q ∈ [−2^(b−1), 2^(b−1) − 1], in float32 as torch computes them."""
    if scale is None:
        return np.array([], dtype=np.float32)
    return np.arange(-(2 ** (bits - 1)), 2 ** (bits - 1), dtype=np.float32) * np.float32(scale)


def histogram_figure(records: Records, colors: dict[str, str], layer: int, bits: int) -> go.Figure:
    weights = records.values("float", f"weights/layer_{layer:02d}")
    tensor_grid, channel_grid = (symmetric_grid(records.at("float", f"grid_scale/{kind}/layer_{layer:02d}", bits), bits)
                                 for kind in ("per_tensor", "per_channel_typical"))
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=["whole layer", "zoom: a typical channel"])
    zoom = 1.1 * float(np.abs(channel_grid).max()) if len(channel_grid) else 1.0
    grids = ((tensor_grid, colors.get(TENSOR), 2, f"per-tensor {bits}-bit grid"),
             (channel_grid, colors.get(CHANNEL), 1, f"per-channel {bits}-bit grid (typical channel)"))
    for col, values, bins in ((1, weights, 80), (2, weights[np.abs(weights) <= zoom], 40)):
        if not len(values):
            continue
        counts, edges = np.histogram(values, bins=bins)
        top = float(counts.max()) * 1.05
        # the whole layer: the per-tensor grid only; the zoom draws it last, so its one level there (0) reads red
        for index, (grid, color, width, label) in reversed(list(enumerate(grids[: col]))):
            levels = grid[(grid >= edges[0]) & (grid <= edges[-1])]
            fig.add_scatter(x=[v for level in levels for v in (level, level, None)],
                            y=[v for _ in levels for v in (0, top, None)], mode="lines", name=label, opacity=0.6,
                            line=dict(color=color, width=width), legendgroup=label,
                            showlegend=index == 1 or col == 1, row=1, col=col, hoverinfo="skip")
        fig.add_bar(x=(edges[:-1] + edges[1:]) / 2, y=counts, width=np.diff(edges), marker_color="rgba(80,80,80,0.75)",
                    name="weights", showlegend=col == 1, row=1, col=col,
                    hovertemplate="w ≈ %{x:.3g}<br>%{y} weights<extra></extra>")
        fig.update_xaxes(title_text="weight value", row=1, col=col)
    fig.update_yaxes(title_text="weights per bin", row=1, col=1)
    fig.update_layout(title=f"Layer {layer} weights and the symmetric {bits}-bit grids", bargap=0,
                      margin=dict(l=60, r=20, t=70, b=50), legend=BELOW)
    return fig


def rank_ticks(count: int) -> list[int]:
    """Ranks to label on a column a third of a chart wide: 1 and multiples of a 1-2-5 step, at most five
    (a tick at every one of 10 ranks stood on its side, crammed)."""
    step = next(s for s in (10 ** k * m for k in range(7) for m in (1, 2, 5)) if count / s <= 4)
    return sorted({1, *range(step, count + 1, step)}) if count else []


def ranges_figure(records: Records, colors: dict[str, str], bits: int) -> go.Figure:
    fig = make_subplots(rows=1, cols=3, subplot_titles=LAYER_TITLES, shared_yaxes=True, horizontal_spacing=0.04)
    for layer in (1, 2, 3):
        absmax = np.sort(records.values("float", f"channel_absmax/layer_{layer:02d}"))[::-1]
        fig.add_scatter(x=np.arange(1, len(absmax) + 1), y=absmax, mode="markers",
                        marker=dict(color=colors.get("float"), size=5),
                        name="max |w| of one output channel", showlegend=layer == 1, row=1, col=layer,
                        hovertemplate=f"layer {layer}<br>channel rank %{{x}}<br>max|w| %{{y:.3g}}<extra></extra>")
        if len(absmax):
            half_step = per_tensor_half_step(absmax, bits)
            fig.add_scatter(x=[1, len(absmax)], y=[half_step] * 2, mode="lines",
                            line=dict(color=colors.get(TENSOR), dash="dash"),
                            name=f"per-tensor Δ/2 at {bits} bits: channels below round to 0", showlegend=layer == 1,
                            row=1, col=layer, hovertemplate=f"Δ/2 = {half_step:.3g}<extra></extra>")
        fig.update_xaxes(tickvals=rank_ticks(len(absmax)), tickangle=0, row=1, col=layer)
    # one title under the middle column: three side by side ran into each other
    fig.update_xaxes(title_text="output channel, ranked widest first", row=1, col=2)
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
    if float_acc is not None:  # before the right panel's traces: the line spans the x range of those drawn so far
        legend_line(fig, 100 * float_acc, f"unquantized float model {100 * float_acc:.3g}", dash="dot")
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


def training_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    return curves_figure(records, colors, "loss", arms=["float"], title="Float model: training loss (before quantization)",
                         y_title="cross-entropy (nats)")


def scale_figure(records: Records, colors: dict[str, str], arms: list[str], layer: int) -> go.Figure:
    """The observers' (Δ, z) of one layer per bit width and scheme (per-channel: the median-scale channel),
    beside the symmetric per-tensor formula Δ = max|w| / ((2^b − 1)/2)."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=["scale Δ", "zero-point z"])
    for col, metric in ((1, "scale"), (2, "zero_point")):
        for arm in arms:
            values = records.by_step(arm, f"{metric}/layer_{layer:02d}")
            fig.add_scatter(x=list(values), y=list(values.values()), name=arm, legendgroup=arm, showlegend=col == 1,
                            mode="lines+markers", line=scheme_line(arm, colors), marker=scheme_marker(arm), row=1, col=col,
                            hovertemplate=f"{arm}<br>%{{x}} bits<br>{metric} %{{y:.4g}}<extra></extra>")
    absmax = records.values("float", f"channel_absmax/layer_{layer:02d}")
    bits = sorted({b for arm in arms for b in records.by_step(arm, f"scale/layer_{layer:02d}")})
    if len(absmax) and bits:
        fig.add_scatter(x=bits, y=[float(absmax.max()) / ((2 ** b - 1) / 2) for b in bits], mode="lines",
                        name="max|w| / ((2ᵇ − 1)/2)", line=dict(color="gray", dash="dash"), row=1, col=1,
                        hovertemplate="formula<br>%{x} bits<br>Δ %{y:.4g}<extra></extra>")
    fig.update_xaxes(title_text="weight bits", dtick=1)
    fig.update_yaxes(type="log", exponentformat="power", title_text="Δ (log scale)", row=1, col=1)
    fig.update_yaxes(title_text="z (integer code of 0.0)", row=1, col=2)
    fig.update_layout(title=f"Layer {layer}: the observer's scale and zero-point per bit width "
                            "(per-channel: the median-scale channel)", margin=dict(l=60, r=20, t=70, b=50), legend=BELOW)
    return fig


def scheme_line(arm: str, colors: dict[str, str]) -> dict:
    """Schemes often share a value (asym per-tensor's Δ is sym per-tensor's when the weights straddle 0 evenly;
    every symmetric z is 0), so each keeps a style that shows from under another: per-tensor wide, per-channel
    narrow; asymmetric dashed, so a symmetric line shows through its gaps."""
    return dict(color=colors.get(arm), width=4 if "per-tensor" in arm else 2, dash="dash" if "asym ·" in arm else "solid")


def scheme_marker(arm: str) -> dict:
    """Symmetric: large circles; asymmetric: smaller diamonds, so a symmetric marker rings an asymmetric one on it."""
    return dict(symbol="diamond", size=7) if "asym ·" in arm else dict(symbol="circle", size=11)


def ste_figure(records: Records, colors: dict[str, str], qat_arm: str, qat_bits: list[int]) -> go.Figure:
    """Per layer and QAT step: the share of weights inside the clamp range, whose gradient the STE passes."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=LAYER_TITLES, shared_yaxes=True, horizontal_spacing=0.04)
    for layer in (1, 2, 3):
        for dash, bits in zip(["solid", "dash", "dot", "dashdot"], qat_bits):
            passed = records.series(qat_arm, f"ste_pass/bits_{bits:02d}/layer_{layer:02d}")
            gap = records.series(qat_arm, f"ste_gap/bits_{bits:02d}/layer_{layer:02d}")
            fig.add_scatter(x=passed.index, y=100 * passed.to_numpy(), name=f"QAT {bits}-bit", legendgroup=str(bits),
                            showlegend=layer == 1, mode="lines", line=dict(color=colors.get(qat_arm), dash=dash),
                            text=[f"max |∂L/∂w − mask·∂L/∂ŵ| = {g:.3g}" for g in gap.to_numpy()], row=1, col=layer,
                            hovertemplate=f"QAT {bits}-bit · layer {layer}<br>step %{{x}}<br>%{{y:.2f}}% passed"
                                          "<br>%{text}<extra></extra>")
        fig.update_xaxes(title_text="QAT step", row=1, col=layer)
    fig.update_yaxes(title_text="weights inside the clamp range (%)", row=1, col=1)
    fig.update_layout(title="Straight-through estimator: the share of weights whose gradient passes the clamp mask",
                      margin=dict(l=60, r=20, t=70, b=50), legend=BELOW)
    return fig
