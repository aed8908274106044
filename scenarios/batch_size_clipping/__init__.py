"""Batch size, learning rate and clipping: what does a bigger batch buy, and what stops a gradient from exploding?

A mini-batch gradient is the mean of B per-example gradients, so its variance around the
full gradient G is tr(Σ)/B: four times the batch, half the noise's size. Below McCandlish
et al.'s simple noise scale B_simple = tr(Σ)/|G|² a bigger batch makes each step almost
proportionally better, so a bigger learning rate pays (linear scaling, Goyal et al. 2017;
√B keeps the update's noise fixed); far above it the extra examples are nearly wasted.
Compare the loss against steps with the loss against examples seen.

An RNN applies its recurrent matrix once per time step, so the gradient through T steps is
multiplied by it T times: with spectral radius ρ = 1.2 over 50 steps, by about 1.2^50 ≈ 9100.
One SGD step on such a gradient throws the weights to infinity. `clip_grad_norm_(c)` rescales
the whole gradient to norm min(‖g‖, c) and keeps its direction; `clip_grad_value_(v)` clamps
each coordinate (Pascanu et al. 2013). Every arm may follow a cosine or warmup + cosine
schedule from torch's `lr_scheduler`, drawn against its closed form.

The gradient noise is measured, not assumed: per-example gradients of 4096 examples in one
`torch.func.vmap(grad(...))` call, then mini-batches drawn from them at B = 8…1024, at
initialization and again after the smallest batch's run has trained the MLP.
"""
from typing import Literal

import pandas as pd
from pydantic import Field

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, in_turn, shown_by, together
from scenarios.cost import logs
from scenarios.batch_size_clipping import figures as look
from scenarios.batch_size_clipping.figures import CLIP_ARMS, NOISE_INIT, NOISE_TRAINED, batch_label
from scenarios.explanation import Explanation, join
from scenarios.plotting import Figures, arm_colors, curves_figure
from scenarios.records import Records

LOG = {"scale": "log"}
Sizes = Literal["8,32,128,512,1024", "8,16,32,64,128,256,512,1024", "32,1024", "8,64,512"]
SCHEDULES = {"constant": ("constant", False), "cosine": ("cosine", False), "warmup + cosine": ("cosine", True)}


class Config(ScenarioConfig):
    batch_sizes: Sizes = Field("8,32,128,512,1024", description="Batch sizes to train the MLP at, one arm each.")
    scaling: Literal["linear", "sqrt", "fixed"] = Field(
        "linear", description="lr at batch B: lr·B/32 (Goyal et al. 2017), lr·√(B/32), or lr at every B.")
    lr: float = Field(0.1, ge=1e-3, le=1.0, json_schema_extra=LOG, description="SGD's rate at batch 32 (MLP).")
    steps: int = Field(200, ge=10, le=2000, description="MLP steps per batch size (fresh i.i.d. batches).")
    schedule: Literal["constant", "cosine", "warmup + cosine"] = Field(
        "constant", description="torch lr_scheduler for every arm: cosine decays to 0 at the last step.")
    warmup_steps: int = Field(20, ge=2, le=500, description="Linear warmup length when the schedule has one.",
                              json_schema_extra={"used_when": {"schedule": ["warmup + cosine"]}})
    radius: float = Field(1.2, ge=0.8, le=1.5, description="Spectral radius ρ of the RNN's recurrent matrix.")
    seq_len: int = Field(50, ge=5, le=100, description="RNN sequence length T: the gradient scales like ρ^T.")
    rnn: Literal["linear", "tanh"] = Field("linear", description="h ← Wh + Ux, or tanh of it (bounded forward pass).")
    clip_norm: float = Field(1.0, ge=0.01, le=100.0, json_schema_extra=LOG, description="c of clip_grad_norm_.")
    clip_value: float = Field(0.1, ge=0.001, le=10.0, json_schema_extra=LOG, description="v of clip_grad_value_.")
    rnn_lr: float = Field(0.1, ge=1e-4, le=1.0, json_schema_extra=LOG, description="SGD's rate on the RNN.")
    rnn_steps: int = Field(100, ge=10, le=2000, description="RNN steps (batches of 32 fresh sequences).")


def sizes_of(config: Config) -> list[int]:
    return [int(b) for b in config.batch_sizes.split(",")]


class BatchSizeClipping(Scenario):
    id = "batch-size-clipping"
    title = "Batch size, learning rate and clipping"
    order = 50
    arms_note = ("The arms train side by side as separate models, not as one batched model: their batch sizes differ "
                 "in shape, and their clipping is different code.")
    topic = "Optimization"
    question = "What does a bigger batch buy, and what stops a gradient from exploding?"
    terms = {
        "Batch size": shown_by("loss_vs_examples", "eval_loss", "examples", arm="B=",
                               how="the same MLP at each batch size: loss per step and per example seen"),
        "SGD": shown_by("gradient_noise", "grad_var", "grad_var_theory", arm="noise",
                        how="a mini-batch gradient's variance around the full gradient: tr(Σ)/B"),
        "Gradient": shown_by("gradient_noise", "grad_var", "noise_scale", arm="noise",
                             how="per-example gradients by vmap(grad): their mean G and spread tr(Σ)"),
        "Learning rate": shown_by("lr_schedule", "lr", arm="B=", how="scaled with the batch: ×B/32, ×√(B/32) or fixed"),
        "Gradient clipping": shown_by("clip_coef", "clip_coef", "clipped_norm", arm="clip_grad_norm_",
                                      how="clip_grad_norm_ rescales to min(‖g‖, c); the coefficient is the factor"),
        "Vanishing / exploding gradients": shown_by("grad_norm", "grad_norm", arm="no clipping",
                                                    how="through T steps of ρ = 1.2 the gradient grows like ρ^T"),
        "NaN (Not a Number)": shown_by("rnn_loss", "diverged", arm="no clipping", when={"seq_len": 50},
                                       how="one unclipped step and the RNN's loss is NaN"),
        "Learning rate schedule": shown_by("lr_schedule", "lr", "lr_closed_form", how="recorded rate against its closed form"),
        "Cosine decay": shown_by("lr_schedule", "lr", "lr_closed_form", when={"schedule": "cosine"},
                                 how="CosineAnnealingLR: ½lr(1 + cos(πt/T)), step for step"),
        "Warmup": shown_by("lr_schedule", "lr", when={"schedule": "warmup + cosine"}, how="LinearLR then cosine"),
    }
    formula = (r"\begin{aligned}\mathbb{E}\,\|\hat g_B - G\|^2 &= \frac{\operatorname{tr}\Sigma}{B}, \qquad"
               r"B_{\text{simple}} = \frac{\operatorname{tr}\Sigma}{|G|^2}\\"
               r"\text{clip\_grad\_norm\_: } g &\leftarrow g\cdot\min\!\Big(1, \frac{c}{\|g\| + 10^{-6}}\Big)\qquad"
               r"\frac{\partial L}{\partial h_0} = \prod_{t=1}^{T} W^{\top}\mathrm{diag}\,f'(z_t)\,"
               r"\frac{\partial L}{\partial h_T} \sim \rho^{T}\end{aligned}")
    Config = Config
    tiny = {"batch_sizes": "32,1024", "steps": 10, "seq_len": 10, "rnn_steps": 10}
    presets = {
        "the failure: unclipped RNN (ρ 1.2, T 50)": {"radius": 1.2, "seq_len": 50},
        "the fix holds: ρ 1.5 over 100 steps": {"radius": 1.5, "seq_len": 100},
        "ρ 0.9: nothing to clip": {"radius": 0.9},
        "fixed lr across batch sizes": {"scaling": "fixed"},
        "Goyal et al. 2017: linear scaling + warmup": {"scaling": "linear", "schedule": "warmup + cosine",
                                                       "warmup_steps": 20},
        "tanh RNN": {"rnn": "tanh"},
    }

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"batch_steps": 0.00028, "example_steps": 4.18e-07, "logs": 0.000501, "rnn_steps": 0.00017,
             "rnn_token_steps": 1.42e-05, "run": 0.26}
    rates_reference = 0.1430  # the reference workload's CPU s beside the fit
    timed = ({"batch_sizes": "8,16,32,64,128,256,512,1024", "steps": 120, "rnn_steps": 20},
             {"rnn_steps": 150, "seq_len": 100, "steps": 20}, {"steps": 200, "rnn_steps": 100, "seq_len": 20})

    def work(self, config: Config) -> Work:
        """One MLP per batch size and three RNNs (no clip, by norm, by value) side by side; the gradient-noise
        probe before and after."""
        sizes, rnn = sizes_of(config), 3 * config.rnn_steps
        return Work({"batch_steps": len(sizes) * config.steps, "example_steps": sum(sizes) * config.steps,
                     "rnn_steps": rnn, "rnn_token_steps": rnn * config.seq_len,
                     "logs": len(sizes) * logs(config.steps, 50) + 3 * logs(config.rnn_steps)},
                    floats=len(sizes) * 4 * 20_000 + sum(sizes) * 64 * 4 + 3 * config.seq_len * 64 * 4)

    def phases(self, config: Config):
        from engines.loop.training import log_every_for
        from engines.supervised.clipping import clip_arm
        from engines.supervised.gradient_noise import NOISE_BATCHES, batch_arm, make_model, noise_records, scaled_lr
        decay, warms = SCHEDULES[config.schedule]
        schedule = dict(decay=decay, warmup_steps=config.warmup_steps if warms else 0)
        keep: dict = {}
        sizes = sizes_of(config)
        batches = [Arm(batch_label(b), batch_arm(b, scaled_lr(config.lr, b, config.scaling), config.steps, config.seed,
                                                 log_every=log_every_for(config.steps, 50), keep=keep if i == 0 else None,
                                                 **schedule), config.steps, cost=0.2) for i, b in enumerate(sizes)]
        thresholds = {"none": 0.0, "norm": config.clip_norm, "value": config.clip_value}
        clipped = [Arm(label, clip_arm(mode, thresholds[mode], config.radius, config.seq_len, config.rnn, config.rnn_lr,
                                       config.rnn_steps, config.seed, log_every=log_every_for(config.rnn_steps),
                                       **schedule), config.rnn_steps, cost=config.seq_len / 50)
                   for label, mode in CLIP_ARMS.items()]

        def after_training():
            if "model" in keep:  # the smallest batch's arm finished (it did not diverge)
                yield from noise_records(keep["model"], config.seed + 3)
        noise = len(NOISE_BATCHES) + 1
        return (in_turn(Arm(NOISE_INIT, noise_records(make_model(config.seed), config.seed + 3), noise, cost=3))
                + together(*batches, *clipped) + in_turn(Arm(NOISE_TRAINED, after_training(), noise, cost=3)))

    def arm_universe(self) -> list[str]:
        sizes = sorted({int(b) for choice in Sizes.__args__ for b in choice.split(",")})
        return [*CLIP_ARMS, *(batch_label(b) for b in sizes), NOISE_INIT, NOISE_TRAINED]

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records = Records(frame)
        batches = [batch_label(b) for b in sizes_of(config)]
        headline = {"gradient variance slope vs B (at init)": look.fitted_slope(NOISE_INIT)(records),
                    "B_simple at init": records.first(NOISE_INIT, "noise_scale"),
                    "unclipped RNN diverged at step": records.diverged_at("no clipping"),
                    "final RNN loss (clip_grad_norm_)": records.last("clip_grad_norm_", "loss")}
        return {"headline": headline,
                "noise": {arm: {"slope": look.fitted_slope(arm)(records), "noise_scale": records.first(arm, "noise_scale")}
                          for arm in (NOISE_INIT, NOISE_TRAINED)},
                "batches": {arm: {"final_eval_loss": records.last(arm, "eval_loss"), "diverged_at": records.diverged_at(arm)}
                            for arm in batches},
                "clipping": {arm: {"final_loss": records.last(arm, "loss"), "diverged_at": records.diverged_at(arm),
                                   "peak_grad_norm": float(records.values(arm, "grad_norm").max())
                                   if records.has("grad_norm", arm) else None} for arm in CLIP_ARMS}}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records = Records(frame)
        batches = [batch_label(b) for b in sizes_of(config)]
        noise = look.noise_sentence(records, [a for a in (NOISE_INIT, NOISE_TRAINED) if records.has("grad_var", a)])
        fates = look.clip_fates(records, list(CLIP_ARMS))
        details = [look.batch_sentence(records, batches), look.clip_sentence(records, list(CLIP_ARMS)),
                   look.schedule_sentence(records, batches + list(CLIP_ARMS), config.schedule)]
        details = [sentence for sentence in details if sentence is not None]
        lead = [sentence for sentence in (noise, join(*fates) if fates else None) if sentence is not None]
        if not lead:
            return Explanation(waiting="Run to measure the gradient noise, then train every batch size and the RNN.")
        return Explanation(join(*lead), tuple(details))

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records = Records(frame)
        batches, clips = [batch_label(b) for b in sizes_of(config)], list(CLIP_ARMS)
        colors = arm_colors([*batches, *clips, NOISE_INIT, NOISE_TRAINED], self.arm_universe())
        return Figures({
            "loss_vs_steps": lambda: curves_figure(records, colors, "eval_loss", arms=batches, title="MLP: held-out loss per step",
                                                   y_title="cross-entropy (nats)"),
            "loss_vs_examples": lambda: look.examples_figure(records, colors, batches),
            "gradient_noise": lambda: look.noise_figure(records, colors, [NOISE_INIT, NOISE_TRAINED]),
            "rnn_loss": lambda: curves_figure(records, colors, "loss", arms=clips, log_y=True, title="RNN training loss",
                                              y_title="mean squared error"),
            "grad_norm": lambda: look.grad_norm_figure(records, colors, clips, config.clip_norm),
            "clip_coef": lambda: curves_figure(records, colors, "clip_coef", arms=clips, log_y=True, y_title="‖g_clipped‖ / ‖g‖",
                                               title="Clip coefficient: the factor clipping applied (1 = untouched)"),
            "lr_schedule": lambda: look.schedule_figure(records, colors, batches, clips),
        })
