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
from engines.quantization import (MixtureTask, Scheme, inspect_weights, ptq_metrics, quantization_aware_training,
                                  rescale_channels, test_metrics)
from engines.training import Diverged, StepRecord, log_every_for, train
from scenarios._quantization_figures import (Records, histogram_figure, per_layer_figure, per_tensor_half_step,
                                             qat_figure, ranges_figure, training_figure, vs_bits_figure)
from scenarios.base import Event, Run, Scenario, ScenarioConfig
from scenarios.plotting import arm_colors

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
            "accuracy_vs_bits": vs_bits_figure(records, colors, ptq + qat, "test/accuracy", config.activation_bits,
                                               N_CLASSES),
            "channel_ranges": ranges_figure(records, config.inspect_bits, colors["float"]),
            "weight_histogram": histogram_figure(records, config.inspect_layer, config.inspect_bits),
            "qat_vs_ptq": qat_figure(records, colors, config.qat_scheme, ptq_arm(config.qat_scheme), qat_arm(config),
                                     QAT_BIT_SETS[config.qat_bits]),
            "weight_mse": per_layer_figure(records, colors, ptq, "weight_mse", "weight_mse_theory",
                                           "Weight MSE per layer vs bits (dashed: Δ²/12)", "MSE (log scale)"),
            "weight_sqnr": per_layer_figure(records, colors, ptq, "weight_sqnr_db", "weight_sqnr_theory_db",
                                            "Weight SQNR per layer vs bits (dashed: 10·log10(P/(Δ²/12)))", "SQNR (dB)"),
            "loss_vs_bits": vs_bits_figure(records, colors, ptq + qat, "test/loss", config.activation_bits, N_CLASSES),
            "float_training": training_figure(records, colors["float"]),
        }


# --- reading the frame ------------------------------------------------------------------

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
