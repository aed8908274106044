"""Warmup vs none: what does learning-rate warmup buy a Transformer?

Adam's first update is −lr·g/(|g|+ε) ≈ −lr·sign(g): every weight moves by the full
learning rate on step 1, however small its gradient. In a Post-LN Transformer (LayerNorm
after each residual add, as in the original) every path from the loss to an early block
crosses the LayerNorms of all later blocks, and its gradients near the output are large at
initialization (Xiong et al. 2020). At a large learning rate those first full-size steps
knock it into a state it never leaves: the model predicts the uniform distribution and
the loss sits at ln(vocab) = ln 8 ≈ 2.08 (by step 10 block 1's gradient has dropped to
1/7–1/300 of block 4's on seeds 0–5). Ramping the rate up over the first W steps (warmup)
lets the same model, on the same data, train. Pre-LN keeps an identity path through every
block and trains without warmup, although its first step is exactly as large; RAdam (Liu
et al. 2020) rectifies Adam's high-variance early steps, warmup built into the optimizer.

The effect lives in a band of learning rates whose edges move with the seed and the depth.
Measured on seeds 0–5 (80 steps, warmup 40; at chance: the mean of the last 5 losses within
5% of ln 8; trains: below 1). With 4 blocks no warmup is at chance on 0/6 seeds at lr 1.5e-2,
3/6 at 2e-2 and 6/6 from 2.25e-2 up; warmup trains on 6/6 up to 3e-2, 4/6 at 3.5e-2, 2/6 at
4e-2, 0/6 at 5e-2. So the effect holds on every seed from 2.25e-2 to 3e-2 (the default 2.5e-2
among them). Fewer blocks move the band up (2 blocks: no warmup at chance on 0/6 up to 2.5e-2,
6/6 at 5e-2; warmup trains on 6/6 throughout), more move it down (6 blocks: no warmup at
chance on 5/6 at 1.5e-2 and 6/6 from 2e-2; warmup trains on 6/6 up to 2e-2, 3/6 at 2.5e-2).

Look at the loss (the no-warmup arm flat on the ln 8 line), the update ratio of the first
steps (warmup makes them W times smaller), and the learning-rate schedule.
"""
import itertools
import math
from typing import Literal

import pandas as pd
from pydantic import Field

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, shown_by, together
from scenarios.cost import logs
from scenarios.claims import AT_CHANCE
from scenarios.explanation import Explanation, join, say
from scenarios.plotting import Figures, arm_colors
from scenarios.records import Records
from scenarios.warmup.figures import (block_gradient_sentence, fate, figures_of, first_update, first_update_sentence,
                                       peak_gradient_sentence)

VOCAB, LENGTH = 8, 8
CHANCE_LOSS = math.log(VOCAB)

Contrast = Literal["other LayerNorm placement", "RAdam without warmup", "none"]
LN_CONTRAST = {"contrast": "other LayerNorm placement"}


class Config(ScenarioConfig):
    norm: Literal["post-ln", "pre-ln"] = Field(
        "post-ln", description="Post-LN: x ← LN(x + F(x)) (original Transformer). Pre-LN: x ← x + F(LN(x)).")
    optimizer: Literal["adam", "adamw"] = Field(
        "adam", description="Adam, or AdamW (weight decay 0.01, decoupled). Betas (0.9, 0.98) as in the Transformer paper.")
    lr: float = Field(2.5e-2, ge=1e-4, le=1e-1, json_schema_extra={"scale": "log"},
                      description="Peak learning rate. The effect lives in a band: 2.25e-2 to 3e-2 for 4 blocks "
                                  "(seeds 0-5); lower with more blocks, higher with fewer.")
    warmup_steps: int = Field(40, ge=2, le=1000, description="Warmup arm: lr rises linearly from lr/W to lr over W steps.")
    schedule: Literal["linear warmup", "warmup + cosine"] = Field(
        "linear warmup", description="After warmup: hold lr, or cosine-decay it to 0. The no-warmup arm gets the same decay.")
    steps: int = Field(80, ge=10, le=2000, description="Training steps (a fresh batch of 32 sequences each).")
    layers: int = Field(4, ge=1, le=12, description="Encoder blocks (d_model 32, 2 heads, FFN 64, no dropout).")
    contrast: Contrast = Field(
        "other LayerNorm placement",
        description="A third arm without warmup: the other LayerNorm placement, or RAdam, or none.")


def arm_label(norm_first: bool, optimizer: str, warmup: bool, cosine: bool) -> str:
    optimizer = {"adam": "Adam", "adamw": "AdamW", "radam": "RAdam"}[optimizer]
    schedule = "warmup" if warmup else "no warmup"
    return f"{'Pre-LN' if norm_first else 'Post-LN'} · {optimizer} · {schedule}" + (" + cosine" if cosine else "")


def arms_of(config: Config) -> dict[str, dict]:
    """No warmup vs warmup (same model, seed and batches), plus the contrast arm: label -> ArmSpec fields."""
    base = dict(norm_first=config.norm == "pre-ln", optimizer=config.optimizer, lr=config.lr, warmup_steps=0,
                decay="cosine" if config.schedule == "warmup + cosine" else "constant",
                layers=config.layers, vocab=VOCAB, length=LENGTH, seed=config.seed)
    specs = [base, {**base, "warmup_steps": config.warmup_steps}]
    if config.contrast == "other LayerNorm placement":
        specs.append({**base, "norm_first": not base["norm_first"]})
    elif config.contrast == "RAdam without warmup":
        specs.append({**base, "optimizer": "radam"})
    return {arm_label(s["norm_first"], s["optimizer"], s["warmup_steps"] > 0, s["decay"] == "cosine"): s for s in specs}


class Warmup(Scenario):
    id = "warmup"
    title = "Learning-rate warmup"
    order = 30
    arms_note = ("The arms train side by side as separate models, not as one batched model: they differ in norm "
                 "placement, optimizer or schedule, which is code, not numbers.")
    topic = "Optimization"
    question = "Why does a Post-LN Transformer need learning-rate warmup when a Pre-LN one does not?"
    terms = {
        "Warmup": shown_by("loss", "loss", "lr", arm="· warmup", how="the same model and batches, with and without warmup"),
        "Learning rate schedule": shown_by("lr_schedule", "lr", how="each arm's rate per step: constant, warmup, cosine"),
        "Learning rate": shown_by("update_ratio", "update_ratio/", "lr", how="Adam's first step moves each weight by ≈ lr"),
        "Adam": shown_by("update_ratio", "update_ratio/", arm="Adam", when={"optimizer": "adam"},
                         how="Adam's first step ≈ lr·sign(g): no-warmup's is W times warmup's"),
        "AdamW": shown_by("loss", "loss", arm="AdamW", when={"optimizer": "adamw"},
                          how="the same arms trained with AdamW (decoupled weight decay 0.01)"),
        "Layer normalization": shown_by("loss", "loss", arm="Pre-LN", when=LN_CONTRAST,
                                        how="Post-LN against Pre-LN: where the LayerNorm sits decides whether warmup is needed"),
        "Residual (skip) connection": shown_by("grad_profile", "grad_norm/", arm="Pre-LN", when=LN_CONTRAST,
                                               how="Pre-LN's residual path skips every LayerNorm: its early blocks keep their gradient"),
        "Cosine decay": shown_by("lr_schedule", "lr", arm="cosine", when={"schedule": "warmup + cosine"}),
        "Cross-entropy": shown_by("loss", "loss", how="per-token cross-entropy against ln 8, the uniform guess"),
    }
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
        "AdamW": {"optimizer": "adamw"},
        "6 blocks, 200 steps (Xiong et al. style)": {"layers": 6, "steps": 200, "warmup_steps": 100, "lr": 2e-2},
    }

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"layer_logs": 0.000445, "layer_steps": 0.00092, "run": 0.0156, "steps": 0.00071}
    rates_reference = 0.1366  # the reference workload's CPU s beside the fit
    timed = ({"layers": 8, "steps": 25}, {"steps": 150, "layers": 2, "contrast": "none"}, {"layers": 1, "steps": 150})

    def work(self, config: Config) -> Work:
        """Two or three arms side by side, each step a batch of 32 sequences of 8 through `layers` blocks
        of width 32 (the block probe on logged steps)."""
        arms = len(arms_of(config))
        steps = arms * config.steps
        return Work({"steps": steps, "layer_steps": steps * config.layers,
                     "layer_logs": arms * logs(config.steps) * config.layers},
                    floats=arms * config.layers * (4 * 13_000 + 32 * LENGTH * 32 * 12))

    def phases(self, config: Config):
        from engines.loop.training import log_every_for
        from engines.sequence.transformer import ArmSpec, train_arm
        log_every = log_every_for(config.steps)
        return together(*(Arm(name, train_arm(ArmSpec(**spec), config.steps, log_every), config.steps)
                          for name, spec in arms_of(config).items()))

    def arm_universe(self) -> list[str]:
        configs = [Config()] + [Config(norm=n, optimizer=o, schedule=s, contrast=c) for n, o, s, c in itertools.product(
            *(Config.model_fields[f].annotation.__args__ for f in ("norm", "optimizer", "schedule", "contrast")))]
        return list(dict.fromkeys(label for config in configs for label in arms_of(config)))

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records, arms = Records(frame), {}
        for arm in records.arms_with("loss"):
            tail = records.values(arm, "loss")[-5:]  # one batch is noisy: average the last few logged losses
            grads = records.layers(arm, "grad_norm")
            arms[arm] = {"final_loss": float(tail.mean()), "final_accuracy": float(records.values(arm, "accuracy")[-5:].mean()),
                         "last_step": records.last_step(arm, "loss"), "diverged_at": records.diverged_at(arm),
                         "at_chance": bool(abs(tail.mean() - CHANCE_LOSS) <= AT_CHANCE * CHANCE_LOSS),
                         "first_update_ratio": first_update(arm)(records),
                         # < 1: the early blocks get less gradient than the last one
                         "first_over_last_block_grad": (float(grads.iloc[-1].iloc[0] / grads.iloc[-1].iloc[-1])
                                                        if grads.shape[1] > 1 and grads.iloc[-1].iloc[-1] > 0 else None),
                         "peak_grad_norm": float(records.values(arm, "grad_norm_global").max())}
        names = list(arms_of(config))
        final = [arms.get(name, {}).get("final_loss") for name in names] + [None]
        ratio = [arms.get(name, {}).get("first_update_ratio") for name in names[:2]]
        headline = {"loss, last 5 logs (no warmup)": final[0], "loss, last 5 logs (warmup)": final[1],
                    "loss, last 5 logs (contrast)": final[2],
                    "first step, no warmup / warmup": ratio[0] / ratio[1] if None not in ratio and ratio[1] else None}
        return {"headline": headline, "arms": arms, "chance_loss": CHANCE_LOSS, "vocab": VOCAB, "lr": config.lr,
                "steps": config.steps}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records = Records(frame)
        names = list(arms_of(config))
        shown = [arm for arm in names if records.series(arm, "loss").size]
        if not shown:
            return Explanation(waiting="Run to compare the arms: the same model and batches with and without warmup.")
        takeaway = join(*(say("{}: loss {}", arm, fate(records, arm, CHANCE_LOSS, f"ln {VOCAB}")) for arm in shown))
        details = [first_update_sentence(records, shown, names[0], names[1]),
                   block_gradient_sentence(records, shown, config.layers), peak_gradient_sentence(records, shown)]
        return Explanation(takeaway, tuple(sentence for sentence in details if sentence is not None))

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records = Records(frame)
        arms = records.arms() or list(arms_of(config))
        return figures_of(records, arm_colors(arms, self.arm_universe()), arms, CHANCE_LOSS, VOCAB)
