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
from typing import Literal

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from pydantic import Field

from engines.data import TeacherTask
from engines.models import DeepMLP
from engines.probes import LayerProbe
from engines.training import log_every_for, train
from scenarios.base import Run, Scenario, ScenarioConfig
from scenarios.plotting import arm_colors, arms_in_order, layer_table, layout, metric_series

N_FEATURES, N_CLASSES, BATCH = 32, 2, 256

Contrast = Literal["relu + he", "tanh + xavier", "residual", "layer norm", "batch norm", "none"]


class Config(ScenarioConfig):
    depth: int = Field(10, ge=2, le=64, description="Hidden layers. The gradient is multiplied once per layer.")
    width: int = Field(64, ge=16, le=256, description="Units per hidden layer.")
    activation: Literal["sigmoid", "tanh", "relu", "gelu"] = Field(
        "sigmoid", description="Nonlinearity. Its slope f'(0) sets the per-layer factor: 1/4 for sigmoid, 1 for tanh.")
    init: Literal["pytorch-default", "xavier", "he", "orthogonal"] = Field(
        "pytorch-default", description="Weight init. PyTorch's default is U[-1/√n, 1/√n], Var = 1/(3n).")
    residual: bool = Field(False, description="Add each hidden layer's output to its input (h + f(Wh)).")
    norm: Literal["none", "layer", "batch"] = Field("none", description="Normalization before each activation.")
    optimizer: Literal["sgd", "adam"] = Field("sgd", description="SGD shows raw gradient sizes; Adam rescales them per parameter.")
    lr: float = Field(0.1, ge=1e-4, le=1.0, description="Learning rate.", json_schema_extra={"scale": "log"})
    steps: int = Field(300, ge=10, le=3000, description="Training steps (batch of 256 fresh samples each).")
    contrast: Contrast = Field(
        "relu + he", description="The second arm: your config with this change, same seed and data.")


def contrast_of(config: Config) -> Config | None:
    change = {
        "relu + he": {"activation": "relu", "init": "he"},
        "tanh + xavier": {"activation": "tanh", "init": "xavier"},
        "residual": {"residual": not config.residual},
        "layer norm": {"norm": "none" if config.norm == "layer" else "layer"},
        "batch norm": {"norm": "none" if config.norm == "batch" else "batch"},
        "none": None,
    }[config.contrast]
    return None if change is None else config.model_copy(update=change)


def arm_label(config: Config) -> str:
    parts = [config.activation, config.init]
    if config.residual:
        parts.append("residual")
    if config.norm != "none":
        parts.append(f"{config.norm} norm")
    return " · ".join(parts)


def arms_of(config: Config) -> dict[str, Config]:
    arms = {arm_label(config): config}
    other = contrast_of(config)
    if other is not None:
        label = arm_label(other)
        arms[label if label not in arms else label + " (contrast)"] = other
    return arms


def train_arm(config: Config, log_every: int):
    """One arm: a fresh model and the same seeded data stream as every other arm."""
    torch.manual_seed(config.seed)  # nothing should draw from it; pinned in case a module does
    model = DeepMLP(N_FEATURES, config.width, config.depth, N_CLASSES, activation=config.activation,
                    init=config.init, residual=config.residual, norm=config.norm, seed=config.seed)
    task = TeacherTask(N_FEATURES, N_CLASSES, seed=config.seed + 1)
    opt_class = torch.optim.SGD if config.optimizer == "sgd" else torch.optim.Adam
    optimizer = opt_class(model.parameters(), lr=config.lr)
    probe = LayerProbe(list(model.linears), list(model.activations))
    try:
        yield from train(model, optimizer, task.batches(BATCH), torch.nn.functional.cross_entropy,
                         config.steps, probe=probe, log_every=log_every)
    finally:
        probe.close()


class VanishingGradients(Scenario):
    id = "vanishing-gradients"
    title = "Vanishing gradients"
    order = 10
    question = "Why do deep sigmoid networks stop learning, and what fixes it?"
    terms = ("Vanishing / exploding gradients", "Backpropagation", "Chain rule", "Residual (skip) connection",
             "Layer normalization", "Batch normalization", "Initialization")
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

    def execute(self, config: Config, run: Run) -> None:
        log_every = log_every_for(config.steps)
        run.interleave({name: train_arm(arm, log_every) for name, arm in arms_of(config).items()}, config.steps)

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        arms = {}
        tables = {prefix: layer_table(frame, prefix) for prefix in ("grad_norm", "out_grad")}
        for arm in arms_in_order(frame):
            rows = frame[frame["arm"] == arm]
            losses = metric_series(rows, "loss")
            accuracy = metric_series(rows, "accuracy")
            diverged = metric_series(rows, "diverged")
            info: dict = {
                "final_loss": float(losses["value"].iloc[-1]) if len(losses) else None,
                "final_accuracy": float(accuracy["value"].iloc[-1]) if len(accuracy) else None,
                "last_step": int(losses["step"].iloc[-1]) if len(losses) else None,
                "diverged_at": int(diverged["step"].iloc[0]) if len(diverged) else None,
            }
            for prefix, key in (("grad_norm", "weight"), ("out_grad", "backprop")):
                norms = first_step_profile(tables[prefix], arm)
                info[f"{key}_first_over_last"] = float(norms[0] / norms[-1]) if len(norms) and norms[-1] > 0 else None
                info[f"{key}_factor"] = per_layer_factor(norms)
            arms[arm] = info
        return {"arms": arms, "depth": config.depth, "chance_loss": float(np.log(N_CLASSES))}

    def explain(self, summary: dict, config: Config) -> str:
        lines = []
        depth = summary["depth"]
        for arm, info in summary["arms"].items():
            ratio, factor = info.get("weight_first_over_last"), info.get("backprop_factor")
            if ratio is None:
                continue
            line = (f"**{arm}**: at step 0, layer 1's weight gradient is $10^{{{np.log10(ratio):.1f}}}$ of layer {depth}'s"
                    if ratio > 0 else f"**{arm}**: at step 0, layer 1 receives no gradient at all (float32 underflow)")
            if factor is not None:
                line += f"; the back-propagated gradient changes ×{factor:.3f} per layer"
            if info["diverged_at"] is not None:
                line += f"; it diverged at step {info['diverged_at']}"
            elif info["final_loss"] is not None:
                stuck = info["final_loss"] > 0.9 * summary["chance_loss"]
                line += (f"; loss {info['final_loss']:.3f} at step {info['last_step']}"
                         + (f" — still at chance (ln 2 = {summary['chance_loss']:.3f})" if stuck else
                            f", batch accuracy {info['final_accuracy']:.0%}"))
            lines.append("- " + line + ".")
        return "\n".join(lines) or "Run to see how the gradient changes from layer to layer."

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> dict[str, go.Figure]:
        colors = arm_colors(arms_in_order(frame) or list(arms_of(config)))
        return {
            "loss": self._loss_figure(frame, colors),
            "grad_heatmap": self._heatmap(frame, colors),
            "grad_profile": self._profile(frame, colors, "grad_norm", "Weight-gradient norm by layer",
                                          "‖∂L/∂W‖ (log scale)"),
            "backprop_profile": self._profile(frame, colors, "out_grad",
                                              "Back-propagated gradient by layer (at each layer's output)",
                                              "‖∂L/∂a‖ (log scale)"),
            "activation_std": self._profile(frame, colors, "act_std", "Activation std by layer",
                                            "std of layer output (log scale)"),
        }

    def _loss_figure(self, frame: pd.DataFrame, colors: dict[str, str]) -> go.Figure:
        fig = go.Figure()
        for arm, rows in metric_series(frame, "loss").groupby("arm", sort=False):
            fig.add_scatter(x=rows["step"], y=rows["value"], name=arm, mode="lines",
                            line=dict(color=colors.get(arm)), hovertemplate=f"{arm}<br>step %{{x}}<br>loss %{{y:.4f}}<extra></extra>")
        for _, row in metric_series(frame, "diverged").iterrows():
            fig.add_vline(x=row["step"], line_dash="dot", line_color=colors.get(row["arm"]),
                          annotation_text=f"{row['arm']} diverged at step {int(row['step'])}")
        fig.add_hline(y=float(np.log(N_CLASSES)), line_dash="dash", line_color="gray",
                      annotation_text="chance (ln 2)", annotation_position="bottom right")
        losses = metric_series(frame, "loss")["value"]
        spans_decades = len(losses) and losses.min() > 0 and losses.max() / losses.min() > 100  # e.g. a blow-up
        return layout(fig, "Training loss", "step", "cross-entropy loss (nats)" + (" (log scale)" if spans_decades else ""),
                      log_y=bool(spans_decades))

    def _heatmap(self, frame: pd.DataFrame, colors: dict[str, str]) -> go.Figure:
        grads = layer_table(frame, "grad_norm")
        arms = list(colors)
        fig = make_subplots(rows=1, cols=max(1, len(arms)), shared_yaxes=True, subplot_titles=arms,
                            horizontal_spacing=0.06)
        positive = grads["value"][grads["value"] > 0]
        zmin = float(np.log10(positive.min())) if len(positive) else -8
        zmax = float(np.log10(positive.max())) if len(positive) else 0
        for col, arm in enumerate(arms, start=1):
            table = grads[grads["arm"] == arm].pivot_table(index="layer", columns="step", values="value")
            log_norms = np.log10(table.clip(lower=1e-30).to_numpy())
            fig.add_heatmap(x=table.columns, y=table.index, z=log_norms, zmin=zmin, zmax=zmax,
                            colorscale="Viridis", showscale=col == 1, row=1, col=col,
                            colorbar=dict(title="log10 ‖∂L/∂W‖"),
                            hovertemplate=f"{arm}<br>step %{{x}}<br>layer %{{y}}<br>log10 norm %{{z:.2f}}<extra></extra>")
            fig.update_xaxes(title_text="step", row=1, col=col)
        fig.update_yaxes(title_text="layer (1 = next to the input)", row=1, col=1)
        fig.update_layout(title="log10 weight-gradient norm, layer × step",
                          margin=dict(l=60, r=20, t=70, b=50))
        return fig

    def _profile(self, frame: pd.DataFrame, colors: dict[str, str], prefix: str, title: str, y_title: str) -> go.Figure:
        table = layer_table(frame, prefix)
        fig = go.Figure()
        for arm, rows in table.groupby("arm", sort=False):
            steps = sorted(rows["step"].unique())
            picks = dict.fromkeys([steps[0], steps[len(steps) // 2], steps[-1]])  # first, middle, last
            for dash, step in zip(["solid", "dash", "dot"], picks):
                at = rows[rows["step"] == step].sort_values("layer")
                fig.add_scatter(x=at["layer"], y=at["value"], name=f"{arm} · step {step}", mode="lines+markers",
                                line=dict(color=colors.get(arm), dash=dash),
                                hovertemplate=f"{arm}<br>step {step}<br>layer %{{x}}<br>%{{y:.3g}}<extra></extra>")
        fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, x=0))
        return layout(fig, title, "layer (1 = next to the input)", y_title, log_y=True)


def first_step_profile(table: pd.DataFrame, arm: str) -> np.ndarray:
    """One arm's per-layer values (from a `layer_table`) at its first logged step, layer 1 first."""
    table = table[table["arm"] == arm]
    if table.empty:
        return np.array([])
    return table[table["step"] == table["step"].min()].sort_values("layer")["value"].to_numpy()


def per_layer_factor(norms: np.ndarray) -> float | None:
    """Geometric-mean ratio between neighbouring layers' gradient norms, going toward the input."""
    if len(norms) < 2 or norms[0] <= 0 or norms[-1] <= 0:
        return None
    return float((norms[0] / norms[-1]) ** (1 / (len(norms) - 1)))
