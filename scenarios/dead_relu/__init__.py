"""Dead ReLU: when does a ReLU unit stop learning for good?

A ReLU unit passes gradient only where its pre-activation z = w·h + b is > 0. If z ≤ 0 on
every input, its derivative is 0 on every input: no example ever sends it a gradient, and
it stays dead. This page shows the two ways that happens.

**Killed in training.** Adam's first steps move every weight by about lr·sign(g),
whatever the gradient's size. At lr 0.1 (the default) a few such steps push most units of
layers 2-4 below zero on all 256 training inputs. Layers after the first see only
non-negative inputs (they come out of a ReLU), so a unit whose weights and bias all turned
negative can never fire again. When the last hidden layer is all dead, the net outputs a
constant and its loss sits at Var(y). LeakyReLU units get pushed below zero just the same,
but they keep a gradient of (negative slope)·g, so none is dead. GELU's derivative is not
zero below 0 either (in float32 it only underflows far below zero). At lr 1e-3 (preset "a
safe learning rate") essentially no unit dies. A negative bias init kills units before
training starts (preset "negative bias").

**Born dead** (Lu et al. 2019). With no training at all, a deep narrow ReLU net can output
a constant over its whole input domain: a single layer that is all ≤ 0 on every input
makes everything after it constant. The heatmap samples many networks per width (weights
from the chosen init, every bias = the chosen bias) on a grid of 64 probes in [-1, 1]². The
probability of being born dead rises with depth and falls with width: width 2 is almost
surely dead by depth 20, while width 8 mostly survives to depth 40.

Look at the dead-unit heatmaps (top row: zero gradient on every input; bottom row: output
never above 0), the loss against the constant-output line Var(y), and the pre-activation
histogram of the chosen layer moving below zero (every layer's is recorded: choosing
another redraws, it does not retrain).
"""
import functools
from typing import Literal

import pandas as pd
from pydantic import Field

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, in_turn, shown_by, together, view_field
from scenarios.claims import AtChance, Computed, StayedNear
from scenarios.cost import logs
from scenarios.dead_relu.claims import arm_details, arm_summary, born_sentence, dead_claim
from scenarios.dead_relu.figures import (born_curves_figure, born_dead, born_heatmap_figure, dead_heatmaps_figure,
                                          grad_norm_figure, histograms_figure)
from scenarios.explanation import Explanation, join, say, trajectory
from scenarios.plotting import Figures, arm_colors, curves_figure
from scenarios.records import Records

ARMS = {"ReLU": "relu", "LeakyReLU": "leaky_relu", "GELU": "gelu"}
BORN_DEAD = "born dead (ReLU at init)"
TRAINED = ("depth", "width", "negative_slope", "init", "bias_init", "optimizer", "lr", "steps", "seed")


class Config(ScenarioConfig):
    optimizer: Literal["adam", "sgd"] = Field(
        "adam", description="Adam's first steps are ≈ lr·sign(g) per weight, whatever the gradient's size; SGD's scale with it.")
    lr: float = Field(0.1, ge=1e-4, le=1.0, json_schema_extra={"scale": "log"},
                      description="Learning rate. Adam at 0.1 kills most ReLU units; at 1e-3 essentially none die.")
    bias_init: float = Field(0.0, ge=-3.0, le=1.0,
                             description="Every hidden bias starts here (trained and born-dead nets). Negative switches units off.")
    init: Literal["he", "xavier", "pytorch-default"] = Field(
        "he", description="Weights: He N(0, 2/n), Xavier U with Var 2/(n_in+n_out), or PyTorch's U[-1/√n, 1/√n].")
    depth: int = Field(4, ge=2, le=12, description="Hidden layers of the trained MLP.")
    width: int = Field(64, ge=8, le=256, description="Units per hidden layer of the trained MLP.")
    negative_slope: float = Field(0.01, ge=1e-3, le=0.5, json_schema_extra={"scale": "log"},
                                  description="LeakyReLU's slope below zero: the gradient a 'switched off' unit still gets.")
    steps: int = Field(200, ge=10, le=2000, description="Full-batch training steps on the 256 fixed inputs.")
    hist_layer: int = view_field(2, title="histogram of layer", ge=1, le=12,
                                 description="Hidden layer whose pre-activations are histogrammed (capped at depth).")
    born_dead_widths: Literal["2,3,4,6,8,12,16", "2,4,8,16,32", "1,2,3,4,5,6"] = Field(
        "2,3,4,6,8,12,16", description="Widths (heatmap columns) of the sampled born-dead networks.")
    born_dead_depth: int = Field(50, ge=5, le=100, description="Deepest born-dead network (heatmap rows 1..this).")
    networks: int = Field(256, ge=32, le=2048, description="Networks sampled at once per width for the born-dead probability.")


def widths_of(config: Config) -> list[int]:
    return [int(w) for w in config.born_dead_widths.split(",")]


class DeadReLU(Scenario):
    id = "dead-relu"
    title = "Dead ReLU"
    order = 20
    arms_note = ("The arms train side by side as separate models, not as one batched model: their activations differ, "
                 "which is code, not numbers.")
    topic = "Optimization"
    question = "When does a ReLU unit stop learning for good, at birth or in training?"
    terms = {
        "Dead ReLU": shown_by("dead_units", "frac_dead/", arm="ReLU",
                              how="units whose slope is 0 on every input: they never get a gradient again"),
        "ReLU": shown_by("preact_hist", "preact_end/", arm="ReLU",
                         how="max(0, z): the mass left of 0 in the histogram passes no gradient"),
        "Activation function": shown_by("dead_units", "frac_dead/", "frac_never_positive/",
                                        how="ReLU, LeakyReLU and GELU on the same net, seed and data"),
        "Learning rate": shown_by("dead_units", "frac_dead/", "lr", how="Adam at lr 0.1 kills most ReLU units; at 1e-3 almost none"),
        "Adam": shown_by("dead_units", "frac_dead/", when={"optimizer": "adam"},
                         how="Adam's first steps move every weight by ≈ lr, however small its gradient"),
        "SGD": shown_by("dead_units", "frac_dead/", when={"optimizer": "sgd"},
                        how="SGD's steps scale with the gradient: the same lr kills fewer units"),
        "Initialization": shown_by("born_dead", "born_dead/", arm="born dead",
                                   how="the init and the bias decide how deep a narrow net is born dead"),
        "Backpropagation": shown_by("grad_norm", "grad_norm/",
                                    how="a dead unit passes back exactly 0; with its last layer dead, no hidden weight gets any"),
    }
    formula = (r"\begin{aligned}\frac{\partial L}{\partial w_j} &= \sum_x \frac{\partial L}{\partial a_j(x)}\,"
               r"\mathbf{1}[z_j(x) > 0]\,h(x) = 0 \quad\text{if } z_j(x)\le 0\ \forall x\\"
               r"\text{Adam, step 1: } \Delta w &= -\,\mathrm{lr}\cdot\frac{g}{|g|+\epsilon}"
               r"\approx -\,\mathrm{lr}\cdot\mathrm{sign}(g)\end{aligned}")
    Config = Config
    tiny = {"steps": 12, "width": 16, "depth": 3, "born_dead_depth": 8, "networks": 32, "born_dead_widths": "1,2,3,4,5,6"}
    presets = {
        "the failure: Adam at lr 0.1": {"optimizer": "adam", "lr": 0.1, "bias_init": 0.0},
        "a safe learning rate (1e-3)": {"optimizer": "adam", "lr": 1e-3, "bias_init": 0.0},
        "negative bias": {"optimizer": "adam", "lr": 1e-3, "bias_init": -2.0},
        "Lu et al. 2019: born dead": {"init": "he", "bias_init": 0.0, "born_dead_widths": "2,3,4,6,8,12,16",
                                      "born_dead_depth": 50, "networks": 1024},
    }

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"born_layers": 5.08e-05, "born_macs": 1.14e-10, "layer_logs": 0.000318, "macs": 3.85e-11, "run": 0.00435,
             "steps": 0.000531}
    rates_reference = 0.1378  # the reference workload's CPU s beside the fit
    timed = ({"networks": 2048, "born_dead_depth": 30, "steps": 50}, {"width": 256, "depth": 3, "steps": 50, "networks": 64},
             {"steps": 400, "depth": 2, "networks": 64, "born_dead_depth": 10})

    def work(self, config: Config) -> Work:
        """Three arms full-batch on 256 points (every log: a census and histograms per layer), then every
        born-dead width's `networks` nets, layer by layer, on 64 probes."""
        arm_steps, width, depth, widths = 3 * config.steps, config.width, config.depth, widths_of(config)
        born_macs = config.networks * config.born_dead_depth * 64 * sum(w * w + 2 * w for w in widths)
        return Work({"steps": arm_steps, "layer_steps": arm_steps * depth,
                     "macs": arm_steps * 256 * 3 * (9 * width + (depth - 1) * width ** 2),
                     "layer_logs": 3 * logs(config.steps) * depth,
                     "born_layers": len(widths) * config.born_dead_depth, "born_macs": born_macs},
                    floats=3 * depth * (4 * width ** 2 + 4 * 256 * width) + 3 * config.networks * max(widths) * 64)

    def phases(self, config: Config):
        from engines.loop.training import log_every_for
        from engines.supervised.dead_relu import born_dead_records, train_arm
        widths = widths_of(config)  # view 1: one heatmap column per width, all networks at once
        born = Arm(BORN_DEAD, born_dead_records(widths, config.born_dead_depth, config.networks, init=config.init,
                                                bias=config.bias_init, seed=config.seed),
                   len(widths) * config.born_dead_depth, cost=0.1)
        setup = config.model_dump(include=set(TRAINED))  # view 2: the three arms side by side, same seed and data
        trained = [Arm(name, train_arm(activation, log_every=log_every_for(config.steps), **setup), config.steps)
                   for name, activation in ARMS.items()]
        return together(*trained) + in_turn(born)  # the charts at the top (training) fill in first

    def arm_universe(self) -> list[str]:
        return [*ARMS, BORN_DEAD]

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records = Records(frame)
        arms = {arm: info for arm in ARMS if (info := arm_summary(records, arm, config.depth)) is not None}
        born = {width: {"p_deepest": float(p.iloc[-1]), "deepest": int(p.index[-1])}
                for width, p in born_dead(records, BORN_DEAD).items() if len(p)}
        constant = next((records.first(arm, "constant_loss") for arm in ARMS if records.has("constant_loss", arm)), None)
        headline = {"final loss (ReLU)": records.last("ReLU", "loss"),
                    "final loss (LeakyReLU)": records.last("LeakyReLU", "loss"),
                    "dead units, worst ReLU layer": arms.get("ReLU", {}).get("worst_dead"),
                    "Var(y): a constant output's loss": constant}
        return {"headline": headline, "arms": arms, "born_dead": born, "constant_loss": constant, "networks": config.networks}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records = Records(frame)
        trained = [arm for arm in ARMS if records.series(arm, "loss").size]
        born = born_sentence(records, BORN_DEAD, f"Born dead at init ({config.networks} nets per width, "
                                                 f"{config.init} init, bias {config.bias_init:g}): ")
        if not trained:
            return Explanation(born) if born else Explanation(waiting="Run to sample born-dead networks and train the three arms.")
        with_var = next((arm for arm in trained if records.has("constant_loss", arm)), None)
        var = records.first(with_var, "constant_loss") if with_var is not None else None
        parts, constant = [], []
        for arm in trained:  # an arm at Var(y) learned nothing, however few of its units died: said so
            fate = trajectory(records, arm, chance=var, chance_name="Var(y)", level="the constant-output loss")
            if fate and isinstance(fate[-1], (AtChance, StayedNear)):
                constant.append(arm)
            dead = dead_claim(records, arm)
            parts.append(say("{}: {}, its loss {}", arm, dead, fate) if dead else say("{}: its loss {}", arm, fate))
        if var is not None:
            scores = Computed("Var(y) = {}", var, lambda r: r.first(with_var, "constant_loss"))
            if len(constant) == len(trained):  # then the dead shares below contrast nets that all failed
                parts.insert(0, say("No arm learned: each ended where a constant output does, {}", scores))
            else:
                parts.append(say("the best constant output scores {}", scores))
        details = [sentence for sentence in [*(arm_details(records, arm) for arm in trained), born] if sentence]
        return Explanation(join(*parts), tuple(details))

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records, arms = Records(frame), list(ARMS)
        colors = arm_colors(arms, self.arm_universe())
        constant = next((records.first(arm, "constant_loss") for arm in arms if records.has("constant_loss", arm)), None)
        born = functools.cache(lambda: born_dead(records, BORN_DEAD))  # two figures read it
        return Figures({
            "dead_units": lambda: dead_heatmaps_figure(records, arms),
            "loss": lambda: curves_figure(records, colors, "loss", arms=arms, title="Training loss",
                                          y_title="mean squared error", chance=constant, log_y=True,
                                          chance_label=f"constant output: Var(y) = {constant:.3f}" if constant else "",
                                          chance_in_legend=True),  # on the line, LeakyReLU's curve ran through its label
            "grad_norm": lambda: grad_norm_figure(records, arms, colors),
            "preact_hist": lambda: histograms_figure(records, arms, colors, min(config.hist_layer, config.depth)),
            "born_dead": lambda: born_heatmap_figure(born()), "born_dead_curves": lambda: born_curves_figure(born())})
