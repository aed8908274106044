"""Warmup vs none: what does learning-rate warmup buy a Transformer?

Adam's first update is −lr·g/(|g|+ε) ≈ −lr·sign(g): every weight moves by the full
learning rate on step 1, however small its gradient. In a Post-LN Transformer (LayerNorm
after each residual add, as in the original) every path from the loss to an early block
crosses the LayerNorms of all later blocks, and its gradients near the output are large at
initialization (Xiong et al. 2020). At a large learning rate those first full-size steps
knock it into a state it never leaves: here the early blocks' gradients collapse within
~10 steps (block 1 ends up with 1/100 to 1/1000 of block 4's), the model predicts the
uniform distribution and the loss sits at ln(vocab) = ln 8 ≈ 2.08. Ramping the rate up
over the first W steps (warmup) lets the same model, on the same data, train. Pre-LN keeps
an identity path through every block and trains without warmup, although its first step
is exactly as large; RAdam (Liu et al. 2020) rectifies Adam's high-variance early steps,
warmup built into the optimizer.

The effect lives in a band of learning rates. For the default 4-block model on
reverse-a-sequence (80 steps, warmup 40; 3–8 seeds): below ~1.5e-2 Post-LN trains without
warmup, from ~2e-2 to ~3e-2 it stays at chance without warmup and trains with it, and
above ~4e-2 it fails even with warmup. The default lr 2.5e-2 sits inside the band.

Look at the loss (the no-warmup arm flat on the ln 8 line), the update ratio of the first
steps (warmup makes them W times smaller), and the learning-rate schedule.
"""
import math
from dataclasses import replace
from typing import Literal

import pandas as pd
import plotly.graph_objects as go
from pydantic import Field

from engines.training import log_every_for
from engines.transformer import ArmSpec, train_arm
from scenarios.base import Run, Scenario, ScenarioConfig
from scenarios.plotting import arm_colors, arms_in_order, layer_table, layout, metric_series

VOCAB, LENGTH = 8, 8
CHANCE_LOSS = math.log(VOCAB)
BAND = "about 2e-2 to 3e-2"  # measured for the default model, see the module docstring

Contrast = Literal["other LayerNorm placement", "RAdam without warmup", "none"]


class Config(ScenarioConfig):
    norm: Literal["post-ln", "pre-ln"] = Field(
        "post-ln", description="Post-LN: x ← LN(x + F(x)) (original Transformer). Pre-LN: x ← x + F(LN(x)).")
    optimizer: Literal["adam", "adamw"] = Field(
        "adam", description="Adam, or AdamW (weight decay 0.01, decoupled). Betas (0.9, 0.98) as in the Transformer paper.")
    lr: float = Field(2.5e-2, ge=1e-4, le=1e-1, json_schema_extra={"scale": "log"},
                      description="Peak learning rate. The effect lives in a band: ~2e-2 to 3e-2 for the default model.")
    warmup_steps: int = Field(40, ge=2, le=1000, description="Warmup arm: lr rises linearly from lr/W to lr over W steps.")
    schedule: Literal["linear warmup", "warmup + cosine"] = Field(
        "linear warmup", description="After warmup: hold lr, or cosine-decay it to 0. The no-warmup arm gets the same decay.")
    steps: int = Field(80, ge=10, le=2000, description="Training steps (a fresh batch of 32 sequences each).")
    layers: int = Field(4, ge=1, le=12, description="Encoder blocks (d_model 32, 2 heads, FFN 64, no dropout).")
    contrast: Contrast = Field(
        "other LayerNorm placement",
        description="A third arm without warmup: the other LayerNorm placement, or RAdam, or none.")


def arm_label(spec: ArmSpec) -> str:
    norm = "Pre-LN" if spec.norm_first else "Post-LN"
    optimizer = {"adam": "Adam", "adamw": "AdamW", "radam": "RAdam"}[spec.optimizer]
    schedule = f"warmup {spec.warmup_steps}" if spec.warmup_steps else "no warmup"
    return f"{norm} · {optimizer} · {schedule}" + (" + cosine" if spec.decay == "cosine" else "")


def arms_of(config: Config) -> dict[str, ArmSpec]:
    """No warmup vs warmup (same model, seed and batches), plus the contrast arm."""
    base = ArmSpec(norm_first=config.norm == "pre-ln", optimizer=config.optimizer, lr=config.lr,
                   decay="cosine" if config.schedule == "warmup + cosine" else "constant",
                   layers=config.layers, vocab=VOCAB, length=LENGTH, seed=config.seed)
    specs = [base, replace(base, warmup_steps=config.warmup_steps)]
    if config.contrast == "other LayerNorm placement":
        specs.append(replace(base, norm_first=not base.norm_first))
    elif config.contrast == "RAdam without warmup":
        specs.append(replace(base, optimizer="radam"))
    return {arm_label(spec): spec for spec in specs}


class Warmup(Scenario):
    id = "warmup"
    title = "Learning-rate warmup"
    order = 30
    question = "Why does a Post-LN Transformer need learning-rate warmup when a Pre-LN one does not?"
    terms = ("Warmup", "Learning rate", "Adam", "AdamW", "Layer normalization", "Residual (skip) connection",
             "Cosine decay", "Attention")
    formula = (r"\begin{aligned}\text{Post-LN: } x &\leftarrow \mathrm{LN}(x + F(x)) \qquad"
               r"\text{Pre-LN: } x \leftarrow x + F(\mathrm{LN}(x))\\"
               r"\text{Adam, step 1: } \Delta\theta &= -\eta\,\frac{g}{|g|+\epsilon} \approx -\eta\,\mathrm{sign}(g)\\"
               r"\text{warmup: } \eta_t &= \eta\,\min\!\big(1, \tfrac{t+1}{W}\big)\end{aligned}")
    Config = Config
    tiny = {"layers": 1, "steps": 10, "warmup_steps": 4}
    presets = {
        "the failure and the fix": {"norm": "post-ln", "lr": 2.5e-2, "contrast": "none"},
        "Pre-LN needs no warmup": {"norm": "pre-ln", "contrast": "other LayerNorm placement"},
        "RAdam: warmup inside Adam": {"contrast": "RAdam without warmup"},
        "below the band (lr 1e-2)": {"lr": 1e-2},
        "above the band (lr 5e-2)": {"lr": 5e-2},
        "warmup + cosine": {"schedule": "warmup + cosine"},
        "6 blocks, 200 steps (Xiong et al. style)": {"layers": 6, "steps": 200, "warmup_steps": 100, "lr": 2e-2},
    }

    def execute(self, config: Config, run: Run) -> None:
        log_every = log_every_for(config.steps)
        run.interleave({name: train_arm(spec, config.steps, log_every) for name, spec in arms_of(config).items()},
                       config.steps)

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        arms = {}
        ratios = layer_table(frame, "update_ratio")
        grads = layer_table(frame, "grad_norm")
        for arm in arms_in_order(frame):
            rows = frame[frame["arm"] == arm]
            losses = metric_series(rows, "loss")
            accuracy = metric_series(rows, "accuracy")
            diverged = metric_series(rows, "diverged")
            arm_ratios = ratios[ratios["arm"] == arm]
            first_ratios = arm_ratios[arm_ratios["step"] == arm_ratios["step"].min()]["value"]
            last_grads = grads[grads["arm"] == arm]
            last_grads = last_grads[last_grads["step"] == last_grads["step"].max()].sort_values("layer")["value"]
            tail = losses["value"].iloc[-5:]  # one batch is noisy: average the last few logged losses
            final_loss = float(tail.mean()) if len(tail) else None
            arms[arm] = {
                "final_loss": final_loss,
                "final_accuracy": float(accuracy["value"].iloc[-5:].mean()) if len(accuracy) else None,
                "last_step": int(losses["step"].iloc[-1]) if len(losses) else None,
                "at_chance": None if final_loss is None else bool(final_loss > 0.9 * CHANCE_LOSS),
                "first_update_ratio": float(first_ratios.mean()) if len(first_ratios) else None,
                # < 1: the early blocks get less gradient than the last one (Post-LN's stuck arm: 1e-2 to 1e-3)
                "first_over_last_block_grad": (float(last_grads.iloc[0] / last_grads.iloc[-1])
                                               if len(last_grads) > 1 and last_grads.iloc[-1] > 0 else None),
                "peak_grad_norm": float(metric_series(rows, "grad_norm_global")["value"].max()) if len(losses) else None,
                "diverged_at": int(diverged["step"].iloc[0]) if len(diverged) else None,
            }
        return {"arms": arms, "chance_loss": CHANCE_LOSS, "vocab": VOCAB, "lr": config.lr, "steps": config.steps}

    def explain(self, summary: dict, config: Config) -> str:
        lines = []
        for arm, info in summary["arms"].items():
            if info["final_loss"] is None:
                continue
            done = info["last_step"] >= summary["steps"] - 1
            chance = f"chance is ln {summary['vocab']} = {summary['chance_loss']:.2f}"
            if info["diverged_at"] is not None:
                line = f"diverged at step {info['diverged_at']}"
            elif info["at_chance"]:
                line = (f"the loss {'stayed' if done else 'is still'} at {info['final_loss']:.2f} "
                        f"{'through' if done else 'at'} step {info['last_step']} ({chance})")
            else:
                line = (f"{'trained to' if done else 'reached'} loss {info['final_loss']:.2f} by step {info['last_step']}, "
                        f"{info['final_accuracy']:.0%} of tokens reversed correctly")
            if info["first_update_ratio"] is not None:
                line += f"; its first step moved each block by {info['first_update_ratio']:.1%} of its weights"
            ratio = info["first_over_last_block_grad"]
            if info["at_chance"] and ratio is not None and 0 < ratio < 0.1:
                line += f", and at step {info['last_step']} block 1's gradient was {1 / ratio:.0f}× smaller than the last block's"
            line = f"**{arm}**: " + line
            lines.append("- " + line + ".")
        lines += ["", "Adam's first step is ≈ lr·sign(g) for every weight, whatever the gradient's size, so every "
                  "arm without warmup takes the same large first step; warmup divides it by W."] if lines else []
        inside = 2e-2 <= config.lr <= 3e-2
        band = (f"The effect lives in a band of learning rates — {BAND} for the default 4-block model "
                f"(below it everything trains, above it Post-LN fails even with warmup). "
                f"The default lr 2.5e-2 sits inside it; this run used lr {config.lr:g}"
                + (", inside the band." if inside else ", outside the band measured for the default model."))
        return "\n".join(lines + ["", band]) if lines else "Run to compare the arms. " + band

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> dict[str, go.Figure]:
        colors = arm_colors(arms_in_order(frame) or list(arms_of(config)))
        loss = self._lines(frame, colors, "loss", "Training loss", "cross-entropy per token (nats)")
        loss.add_hline(y=CHANCE_LOSS, line_dash="dash", line_color="gray",
                       annotation_text=f"chance: ln {VOCAB} = {CHANCE_LOSS:.2f}", annotation_position="top right")
        lr = self._lines(frame, colors, "lr", "Learning-rate schedule", "learning rate (per step)", nested=True)
        grad = self._lines(frame, colors, "grad_norm_global", "Global gradient norm",
                           "‖∂L/∂θ‖ over all parameters (log scale)", log_y=True)
        ratios = layer_table(frame, "update_ratio").groupby(["arm", "step"], sort=False)["value"].mean().reset_index()
        update = self._lines(ratios.assign(metric="update_ratio"), colors, "update_ratio",
                             "Update-to-weight ratio ‖Δθ‖/‖θ‖ (mean over blocks)", "‖Δθ‖/‖θ‖ per step (log scale)",
                             log_y=True)
        return {"loss": loss, "lr_schedule": lr, "grad_norm": grad, "update_ratio": update,
                "grad_profile": self._profile(frame, colors, "grad_norm", "Gradient norm by block",
                                              "‖∂L/∂θ_block‖ (log scale)"),
                "update_profile": self._profile(frame, colors, "update_ratio", "Update-to-weight ratio by block",
                                                "‖Δθ‖/‖θ‖ of the block (log scale)")}

    def _lines(self, frame: pd.DataFrame, colors: dict[str, str], metric: str, title: str, y_title: str, *,
               log_y: bool = False, nested: bool = False) -> go.Figure:
        """One line per arm; `nested` draws earlier arms wider, so arms that coincide both show."""
        fig = go.Figure()
        for arm, rows in metric_series(frame, metric).groupby("arm", sort=False):
            fig.add_scatter(x=rows["step"], y=rows["value"], name=arm, mode="lines",
                            line=dict(color=colors.get(arm), width=_width(list(colors).index(arm)) if nested else 2),
                            hovertemplate=f"{arm}<br>step %{{x}}<br>{metric} %{{y:.4g}}<extra></extra>")
        for _, row in metric_series(frame, "diverged").iterrows():
            fig.add_vline(x=row["step"], line_dash="dot", line_color=colors.get(row["arm"]))
        fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
        return layout(fig, title, "step", y_title, log_y=log_y)

    def _profile(self, frame: pd.DataFrame, colors: dict[str, str], prefix: str, title: str,
                 y_title: str) -> go.Figure:
        """Per-block values at the first and the last logged step of each arm."""
        table = layer_table(frame, prefix)
        fig = go.Figure()
        for arm, rows in table.groupby("arm", sort=False):
            steps = sorted(rows["step"].unique())
            for dash, step in zip(["solid", "dot"], dict.fromkeys([steps[0], steps[-1]])):
                at = rows[rows["step"] == step].sort_values("layer")
                fig.add_scatter(x=at["layer"], y=at["value"], name=f"{arm} · step {step}", mode="lines+markers",
                                line=dict(color=colors.get(arm), dash=dash, width=_width(list(colors).index(arm))),
                                marker=dict(size=_width(list(colors).index(arm)) + 5),
                                hovertemplate=f"{arm}<br>step {step}<br>block %{{x}}<br>%{{y:.3g}}<extra></extra>")
        fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
        fig.update_xaxes(dtick=1)
        return layout(fig, title, "encoder block (1 = next to the input)", y_title, log_y=True)


def _width(arm_index: int) -> float:
    """Line width by arm order, widest first: the no-warmup arms' first steps coincide exactly."""
    return max(1.5, 4.0 - 1.25 * arm_index)
