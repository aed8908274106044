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
against the per-tensor Δ/2 line, the histogram with both grids, the observers' scale and
zero-point, MSE/SQNR vs Δ²/12, and the share of weights the STE's gradient reaches in QAT.
"""
from typing import Literal

import pandas as pd
from pydantic import Field

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, in_turn, shown_by, view_field
from scenarios.cost import logs
from scenarios.explanation import Explanation
from scenarios.plotting import Figures, arm_colors
from scenarios.quantization.claims import ACC, FLOAT_ACTIVATIONS, explanation, summary
from scenarios.quantization.figures import (CHANNEL, TENSOR, histogram_figure, per_layer_figure, qat_figure,
                                             ranges_figure, scale_figure, ste_figure, training_figure, vs_bits_figure)
from scenarios.records import Records

N_FEATURES, N_CLASSES, CLUSTERS_PER_CLASS, CLUSTER_STD, BATCH = 4, 10, 3, 0.25, 256

SCHEMES = {"sym · per-tensor": (True, False), "sym · per-channel": (True, True),  # (symmetric, per_channel)
           "asym · per-tensor": (False, False), "asym · per-channel": (False, True)}
SCHEME_SETS = {"all four": list(SCHEMES), "symmetric: per-tensor vs per-channel": list(SCHEMES)[:2],
               "per-tensor: symmetric vs asymmetric": ["sym · per-tensor", "asym · per-tensor"]}
BIT_SETS = {"2-8": [2, 3, 4, 5, 6, 7, 8], "2,3,4,8": [2, 3, 4, 8], "4-8": [4, 5, 6, 7, 8], "8": [8]}
QAT_BIT_SETS = {"2,3": [2, 3], "2,3,4": [2, 3, 4], "2": [2], "none": []}
SchemeName = Literal["sym · per-channel", "sym · per-tensor", "asym · per-channel", "asym · per-tensor"]


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
    qat_scheme: SchemeName = Field("sym · per-channel", description="The QAT arm's weight scheme (its PTQ arm runs too).")
    qat_steps: int = Field(100, ge=10, le=2000, description="QAT fine-tuning steps, starting from the float model.")
    qat_lr: float = Field(1e-3, ge=1e-5, le=1e-2, description="QAT learning rate (Adam).",
                          json_schema_extra={"scale": "log"})
    inspect_layer: int = view_field(1, ge=1, le=3, description="Layer whose weight histogram and scale/zero-point are "
                                    "drawn (1 is the rescaled one; 3 is the head).")
    inspect_bits: int = view_field(4, ge=2, le=8, description="Bit width of the grids on the histogram and range plots.")


def ptq_arm(scheme_name: str) -> str:
    return f"PTQ {scheme_name}"


def qat_arm(config: Config) -> str:
    return f"QAT {config.qat_scheme}"


def ptq_arms_of(config: Config) -> list[str]:
    names = SCHEME_SETS[config.schemes]
    if QAT_BIT_SETS[config.qat_bits] and config.qat_scheme not in names:
        names = names + [config.qat_scheme]  # QAT is always compared with PTQ of its own scheme
    return names


def weights_only_scheme(config: Config) -> str | None:
    """With quantized activations, one PTQ scheme (the first per-channel one, else the first) runs once
    more at the widest bits with float activations: what the weights alone cost, and the activations."""
    if config.activation_bits == "float":
        return None
    names = ptq_arms_of(config)
    return next((name for name in names if SCHEMES[name][1]), names[0])


def arms_of(config: Config) -> list[str]:
    qat = [qat_arm(config)] if QAT_BIT_SETS[config.qat_bits] else []
    alone = [ptq_arm(name) + FLOAT_ACTIVATIONS] if (name := weights_only_scheme(config)) else []
    return ["float"] + [ptq_arm(name) for name in ptq_arms_of(config)] + alone + qat


def activation_bits_for(config: Config, weight_bits: int) -> int | None:
    return {"8": 8, "same as weights": weight_bits, "float": None}[config.activation_bits]


class Quantization(Scenario):
    id = "quantization"
    title = "Quantization error"
    order = 50
    topic = "Fine-tuning & compression"
    question = "How few bits can a trained network keep, and why does per-tensor quantization collapse first?"
    terms = {
        "Quantization": shown_by("accuracy_vs_bits", ACC, arm="PTQ", how="test accuracy of the rounded model per width"),
        "Scale / zero-point": shown_by("scale_zero_point", "scale/", "zero_point/", arm="PTQ",
                                       how="the observer's Δ halves with each bit; z is the code that stands for 0.0"),
        "Symmetric / asymmetric quantization": shown_by("scale_zero_point", "zero_point/", arm="asym",
                                                        when={"schemes": "all four"},
                                                        how="z = 0 for symmetric; affine moves z to cover [min, max]"),
        "Per-channel quantization": shown_by("accuracy_vs_bits", ACC, arm="per-channel",
                                             how="one Δ per output row holds at 4 bits where per-tensor collapses"),
        "QAT (Quantization-Aware Training)": shown_by("qat_vs_ptq", "qat_loss/", ACC, arm="QAT",
                                                      how="fine-tuning through the rounding against PTQ"),
        "Straight-through estimator": shown_by("straight_through", "ste_pass/", "ste_gap/", arm="QAT",
                                               how="the share of weights whose gradient passes the clamp mask"),
        "Cross-entropy": shown_by("loss_vs_bits", "test/loss", arm="PTQ", how="test cross-entropy against chance ln 10"),
    }
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

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"float_macs": 1.32e-10, "float_steps": 0.000553, "logs": 0.000876, "ptq_macs": 2.63e-07, "ptq_points":
             0.00416, "qat_macs": 1.73e-10, "qat_steps": 0.00151}
    rates_reference = 0.1419  # the reference workload's CPU s beside the fit
    timed = ({"width": 256, "train_steps": 100, "qat_bits": "2"}, {"qat_steps": 100, "qat_bits": "2,3,4"},
             {"train_steps": 1000, "qat_bits": "none", "bits": "8"})

    def work(self, config: Config) -> Work:
        """The float MLP (two hidden layers of `width`, batches of 256), each scheme's PTQ sweep over the bit
        widths, then each QAT fine-tune through fake-quant."""
        example_macs = config.width ** 2 + 14 * config.width
        points = len(ptq_arms_of(config)) * len(BIT_SETS[config.bits])
        qat_steps = len(QAT_BIT_SETS[config.qat_bits]) * config.qat_steps
        return Work({"float_steps": config.train_steps, "float_macs": config.train_steps * BATCH * example_macs,
                     "logs": logs(config.train_steps), "ptq_points": points, "ptq_macs": points * example_macs,
                     "qat_steps": qat_steps, "qat_macs": qat_steps * BATCH * example_macs},
                    floats=6 * example_macs + BATCH * config.width * 8 + 4096 * config.width * 2)

    def phases(self, config: Config):
        from engines.loop.training import log_every_for
        from engines.numerics.quantization import Scheme
        from engines.numerics.quantized_mlp import FloatModel, MixtureTask
        shared = FloatModel(lambda: MixtureTask(N_FEATURES, N_CLASSES, CLUSTERS_PER_CLASS, CLUSTER_STD, config.seed),
                            config.width, config.seed)  # trained by the float arm, quantized by the others
        bits, act = BIT_SETS[config.bits], lambda b: activation_bits_for(config, b)  # noqa: E731
        float_arm = shared.float_arm(config.train_steps, config.lr, BATCH, log_every_for(config.train_steps),
                                     config.channel_spread, max(1, config.width // 16))
        qat_log_every = log_every_for(config.qat_steps, max_points=50)
        alone = weights_only_scheme(config)
        # Cost in units of one float step: a PTQ point takes about 10, a QAT step about 3.
        return in_turn(Arm("float", float_arm, config.train_steps + 1, needed=True),
                       *(Arm(ptq_arm(name), shared.ptq_arm(*SCHEMES[name], bits, act), len(bits), cost=10)
                         for name in ptq_arms_of(config)),
                       *(Arm(ptq_arm(alone) + FLOAT_ACTIVATIONS, shared.ptq_arm(*SCHEMES[alone], bits[-1:], lambda b: None),
                             1, cost=10) for _ in [alone] if alone),
                       *(Arm(qat_arm(config), shared.qat_arm(Scheme(b, *SCHEMES[config.qat_scheme]), act(b),
                                                             config.qat_steps, config.qat_lr, BATCH, qat_log_every),
                             config.qat_steps + 1, cost=3) for b in QAT_BIT_SETS[config.qat_bits]))

    def arm_universe(self) -> list[str]:
        return (["float"] + [ptq_arm(name) for name in SCHEMES] + [f"QAT {name}" for name in SchemeName.__args__]
                + [ptq_arm(name) + FLOAT_ACTIVATIONS for name in SCHEMES])

    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        return summary(Records(frame), arms_of(config)[1:], [ptq_arm(n) for n in ptq_arms_of(config)],
                       qat_arm(config), ptq_arm(config.qat_scheme), N_CLASSES)

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        qat = qat_arm(config) if QAT_BIT_SETS[config.qat_bits] else None
        alone = weights_only_scheme(config)
        return explanation(Records(frame), [ptq_arm(n) for n in ptq_arms_of(config)], qat, ptq_arm(config.qat_scheme),
                           QAT_BIT_SETS[config.qat_bits], config.inspect_bits, N_CLASSES,
                           ptq_arm(alone) if alone else None, config.activation_bits)

    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records, colors = Records(frame), arm_colors(arms_of(config) + [TENSOR, CHANNEL], self.arm_universe())
        ptq = [ptq_arm(name) for name in ptq_arms_of(config)]
        qat = [qat_arm(config)] if QAT_BIT_SETS[config.qat_bits] else []
        alone = [ptq_arm(name) + FLOAT_ACTIVATIONS] if (name := weights_only_scheme(config)) else []
        return Figures({  # the float model trains first, most of a run: its curve leads, so the page is live at once
            "float_training": lambda: training_figure(records, colors),
            "accuracy_vs_bits": lambda: vs_bits_figure(records, colors, ptq + alone + qat, ACC, config.activation_bits,
                                                       N_CLASSES),
            "channel_ranges": lambda: ranges_figure(records, colors, config.inspect_bits),
            "weight_histogram": lambda: histogram_figure(records, colors, config.inspect_layer, config.inspect_bits),
            "scale_zero_point": lambda: scale_figure(records, colors, ptq, config.inspect_layer),
            "qat_vs_ptq": lambda: qat_figure(records, colors, config.qat_scheme, ptq_arm(config.qat_scheme), qat_arm(config),
                                             QAT_BIT_SETS[config.qat_bits]),
            "straight_through": lambda: ste_figure(records, colors, qat_arm(config), QAT_BIT_SETS[config.qat_bits]),
            "weight_mse": lambda: per_layer_figure(records, colors, ptq, "weight_mse", "weight_mse_theory",
                                                   "Weight MSE per layer vs bits (dashed: Δ²/12)", "MSE (log scale)"),
            "weight_sqnr": lambda: per_layer_figure(records, colors, ptq, "weight_sqnr_db", "weight_sqnr_theory_db",
                                                    "Weight SQNR per layer vs bits (dashed: 10·log10(P/(Δ²/12)))", "SQNR (dB)"),
            "loss_vs_bits": lambda: vs_bits_figure(records, colors, ptq + qat, "test/loss", config.activation_bits, N_CLASSES),
        })
