"""Quantization error: how few bits can a trained network keep, and what decides it?

A b-bit quantizer puts 2^b levels a step Δ apart over the range its observer saw. The
rounding error is ~uniform on ±Δ/2, so the weight MSE is Δ²/12 and each bit adds
6.02 dB of signal-to-quantization-noise. Accuracy hardly moves at 8 bits; what breaks a
network at fewer bits is usually not the bit count but the *range* the step is sized on.

Per-tensor quantization sizes one Δ on the widest output channel. We train a small MLP on
a 10-class Gaussian mixture, then scale a few of layer 1's channels up by `channel_spread`
and layer 2's matching inputs down (exact through the ReLU: same function, same float
accuracy). At 4 bits the per-tensor Δ/2 now exceeds every ordinary channel's largest
weight, they round to zero, and accuracy falls to chance; per-channel quantization gives
each row its own Δ and holds. Quantization-aware training fine-tunes through the rounding
(straight-through estimator) and wins back most of what 2–3-bit PTQ lost.

Look at: accuracy vs bits (the cliff and where it sits per scheme), the channel ranges
against the per-tensor Δ/2 line, the histogram with both grids, and MSE/SQNR vs Δ²/12.
"""
from typing import Literal

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
import torch.nn.functional as F
from pydantic import Field

from engines.models import DeepMLP
from plotly.subplots import make_subplots
from engines.quantization import (MixtureTask, Scheme, inspect_weights, ptq_metrics, quant_range,
                                  quantization_aware_training, rescale_channels, test_metrics)
from engines.training import Diverged, StepRecord, log_every_for, train
from scenarios.base import Event, Run, Scenario, ScenarioConfig
from scenarios.plotting import arm_colors, layout, metric_series

N_FEATURES, N_CLASSES, CLUSTERS_PER_CLASS, CLUSTER_STD, BATCH = 4, 10, 3, 0.25, 256

SCHEMES = {"sym · per-tensor": (True, False), "sym · per-channel": (True, True),  # (symmetric, per_channel)
           "asym · per-tensor": (False, False), "asym · per-channel": (False, True)}
SCHEME_SETS = {"all four": list(SCHEMES), "symmetric: per-tensor vs per-channel": list(SCHEMES)[:2],
               "per-tensor: symmetric vs asymmetric": ["sym · per-tensor", "asym · per-tensor"]}
BIT_SETS = {"2-8": [2, 3, 4, 5, 6, 7, 8], "2,3,4,8": [2, 3, 4, 8], "4-8": [4, 5, 6, 7, 8], "8": [8]}
QAT_BIT_SETS = {"2,3": [2, 3], "2,3,4": [2, 3, 4], "2": [2], "none": []}


class Config(ScenarioConfig):
    width: int = Field(64, ge=16, le=256, description="Units in each of the MLP's two hidden layers.")
    train_steps: int = Field(400, ge=50, le=3000, description="Float training steps (Adam, batches of 256).")
    lr: float = Field(3e-3, ge=1e-4, le=3e-2, description="Float training learning rate.",
                      json_schema_extra={"scale": "log"})
    channel_spread: float = Field(
        30.0, ge=1.0, le=1000.0, json_schema_extra={"scale": "log"},
        description="After training, multiply width/16 of layer 1's output channels by this and divide layer 2's "
                    "matching inputs by it: same function, per-channel ranges now differ ~this much. 1 = as trained.")
    bits: Literal["2-8", "2,3,4,8", "4-8", "8"] = Field("2-8", description="Weight bit widths to sweep.")
    schemes: Literal["all four", "symmetric: per-tensor vs per-channel", "per-tensor: symmetric vs asymmetric"] = Field(
        "all four", description="Weight schemes to compare (symmetric: z = 0; per-channel: one Δ per output row).")
    activation_bits: Literal["8", "same as weights", "float"] = Field(
        "8", description="Each layer's input is quantized per tensor (affine, range from a calibration batch).")
    qat_bits: Literal["2,3", "2,3,4", "2", "none"] = Field(
        "2,3", description="Bit widths that also get a quantization-aware fine-tune, to compare with PTQ.")
    qat_scheme: Literal["sym · per-channel", "sym · per-tensor", "asym · per-channel", "asym · per-tensor"] = Field(
        "sym · per-channel", description="Weight scheme of the QAT arm (its PTQ arm is always run too).")
    qat_steps: int = Field(100, ge=10, le=2000, description="QAT fine-tuning steps, starting from the float model.")
    qat_lr: float = Field(1e-3, ge=1e-5, le=1e-2, description="QAT learning rate (Adam).",
                          json_schema_extra={"scale": "log"})
    inspect_layer: int = Field(1, ge=1, le=3, description="Layer whose weight histogram is drawn with the grids "
                                                          "(1 is the rescaled one; 3 is the head).")
    inspect_bits: int = Field(4, ge=2, le=8, description="Bit width of the grids on the histogram and range plots.")


def ptq_arm(scheme_name: str) -> str:
    return f"PTQ {scheme_name}"


def qat_arm(config: Config) -> str:
    return f"QAT {config.qat_scheme}"


def ptq_arms_of(config: Config) -> list[str]:
    names = SCHEME_SETS[config.schemes]
    if QAT_BIT_SETS[config.qat_bits] and config.qat_scheme not in names:
        names = names + [config.qat_scheme]  # QAT is always compared with PTQ of its own scheme
    return names


def arms_of(config: Config) -> list[str]:
    qat = [qat_arm(config)] if QAT_BIT_SETS[config.qat_bits] else []
    return ["float"] + [ptq_arm(name) for name in ptq_arms_of(config)] + qat


def activation_bits_for(config: Config, weight_bits: int) -> int | None:
    return {"8": 8, "same as weights": weight_bits, "float": None}[config.activation_bits]


class Quantization(Scenario):
    id = "quantization"
    title = "Quantization error"
    order = 50
    question = "How few bits can a trained network keep, and why does per-tensor quantization collapse first?"
    terms = ("Quantization", "Scale / zero-point", "Symmetric / asymmetric quantization", "Per-channel quantization",
             "QAT (Quantization-Aware Training)", "Straight-through estimator")
    formula = (r"\begin{aligned}\hat x &= \Delta\,\big(\mathrm{clamp}(\lfloor x/\Delta\rceil + z,\ q_{\min},\ q_{\max})"
               r" - z\big),\quad \Delta_{\mathrm{sym}} = \frac{\max|x|}{(q_{\max}-q_{\min})/2}\\"
               r"\mathbb{E}(\hat x - x)^2 &\approx \frac{\Delta^2}{12},\qquad \mathrm{SQNR} \approx 6.02\,b + c\ \ \mathrm{dB}\\"
               r"\frac{\partial \hat x}{\partial x} &= \mathbb{1}\big[q_{\min} \le \lfloor x/\Delta\rceil + z \le q_{\max}\big]"
               r"\quad\text{(straight-through)}\end{aligned}")
    Config = Config
    tiny = {"width": 16, "train_steps": 50, "bits": "2,3,4,8", "schemes": "symmetric: per-tensor vs per-channel",
            "qat_bits": "2", "qat_steps": 10}
    presets = {
        "the failure: per-tensor at 4 bits": {"channel_spread": 30.0, "schemes": "symmetric: per-tensor vs per-channel",
                                              "qat_bits": "none"},
        "as trained (no rescaling)": {"channel_spread": 1.0},
        "the fix: QAT at 2-4 bits": {"qat_bits": "2,3,4", "qat_scheme": "sym · per-channel"},
        "weights only (float activations)": {"activation_bits": "float"},
        "Krishnamoorthi 2018 (int8)": {"bits": "8", "channel_spread": 1.0, "qat_bits": "none"},
    }

    def execute(self, config: Config, run: Run) -> None:
        task = MixtureTask(N_FEATURES, N_CLASSES, CLUSTERS_PER_CLASS, CLUSTER_STD, seed=config.seed)
        model = DeepMLP(N_FEATURES, config.width, 2, N_CLASSES, activation="relu", seed=config.seed)
        bits, qat_bits = BIT_SETS[config.bits], QAT_BIT_SETS[config.qat_bits]
        # Progress in units of one float step; a PTQ point costs about 10, a QAT step about 3.
        total = config.train_steps + 10 * len(bits) * len(ptq_arms_of(config)) + 3 * config.qat_steps * len(qat_bits)
        done = 0
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
        log_every = log_every_for(config.train_steps)
        for record in train(model, optimizer, task.batches(BATCH), F.cross_entropy, config.train_steps,
                            log_every=log_every):
            if isinstance(record, Diverged):
                run.event(Event("float", record.step, "diverged", record.message))
                return  # nothing left to quantize
            run.add("float", record.step, record.metrics)
            run.progress((record.step + 1) / total)
            if run.should_stop():
                return
        done = config.train_steps
        rescale_channels(model, config.channel_spread, max(1, config.width // 16),
                         torch.Generator().manual_seed(config.seed + 7))
        last = config.train_steps - 1
        run.add("float", last, test_metrics(model, task))
        inspected = inspect_weights(model, config.inspect_layer, config.inspect_bits)
        for index in range(max(map(len, inspected.values()))):  # step = channel / weight / grid-code index
            run.add("float", index, {name: values[index] for name, values in inspected.items() if index < len(values)})
        for scheme_name in ptq_arms_of(config):
            for b in bits:
                scheme = Scheme(b, *SCHEMES[scheme_name])
                run.add(ptq_arm(scheme_name), b, ptq_metrics(model, scheme, activation_bits_for(config, b), task))
                done += 10
                run.progress(done / total)
                if run.should_stop():
                    return
        for b in qat_bits:
            qat_log_every = log_every_for(config.qat_steps, max_points=50)
            for item in quantization_aware_training(model, Scheme(b, *SCHEMES[config.qat_scheme]),
                                                    activation_bits_for(config, b), task, config.qat_steps,
                                                    config.qat_lr, BATCH, qat_log_every):
                if isinstance(item, Diverged):
                    run.event(Event(qat_arm(config), b, "diverged", f"QAT at {b} bits {item.message}"))
                elif isinstance(item, StepRecord):
                    run.add(qat_arm(config), item.step, {f"qat_loss/bits_{b:02d}": item.metrics["loss"]})
                    run.progress((done + 3 * (item.step + 1)) / total)
                    if run.should_stop():
                        return
                else:
                    run.add(qat_arm(config), b, test_metrics(item, task))
            done += 3 * config.qat_steps

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records = Records(frame)
        float_acc = records.last("float", "test/accuracy")
        absmax = records.values("float", "channel_absmax/layer_01")
        b = config.inspect_bits
        arms: dict = {}
        for arm in arms_of(config)[1:]:
            acc = records.by_step(arm, "test/accuracy")
            within = [bits for bits in acc if float_acc is not None and all(
                acc[k] >= float_acc - 0.01 for k in acc if k >= bits)]
            arms[arm] = {"accuracy": {str(k): v for k, v in acc.items()}, "fewest_bits_within_1pt": min(within, default=None)}
        qat: dict = {}
        ptq_same = records.by_step(ptq_arm(config.qat_scheme), "test/accuracy")
        for bits, acc in records.by_step(qat_arm(config), "test/accuracy").items():
            ptq = ptq_same.get(bits)
            lost = None if ptq is None or float_acc is None else float_acc - ptq
            qat[str(bits)] = {"qat": acc, "ptq": ptq,
                              "recovered": (acc - ptq) / lost if lost is not None and lost > 0.005 else None}
        zeroed = int((absmax < per_tensor_half_step(absmax, b)).sum()) if len(absmax) else None
        loss = records.by_step("float", "loss")
        return {"float_accuracy": float_acc, "chance_accuracy": 1 / N_CLASSES, "arms": arms, "qat": qat,
                "float_train_step": max(loss, default=None), "float_train_loss": loss[max(loss)] if loss else None,
                "layer1_channel_span": float(absmax.max() / absmax.min()) if len(absmax) else None,
                "layer1_channels": len(absmax), "inspect_bits": b, "layer1_zeroed_per_tensor": zeroed,
                **sqnr_fit(records, config)}

    def explain(self, summary: dict, config: Config) -> str:
        float_acc = summary["float_accuracy"]
        if float_acc is None:
            if summary["float_train_loss"] is None:
                return "Run to train the float model and quantize it at each bit width."
            return (f"Training the float model: loss {summary['float_train_loss']:.3f} at step "
                    f"{summary['float_train_step']}. The quantized arms follow.")
        lines = [f"- The float model reaches **{float_acc:.1%}** test accuracy (chance {summary['chance_accuracy']:.0%})."]
        for arm, info in summary["arms"].items():
            acc = {int(k): v for k, v in info["accuracy"].items()}
            if not acc:
                continue
            fewest = info["fewest_bits_within_1pt"]
            held = f"within 1 point of float down to {fewest} bits" if fewest else "more than 1 point below float at every width"
            shown = sorted({b for b in (fewest - 1 if fewest else None, config.inspect_bits, min(acc)) if b in acc},
                           reverse=True)
            lines.append(f"- **{arm}**: {held}; " + ", ".join(f"{acc[b]:.1%} at {b} bits" for b in shown) + ".")
        span, zeroed, b = summary["layer1_channel_span"], summary["layer1_zeroed_per_tensor"], summary["inspect_bits"]
        if span is not None:
            consequence = (f"the per-tensor Δ/2 exceeds the largest weight of {zeroed} of its {summary['layer1_channels']} "
                           "channels: they round to all zeros. Per-channel gives each row its own Δ." if zeroed else
                           "every channel still reaches past the per-tensor Δ/2, so no channel vanishes.")
            lines.append(f"- Layer 1's per-channel max|w| spans **{span:.0f}×**. At {b} bits {consequence}")
        if summary.get("sqnr_db_per_bit") is not None:
            line = (f"- Weight SQNR (layer 2, {summary['sqnr_arm']}) grows **{summary['sqnr_db_per_bit']:.2f} dB per bit** "
                    f"from 4 to 8 bits; Δ²/12 predicts {summary['sqnr_theory_db_per_bit']:.2f} there (Δ ∝ 1/(2^b − 1), "
                    "→ 6.02 dB/bit for many bits)")
            ratio = summary.get("mse_over_theory_8bit")
            lines.append(line + (f"; at 8 bits the MSE is {ratio:.2f}× Δ²/12." if ratio else "."))
        for bits, info in summary["qat"].items():
            line = f"- **QAT at {bits} bits**: {info['qat']:.1%}"
            if info["ptq"] is not None:
                line += f" vs PTQ {info['ptq']:.1%}"
            if info["recovered"] is not None:
                line += (f" — wins back {info['recovered']:.0%} of what PTQ lost" if info["recovered"] > 0.1
                         else " — no real gain over PTQ here")
            lines.append(line + ".")
        return "\n".join(lines)

    def figures(self, frame: pd.DataFrame, config: Config) -> dict[str, go.Figure]:
        records, colors = Records(frame), arm_colors(arms_of(config))
        ptq = [ptq_arm(name) for name in ptq_arms_of(config)]
        qat = [qat_arm(config)] if QAT_BIT_SETS[config.qat_bits] else []
        return {
            "accuracy_vs_bits": vs_bits_figure(records, config, colors, ptq + qat, "test/accuracy"),
            "channel_ranges": ranges_figure(records, config, colors["float"]),
            "weight_histogram": histogram_figure(records, config),
            "qat_vs_ptq": qat_figure(records, config, colors),
            "weight_mse": per_layer_figure(records, colors, ptq, "weight_mse", "weight_mse_theory",
                                           "Weight MSE per layer vs bits (dashed: Δ²/12)", "MSE (log scale)"),
            "weight_sqnr": per_layer_figure(records, colors, ptq, "weight_sqnr_db", "weight_sqnr_theory_db",
                                            "Weight SQNR per layer vs bits (dashed: 10·log10(P/(Δ²/12)))", "SQNR (dB)"),
            "loss_vs_bits": vs_bits_figure(records, config, colors, ptq + qat, "test/loss"),
            "float_training": training_figure(records, colors["float"]),
        }


# --- reading the frame ------------------------------------------------------------------

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


def sqnr_fit(records: Records, config: Config) -> dict:
    """Slope of layer 2's SQNR over bits ≥ 4 (where most weights span many bins) beside the uniform-noise
    theory on the same bits: Δ ∝ 1/(2^b − 1), so SQNR = 20·log10(2^b − 1) + c, slope → 6.02 dB/bit."""
    names = ptq_arms_of(config)
    arm = ptq_arm("sym · per-channel" if "sym · per-channel" in names else names[0])
    sqnr = {b: v for b, v in records.by_step(arm, "weight_sqnr_db/layer_02").items() if b >= 4}
    mse, theory = (records.by_step(arm, f"{m}/layer_02").get(8) for m in ("weight_mse", "weight_mse_theory"))
    bits = np.array(list(sqnr), dtype=float)
    fit = len(sqnr) >= 2
    return {"sqnr_arm": arm, "sqnr_db_per_bit": float(np.polyfit(bits, list(sqnr.values()), 1)[0]) if fit else None,
            "sqnr_theory_db_per_bit": float(np.polyfit(bits, 20 * np.log10(2 ** bits - 1), 1)[0]) if fit else None,
            "mse_over_theory_8bit": mse / theory if mse is not None and theory else None}


# --- figures ----------------------------------------------------------------------------

LAYER_TITLES = ["layer 1 (rescaled)", "layer 2", "layer 3 (head)"]
BELOW = dict(orientation="h", yanchor="top", y=-0.25, x=0)  # legends under narrow multi-panel figures


def vs_bits_figure(records: Records, config: Config, colors: dict[str, str], arms: list[str], metric: str) -> go.Figure:
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
    fig.add_hline(y=100 / N_CLASSES if accuracy else float(np.log(N_CLASSES)), line_dash="dash", line_color="gray",
                  annotation_text="chance", annotation_position="top right" if accuracy else "bottom right")
    fig.update_xaxes(dtick=1)
    title = ("Test accuracy" if accuracy else "Test loss") + f" vs weight bits (activations: {config.activation_bits})"
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


def histogram_figure(records: Records, config: Config) -> go.Figure:
    layer, b = config.inspect_layer, config.inspect_bits
    weights = records.values("float", f"weights/layer_{layer:02d}")
    tensor_grid, channel_grid = records.values("float", "grid/per_tensor"), records.values("float", "grid/per_channel_typical")
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=["whole layer", "zoom: a typical channel"])
    zoom = 1.1 * float(np.abs(channel_grid).max()) if len(channel_grid) else 1.0
    grids = ((tensor_grid, "#d62728", 2, f"per-tensor {b}-bit grid"),
             (channel_grid, "#2ca02c", 1, f"per-channel {b}-bit grid (typical channel)"))
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
    fig.update_layout(title=f"Layer {layer} weights and the symmetric {b}-bit grids", bargap=0,
                      margin=dict(l=60, r=20, t=70, b=50), legend=BELOW)
    return fig


def ranges_figure(records: Records, config: Config, color: str) -> go.Figure:
    b = config.inspect_bits
    fig = make_subplots(rows=1, cols=3, subplot_titles=LAYER_TITLES, shared_yaxes=True, horizontal_spacing=0.04)
    for layer in (1, 2, 3):
        absmax = np.sort(records.values("float", f"channel_absmax/layer_{layer:02d}"))[::-1]
        fig.add_scatter(x=np.arange(1, len(absmax) + 1), y=absmax, mode="markers", marker=dict(color=color, size=5),
                        name="max |w| of one output channel", showlegend=layer == 1, row=1, col=layer,
                        hovertemplate=f"layer {layer}<br>channel rank %{{x}}<br>max|w| %{{y:.3g}}<extra></extra>")
        if len(absmax):
            half_step = per_tensor_half_step(absmax, b)
            fig.add_scatter(x=[1, len(absmax)], y=[half_step] * 2, mode="lines", line=dict(color="#d62728", dash="dash"),
                            name=f"per-tensor Δ/2 at {b} bits: channels below round to 0", showlegend=layer == 1,
                            row=1, col=layer, hovertemplate=f"Δ/2 = {half_step:.3g}<extra></extra>")
        fig.update_xaxes(title_text="channel (widest first)", row=1, col=layer)
    fig.update_yaxes(type="log", exponentformat="power", dtick="D2")
    fig.update_yaxes(title_text="max |w| per channel (log)", row=1, col=1)
    fig.update_layout(title="Per-channel weight ranges vs the per-tensor Δ/2",
                      margin=dict(l=60, r=20, t=70, b=50), legend=BELOW)
    return fig


def qat_figure(records: Records, config: Config, colors: dict[str, str]) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=[f"test accuracy ({config.qat_scheme})", "QAT fine-tuning loss"])
    for arm in (ptq_arm(config.qat_scheme), qat_arm(config)):
        values, qat = records.by_step(arm, "test/accuracy"), arm.startswith("QAT")
        fig.add_scatter(x=list(values), y=[100 * v for v in values.values()], name=arm, mode="lines+markers",
                        line=dict(color=colors.get(arm), dash="dash" if qat else "solid"),
                        marker=dict(symbol="diamond" if qat else "circle", size=8), row=1, col=1,
                        hovertemplate=f"{arm}<br>%{{x}} bits<br>%{{y:.1f}}%<extra></extra>")
    float_acc = records.last("float", "test/accuracy")
    if float_acc is not None:
        fig.add_hline(y=100 * float_acc, line_dash="dot", line_color=colors["float"], row=1, col=1,
                      annotation_text="float", annotation_position="bottom right")
    for dash, bits in zip(["solid", "dash", "dot", "dashdot"], QAT_BIT_SETS[config.qat_bits]):
        rows = records.by_step(qat_arm(config), f"qat_loss/bits_{bits:02d}")
        fig.add_scatter(x=list(rows), y=list(rows.values()), name=f"QAT {bits}-bit, training batch", mode="lines",
                        line=dict(color=colors.get(qat_arm(config)), dash=dash), row=1, col=2,
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
