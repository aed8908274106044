"""QLoRA, drawn: the NF4 code beside the weights it rounds, the loss of the three arms and its gap,
memory per parameter by category, and NF4's error against int4 absmax by block size."""
import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.plotting import UNIFORM_BYTE_BPB, category_color, curves_figure, full_width, layout
from scenarios.records import Records

PRE, FULL, LORA, QLORA = "pretraining", "full fine-tune", "LoRA, fp32 base", "QLoRA, NF4 base"  # engines.sequence.qlora
ARMS = [FULL, LORA, QLORA]
NO_DQ = "QLoRA, constants in fp32"  # the memory chart's fourth bar: the QLoRA arm had its absmax stayed float32
CATEGORIES = {"linear_weights": "block Linear weights", "constants": "quantization constants",
              "rest_of_base": "rest of the base (embeddings, norms, biases, read-out)", "adapters": "LoRA adapters",
              "gradients": "gradients", "optimizer": "AdamW state"}
BLOCKS = (32, 64, 128, 256)
SOURCES = {"base": ("the base's weights", "solid"), "normal": ("N(0, 1) draws", "dash"), "uniform": ("uniform draws", "dot")}
UNIFORM = f"uniform guess: {UNIFORM_BYTE_BPB:g} bits"  # in the legend: on the line its label ran over the axis title and curves
PANELS = ("pretraining", "then each fine-tune, from its end")  # the prose chart's two panels
CODES = {"nf4": ("NF4", "#1f77b4"), "int4": ("int4 absmax", "#d62728")}


def memory_rows(records: Records) -> dict[str, dict[str, float]]:
    """Bar → category → bits per base parameter (the arms that have finished, and QLoRA without double quantization)."""
    rows = {}
    for arm in ARMS:
        if records.has("mem_bits/optimizer", arm):
            rows[arm] = {c: records.last(arm, f"mem_bits/{c}") or 0.0 for c in CATEGORIES}
    if QLORA in rows and records.has("mem_bits/constants_no_dq", QLORA):
        rows[NO_DQ] = {**rows[QLORA], "constants": records.last(QLORA, "mem_bits/constants_no_dq")}
        rows = {k: rows[k] for k in [FULL, LORA, NO_DQ, QLORA] if k in rows}
    return rows


def memory_figure(records: Records) -> go.Figure:
    rows = memory_rows(records)
    fig = go.Figure()
    bars = list(rows)
    for index, (key, label) in enumerate(CATEGORIES.items()):
        values = [rows[bar][key] for bar in bars]
        fig.add_bar(x=bars, y=values, name=label, marker_color=category_color(index),
                    text=[f"{v:.2f}" if v >= 0.05 else "" for v in values], textposition="inside",
                    hovertemplate=f"%{{x}}<br>{label}: %{{y:.3f}} bits per base parameter<extra></extra>")
    totals = [sum(rows[bar].values()) for bar in bars]
    fig.add_scatter(x=bars, y=totals, mode="text", text=[f"{t:.1f} bits" for t in totals], textposition="top center",
                    showlegend=False, hoverinfo="skip")
    layout(fig, "Memory per base parameter, by category (from each arm's tensors)",
           "arm", "bits per parameter of the base")
    fig.update_xaxes(tickangle=0, tickvals=bars, ticktext=[bar.replace(", ", ",<br>") for bar in bars])
    fig.update_layout(barmode="stack", height=480, legend=dict(orientation="h", y=-0.3), legend_title_text="category",
                      uniformtext_minsize=10, uniformtext_mode="hide")  # labels too small for their segment are hidden
    return fig


def constants_figure(records: Records, block: int, second_block: int) -> go.Figure:
    """The constants per quantized weight, measured from the QLoRA arm's tensors, beside the formulas."""
    fig = go.Figure()
    quantized, base = records.last(QLORA, "quantized_params"), records.last(QLORA, "base_params")
    if quantized and base:
        bars = {"float32 absmax": records.last(QLORA, "mem_bits/constants_no_dq") * base / quantized,
                "double quantized": records.last(QLORA, "mem_bits/constants") * base / quantized}
        fig.add_bar(x=list(bars), y=list(bars.values()), name="measured (this model's layers)", marker_color="#ff7f0e",
                    text=[f"{v:.4f}" for v in bars.values()], textposition="outside",
                    hovertemplate="%{x}<br>%{y:.4f} bits per quantized weight<extra></extra>")
        formulas = [32 / block, 8 / block + 32 / (block * second_block)]
        fig.add_scatter(x=list(bars), y=formulas, mode="markers", name="formula: 32/n and 8/n + 32/(n·n₂)",
                        marker=dict(symbol="line-ew-open", size=40, color="black", line=dict(width=3, color="black")),
                        hovertemplate="%{x}<br>formula %{y:.4f} bits<extra></extra>")
    layout(fig, f"Quantization constants per quantized weight (block size n = {block}, n₂ = {second_block})", "how the absmax is kept",
           "bits per quantized weight")
    fig.update_layout(legend=dict(orientation="h", y=-0.22), legend_title_text="")
    return fig


def error_figure(records: Records) -> go.Figure:
    fig = go.Figure()
    for source, (words, dash) in SOURCES.items():
        for code, (name, color) in CODES.items():
            points = [(b, records.last(QLORA, f"qerr/{source}/{code}/block_{b}")) for b in BLOCKS]
            points = [(b, v) for b, v in points if v is not None]
            if points:
                fig.add_scatter(x=[b for b, _ in points], y=[v for _, v in points], mode="lines+markers",
                                name=f"{name}, {words}", line=dict(color=color, dash=dash),
                                hovertemplate=f"{name}, {words}<br>block %{{x}}<br>‖ŵ − w‖²/‖w‖² = %{{y:.4g}}<extra></extra>")
    fig.update_xaxes(type="log", tickvals=list(BLOCKS))
    layout(fig, "Rounding error at 4 bits: NF4 against int4 absmax, by block size", "block size (weights per absmax)",
           "relative error ‖ŵ − w‖²/‖w‖²")
    fig.update_layout(legend=dict(orientation="h", y=-0.22), legend_title_text="code, data")
    return fig


def nice_step(rough: float) -> float:
    """1, 2 or 5 times a power of ten, at least `rough`: the spacing of an axis's ticks."""
    power = 10 ** math.floor(math.log10(rough))
    return next(k * power for k in (1, 2, 5, 10) if k * power >= rough)


def code_figure(records: Records) -> go.Figure:
    """The 16 NF4 values and int4's 15 levels on [−1, 1], as rows of ticks under the histogram of the base's
    w / absmax; the y axis names the rows there and counts shares only from 0 up."""
    fig = go.Figure()
    centers = sorted((int(m.rsplit("_", 1)[1]), records.last(QLORA, m)) for m in records.metrics(QLORA)
                     if m.startswith("hist/bin_"))
    top = max((v for _, v in centers), default=0.0) or 0.05
    if centers:
        bins = len(centers)
        fig.add_bar(x=[-1 + (2 * i + 1) / bins for i, _ in centers], y=[v for _, v in centers], width=2 / bins,
                    name="the base's weights ÷ their block's absmax", marker_color="#c7c7c7",
                    hovertemplate="w/absmax ≈ %{x:.2f}<br>%{y:.3f} of the weights<extra></extra>")
    rows = {}
    for code, (name, color), y in ((c, CODES[c], -h * top) for c, h in (("nf4", 0.2), ("int4", 0.5))):
        values = [records.last(QLORA, f"code/{code}/index_{i:02d}") for i in range(16)]
        values = [v for v in values if v is not None]
        if values:
            rows[y] = name
            fig.add_scatter(x=values, y=[y] * len(values), mode="markers", name=f"{name}: {len(values)} values",
                            marker=dict(color=color, size=9, symbol="line-ns-open", line=dict(width=2)),
                            hovertemplate=f"{name}<br>%{{x:.4f}}<extra></extra>")
    layout(fig, "The 4-bit codes over the weights they round (ticks: the values a weight may take)",
           "w ÷ absmax of its block", "share of the base's weights")
    step = nice_step(top / 4)
    shares = [i * step for i in range(int(top / step) + 1)]
    fig.update_yaxes(tickvals=[*rows, *shares], ticktext=[*rows.values(), *(f"{v:g}" for v in shares)],
                     range=[-0.7 * top, 1.08 * top])
    fig.update_layout(legend=dict(orientation="h", y=-0.22), legend_title_text="")
    return fig


def gap_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    """Each arm's held-out bits per byte minus LoRA's (fp32 base), step by step."""
    fig = go.Figure()
    reference = records.series(LORA, "domain_bpb")
    for arm in (QLORA, FULL):
        series = records.series(arm, "domain_bpb")
        both = series.index.intersection(reference.index)
        if len(both):
            fig.add_scatter(x=list(both), y=(series[both] - reference[both]).to_numpy(), name=f"{arm} − {LORA}",
                            mode="lines", line=dict(color=colors.get(arm)),
                            hovertemplate=f"{arm} − {LORA}<br>step %{{x}}<br>%{{y:+.4f}} bits per byte<extra></extra>")
    fig.add_hline(y=0, line_dash="dot", line_color="gray")
    return layout(fig, "The loss gap: held-out bits per byte minus LoRA's on the float base", "fine-tuning step",
                  "Δ bits per byte (target text)")


def loss_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    return curves_figure(records, colors, "domain_bpb", arms=ARMS, title="Held-out loss on the target text while fine-tuning",
                         x_title="fine-tuning step", y_title="bits per byte", log_y=False,
                         chance=UNIFORM_BYTE_BPB, chance_label=UNIFORM, chance_in_legend=True)


def prose_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    """Pretraining (left), then each fine-tune from its end (right): two panels with their own step counts,
    one y axis, so the fine-tunes do not read as running beside pretraining."""
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=[0.4, 0.6], horizontal_spacing=0.03,
                        subplot_titles=PANELS)
    for col, arms in ((1, [PRE]), (2, ARMS)):
        panel = curves_figure(records, colors, "prose_bpb", arms=arms, title="", y_title="", log_y=False,
                              chance=UNIFORM_BYTE_BPB, chance_label=UNIFORM, chance_in_legend=True)
        for trace in panel.data:
            if trace.name == UNIFORM and col == 2 and any(t.name == UNIFORM for t in fig.data):
                trace.showlegend = False
            if trace.name == UNIFORM:
                trace.legendgroup = UNIFORM  # one legend entry hides both panels' line
            fig.add_trace(trace, row=1, col=col)
        for arm in arms:
            step = records.diverged_at(arm)
            if step is not None:
                fig.add_vline(x=step, line_dash="dot", line_color=colors.get(arm),
                              annotation_text=f"{arm} diverged at step {step}", row=1, col=col)
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text="bits per byte (prose)", row=1, col=1)
    fig.update_layout(title="Held-out loss on the prose: pretraining, then what each fine-tune keeps",
                      margin=dict(l=60, r=20, t=70, b=50), legend_title_text="arm", hovermode="closest",
                      legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return full_width(fig)  # two panels of steps: at half the page each was a strip under overlapping titles
