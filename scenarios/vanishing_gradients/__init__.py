"""Vanishing gradients: why do deep sigmoid nets stop learning?

Backpropagation multiplies the gradient by one Jacobian per layer. In the linear regime
each multiplication scales it by about f'(0)·√(n·Var(W)). For sigmoid (f'(0) = 1/4) with
PyTorch's default Linear init (Var(W) = 1/(3n)) that is 0.25·√(1/3) ≈ 0.144, so ten
layers down the first layer receives ~10⁻⁸ of the gradient the last one gets, and the
net sits at chance. tanh with Xavier and ReLU with He init keep the factor near 1;
residual connections add an identity path the gradient flows through untouched.

Look at the heatmap (layer × step, log10 of each layer's weight-gradient norm): a vertical
colour gradient is the vanishing. The per-layer profile at step 0 shows the slope.
"""
import itertools
import math
from typing import Literal

import pandas as pd
from pydantic import Field

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, shown_by, together
from scenarios.cost import logs
from scenarios.explanation import Explanation, join, say, trajectory
from scenarios.gradients import first_over_last, gradient_claims, layer_heatmap_figure, per_layer_factor
from scenarios.plotting import Figures, arm_colors, curves_figure, profile_figure
from scenarios.records import Records

N_FEATURES, N_CLASSES, BATCH = 32, 2, 256
CHANCE = math.log(N_CLASSES)
KINDS = {"weight": "grad_norm", "backprop": "out_grad"}  # summary key -> per-layer metric

Activation = Literal["sigmoid", "tanh", "relu", "gelu"]
Init = Literal["pytorch-default", "xavier", "he", "orthogonal"]
Norm = Literal["none", "layer", "batch"]
Contrast = Literal["relu + he", "tanh + xavier", "residual", "layer norm", "batch norm", "none"]


class Config(ScenarioConfig):
    depth: int = Field(10, ge=2, le=64, description="Hidden layers. The gradient is multiplied once per layer.")
    width: int = Field(64, ge=16, le=256, description="Units per hidden layer.")
    activation: Activation = Field(
        "sigmoid", description="Nonlinearity. Its slope f'(0) sets the per-layer factor: 1/4 for sigmoid, 1 for tanh.")
    init: Init = Field("pytorch-default", description="Weight init. PyTorch's default is U[-1/√n, 1/√n], Var = 1/(3n).")
    residual: bool = Field(False, description="Add each hidden layer's output to its input (h + f(Wh)).")
    norm: Norm = Field("none", description="Normalization before each activation.")
    optimizer: Literal["sgd", "adam"] = Field("sgd", description="SGD shows raw gradient sizes; Adam rescales them per parameter.")
    lr: float = Field(0.1, ge=1e-4, le=1.0, description="Learning rate.", json_schema_extra={"scale": "log"})
    steps: int = Field(300, ge=10, le=3000, description="Training steps (batch of 256 fresh samples each).")
    contrast: Contrast = Field(
        "relu + he", description="The second arm: your config with this change, same seed and data.")


CHANGES = {"relu + he": lambda c: {"activation": "relu", "init": "he"},
           "tanh + xavier": lambda c: {"activation": "tanh", "init": "xavier"},
           "residual": lambda c: {"residual": not c.residual},
           "layer norm": lambda c: {"norm": "none" if c.norm == "layer" else "layer"},
           "batch norm": lambda c: {"norm": "none" if c.norm == "batch" else "batch"}}


def arm_label(activation: str, init: str, residual: bool, norm: str) -> str:
    return " · ".join([activation, init] + (["residual"] if residual else []) + ([f"{norm} norm"] if norm != "none" else []))


def arms_of(config: Config) -> dict[str, Config]:
    """Your config, and (unless `contrast` is none) the same config with one change."""
    label = lambda c: arm_label(c.activation, c.init, c.residual, c.norm)  # noqa: E731
    arms = {label(config): config}
    if config.contrast != "none":
        other = config.model_copy(update=CHANGES[config.contrast](config))
        arms[label(other) if label(other) not in arms else label(other) + " (contrast)"] = other
    return arms


def train_arm(config: Config, log_every: int):
    """One arm: a fresh model and the same seeded data stream as every other arm."""
    from engines.supervised.models import train_deep_mlp
    yield from train_deep_mlp(**config.model_dump(exclude={"contrast"}), n_features=N_FEATURES,
                              n_classes=N_CLASSES, batch=BATCH, log_every=log_every)


class VanishingGradients(Scenario):
    id = "vanishing-gradients"
    title = "Vanishing gradients"
    order = 10
    arms_note = "The arms train as separate models, not one batched model: activations, inits, norms and residuals are code."
    topic = "Core mechanics"
    question = "Why do deep sigmoid networks stop learning, and what fixes it?"
    terms = {
        "Vanishing / exploding gradients": shown_by("backprop_profile", "out_grad/", "grad_norm/",
                                                    how="the back-propagated gradient shrinks layer by layer toward the input"),
        "Backpropagation": shown_by("backprop_profile", "out_grad/", how="‖∂L/∂a‖ at every layer's output, step by step"),
        "Chain rule": shown_by("backprop_profile", "out_grad/", how="one factor f'·√(n·Var W) per layer, multiplied"),
        "Initialization": shown_by("grad_profile", "grad_norm/", how="PyTorch's default against He init, same net"),
        "Residual (skip) connection": shown_by("backprop_profile", "out_grad/", arm="residual", when={"contrast": "residual"},
                                               how="the residual arm's back-propagated gradient reaches layer 1"),
        "Layer normalization": shown_by("loss", "loss", arm="layer norm", when={"contrast": "layer norm"}),
        "Batch normalization": shown_by("loss", "loss", arm="batch norm", when={"contrast": "batch norm"}),
        "Forward pass": shown_by("activation_std", "act_std/", how="the spread of each layer's output"),
        "SGD": shown_by("loss", "loss", "lr", how="plain SGD steps: the raw gradient sizes move the weights"),
    }
    formula = (r"\begin{aligned}\frac{\partial L}{\partial h_{1}} &= \Big(\prod_{l=2}^{L} W_l^{\top}\,"
               r"\mathrm{diag}\,f'(z_l)\Big)\frac{\partial L}{\partial h_{L}}\\"
               r"\text{factor per layer} &\approx f'(0)\sqrt{n\,\mathrm{Var}(W)}"
               r" = \tfrac14\sqrt{\tfrac13}\approx 0.144\quad\text{(sigmoid, PyTorch default init)}\end{aligned}")
    Config = Config
    tiny = {"depth": 4, "width": 16, "steps": 12}
    presets = {
        "the failure": {"activation": "sigmoid", "init": "pytorch-default", "depth": 10, "contrast": "none"},
        "the fix: ReLU + He": {"activation": "sigmoid", "init": "pytorch-default", "contrast": "relu + he"},
        "the fix: residual": {"activation": "sigmoid", "depth": 30, "contrast": "residual"},
        "Glorot & Bengio 2010": {"activation": "tanh", "init": "xavier", "depth": 10, "contrast": "none"},
    }

    def phases(self, config: Config):
        steps, log_every = config.steps, max(1, math.ceil(config.steps / 100))
        return together(*(Arm(name, train_arm(arm, log_every), steps) for name, arm in arms_of(config).items()))

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"layer_logs": 0.000162, "macs": 6.7e-11, "steps": 0.000549}
    rates_reference = 0.1350  # the reference workload's CPU s beside the fit
    timed = ({"depth": 30, "steps": 60}, {"width": 256, "depth": 4, "steps": 100}, {"steps": 400, "contrast": "none"})

    def work(self, config: Config) -> Work:
        arms, depth, width = len(arms_of(config)), config.depth, config.width
        steps = arms * config.steps  # every step: forward, backward, the probes' hooks, one optimizer step
        return Work({"steps": steps, "layer_steps": steps * depth, "macs": steps * BATCH * depth * width ** 2,
                     "layer_logs": arms * logs(config.steps) * depth},
                    floats=arms * depth * (4 * width ** 2 + 3 * BATCH * width))

    def arm_universe(self) -> list[str]:
        default = Config()
        first = list(arms_of(default)) + [next(iter(arms_of(default.model_copy(update=CHANGES[c](default)))))
                                          for c in CHANGES]
        every = [arm_label(*combo) for combo in itertools.product(*(t.__args__ for t in (Activation, Init)),
                                                                   (False, True), Norm.__args__)]
        labels = list(dict.fromkeys(first + every))
        return labels + [label + " (contrast)" for label in labels]

    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records = Records(frame)
        names = list(arms_of(config))
        headline = {f"final loss ({'your arm' if i == 0 else 'contrast'})": records.last(arm, "loss")
                    for i, arm in enumerate(names)}
        profile = records.profile(names[0], "grad_norm")
        headline["layer 1 / last grad (step 0)"] = float(profile[0] / profile[-1]) if len(profile) > 1 and profile[-1] else None
        arms = {arm: {"final_loss": records.last(arm, "loss"), "diverged_at": records.diverged_at(arm),
                      **{f"{kind}_{name}": fn(prefix, arm)(records) for kind, prefix in KINDS.items()
                         for name, fn in (("factor", per_layer_factor), ("first_over_last", first_over_last))}}
                for arm in names}
        return {"headline": headline, "arms": arms}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records = Records(frame)
        names = [arm for arm in arms_of(config) if records.series(arm, "loss").size]
        if not names:
            return Explanation(waiting="Run to see how the gradient changes from layer to layer.")
        fates = {arm: trajectory(records, arm, chance=CHANCE, chance_name="ln 2") for arm in names}
        first, *rest = names
        gradient = gradient_claims(records, first, f"layer {config.depth}")[:1]
        takeaway = join(say("{}: {}, and its loss {}", first, gradient, fates[first]) if gradient else
                        say("{}: its loss {}", first, fates[first]),
                        *(say("{}: its loss {}", arm, fates[arm]) for arm in rest))
        details = [say("{}: " + "; ".join(["{}"] * len(claims)) + ".", arm, *claims) for arm in names
                   if (claims := gradient_claims(records, arm, f"layer {config.depth}"))]
        return Explanation(takeaway, tuple(details))

    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records = Records(frame)
        arms = records.arms() or list(arms_of(config))
        colors = arm_colors(arms, self.arm_universe())
        return Figures({
            "loss": lambda: curves_figure(records, colors, "loss", title="Training loss", y_title="cross-entropy loss (nats)",
                                          chance=CHANCE, chance_label="chance (ln 2)"),
            "grad_heatmap": lambda: layer_heatmap_figure(records, arms),
            "grad_profile": lambda: profile_figure(records, colors, "grad_norm", title="Weight-gradient norm by layer",
                                                   y_title="‖∂L/∂W‖"),
            "backprop_profile": lambda: profile_figure(records, colors, "out_grad", y_title="‖∂L/∂a‖",
                                                       title="Back-propagated gradient by layer (at each layer's output)"),
            "activation_std": lambda: profile_figure(records, colors, "act_std", title="Activation std by layer",
                                                     y_title="std of layer output"),
        })
