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
histogram of the chosen layer moving below zero.
"""
from typing import Literal

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from pydantic import Field

from engines.dead_relu import N_POINTS, RegressionTask, TrainSetup, born_dead_probability, train_arm
from engines.training import log_every_for
from scenarios._dead_relu_figures import (born_curves_figure, born_heatmap_figure, dead_heatmaps_figure,
                                          grad_norm_figure, histograms_figure, loss_figure)
from scenarios.base import Run, Scenario, ScenarioConfig
from scenarios.plotting import arm_colors, layer_table, metric_series

ARMS = {"ReLU": "relu", "LeakyReLU": "leaky_relu", "GELU": "gelu"}
BORN_DEAD = "born dead (ReLU at init)"


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
    hist_layer: int = Field(2, ge=1, le=12, description="Hidden layer whose pre-activations are histogrammed (capped at depth).")
    born_dead_widths: Literal["2,3,4,6,8,12,16", "2,4,8,16,32", "1,2,3,4,5,6"] = Field(
        "2,3,4,6,8,12,16", description="Widths (heatmap columns) of the sampled born-dead networks.")
    born_dead_depth: int = Field(50, ge=5, le=100, description="Deepest born-dead network (heatmap rows 1..this).")
    networks: int = Field(256, ge=32, le=2048, description="Networks sampled at once per width for the born-dead probability.")


def widths_of(config: Config) -> list[int]:
    return [int(w) for w in config.born_dead_widths.split(",")]


def setup_of(config: Config, activation: str) -> TrainSetup:
    return TrainSetup(activation=activation, depth=config.depth, width=config.width, negative_slope=config.negative_slope,
                      init=config.init, bias_init=config.bias_init, optimizer=config.optimizer, lr=config.lr,
                      steps=config.steps, seed=config.seed)


class DeadReLU(Scenario):
    id = "dead-relu"
    title = "Dead ReLU"
    order = 20
    question = "When does a ReLU unit stop learning for good, at birth or in training?"
    terms = ("Dead ReLU", "Learning rate", "Adam", "SGD", "Initialization", "Backpropagation")
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

    def execute(self, config: Config, run: Run) -> None:
        for width in widths_of(config):  # view 1: one heatmap column per width, all networks at once
            if run.should_stop():
                return
            probability = born_dead_probability(width, config.born_dead_depth, config.networks, init=config.init,
                                                bias=config.bias_init, seed=config.seed)
            for depth, p in enumerate(probability.tolist(), start=1):
                run.add(BORN_DEAD, depth, {f"born_dead/width_{width:02d}": p})
        log_every = log_every_for(config.steps)  # view 2: the three arms side by side, same seed and data
        layer = min(config.hist_layer, config.depth)
        run.interleave({name: train_arm(setup_of(config, act), log_every, layer) for name, act in ARMS.items()},
                       config.steps)

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        tables = {prefix: layer_table(frame, prefix) for prefix in ("frac_dead", "frac_never_positive", "grad_norm")}
        arms = {}
        for arm in [a for a in ARMS if a in set(frame["arm"])]:
            losses = metric_series(frame[frame["arm"] == arm], "loss")
            if losses.empty:
                continue
            dead, never, grads = (t[t["arm"] == arm].pivot_table(index="step", columns="layer", values="value").dropna()
                                  for t in tables.values())  # (step, layer) each, complete steps only
            if dead.empty or never.empty or grads.empty:
                continue
            total_grad = np.sqrt((grads**2).sum(axis=1))
            worst = int(dead.iloc[-1].idxmax())
            arms[arm] = {
                "final_loss": float(losses["value"].iloc[-1]), "last_step": int(losses["step"].iloc[-1]),
                "diverged_at": _first_step(frame, arm, "diverged"),
                "dead_by_layer": [float(v) for v in dead.iloc[-1]], "worst_layer": worst,
                "worst_dead": float(dead.iloc[-1].max()), "last_layer_dead": float(dead.iloc[-1].iloc[-1]),
                "half_dead_by": _first_index(dead[worst] > 0.5),
                "start_dead": float(dead.iloc[0].max()),  # dead on the inputs already at init
                "newly_dead": float((dead.iloc[-1] - dead.iloc[0]).max()),  # died in training, most in one layer
                "never_positive": float(never.iloc[-1].max()), "never_positive_layer": int(never.iloc[-1].idxmax()),
                "grad_norm": float(total_grad.iloc[-1]), "grad_zero_from": _first_index(total_grad == 0)}
        born = {}
        for width, rows in layer_table_born(frame).groupby("width"):
            rows = rows.set_index("step")["value"].sort_index()
            born[int(width)] = {"half_dead_depth": _first_index(rows >= 0.5), "deepest": int(rows.index[-1]),
                                "p_deepest": float(rows.iloc[-1])}
        return {"arms": arms, "born_dead": born, "constant_loss": RegressionTask(config.seed + 1).constant_loss,
                "probes": N_POINTS, "networks": config.networks}

    def explain(self, summary: dict, config: Config) -> str:
        lines, var = [], summary["constant_loss"]
        for arm, info in summary["arms"].items():
            if info["diverged_at"] is not None:
                lines.append(f"- **{arm}**: diverged at step {info['diverged_at']}.")
                continue
            line = f"**{arm}**: "
            if info["worst_dead"] > 0:
                line += f"dead at step {info['last_step']}: " + ", ".join(
                    f"{v:.0%} of layer {i}" for i, v in enumerate(info["dead_by_layer"], start=1) if v > 0)
                if info["half_dead_by"]:  # None: never past half; 0: past half at init
                    line += f" (more than half of layer {info['worst_layer']} by step {info['half_dead_by']})"
                if info["start_dead"] > 0:
                    line += f"; at init, before any step, up to {info['start_dead']:.0%} of a layer was dead"
                line += f". A dead unit is ≤ 0 on all {summary['probes']} inputs, so its gradient is exactly zero"
            else:
                line += "no dead unit"
                if info["never_positive"] > 0:
                    line += (f"; {info['never_positive']:.0%} of layer {info['never_positive_layer']} is below zero on"
                             " every input, but still gets gradient")
            if info["last_layer_dead"] == 1.0:
                line += (". The last hidden layer is all dead, so the net outputs a constant:"
                         f" loss {info['final_loss']:.3f} ≥ Var(y) = {var:.3f}")
                if info["grad_zero_from"] is not None:
                    line += f", and every hidden weight's gradient is exactly 0 from step {info['grad_zero_from']}"
            else:
                line += f". Loss {info['final_loss']:.3g} (a constant output scores Var(y) = {var:.3f})"
            lines.append("- " + line + ".")
        born = summary["born_dead"]
        if born:
            by_depth: dict[int, list[str]] = {}  # widths that reach P >= 1/2 at the same depth
            for width, b in born.items():
                if b["half_dead_depth"]:
                    by_depth.setdefault(b["half_dead_depth"], []).append(str(width))
            half = [f"{depth} at width{'s' if len(ws) > 1 else ''} {', '.join(ws)}" for depth, ws in by_depth.items()]
            rest = [f"{percent(b['p_deepest'])} at width {w}" for w, b in born.items() if not b["half_dead_depth"]]
            deepest = max(b["deepest"] for b in born.values())
            parts = ([f"half of the nets are dead from depth {'; '.join(half)}"] if half else []) + \
                    ([f"at depth {deepest} only {', '.join(rest)}"] if rest else [])
            lines.append(f"- **Born dead** ({summary['networks']} nets per width, {config.init} init,"
                         f" bias {config.bias_init:g}): " + "; ".join(parts) + ".")
        return "\n".join(lines) or "Run to sample born-dead networks and train the three arms."

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> dict[str, go.Figure]:
        arms, born = list(ARMS), layer_table_born(frame)
        colors = arm_colors(arms)
        constant_loss = RegressionTask(config.seed + 1).constant_loss
        return {"dead_units": dead_heatmaps_figure(frame, arms), "loss": loss_figure(frame, arms, colors, constant_loss),
                "grad_norm": grad_norm_figure(frame, arms, colors),
                "preact_hist": histograms_figure(frame, arms, colors, min(config.hist_layer, config.depth)),
                "born_dead": born_heatmap_figure(born), "born_dead_curves": born_curves_figure(born)}


def layer_table_born(frame: pd.DataFrame) -> pd.DataFrame:
    """Born-dead rows with an integer `width` column; `step` is the depth."""
    rows = frame[frame["metric"].str.startswith("born_dead/width_")]
    return rows.assign(width=rows["metric"].str.slice(len("born_dead/width_")).astype(int))


def percent(p: float) -> str:
    return "<1%" if 0 < p < 0.01 else f"{p:.0%}"


def _first_index(mask: pd.Series) -> int | None:
    """The first index (step or depth) where `mask` holds."""
    hits = mask[mask]
    return int(hits.index[0]) if len(hits) else None


def _first_step(frame: pd.DataFrame, arm: str, metric: str) -> int | None:
    rows = frame[(frame["arm"] == arm) & (frame["metric"] == metric)]
    return int(rows["step"].min()) if len(rows) else None
