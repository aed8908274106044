"""Memory tricks: what does backward keep, and how do checkpointing, accumulation and checkpoints trade for it?

Backward needs tensors from forward: each Linear its input, each tanh its output. Counted
with `torch.autograd.graph.saved_tensors_hooks`, a stack of n equal layers holds (n + 1)·a
bytes when forward ends (a = batch × width × 4). Activation checkpointing
(`torch.utils.checkpoint`, Chen et al. 2016) cuts the stack into k segments, keeps only each
segment's input, and recomputes a segment's forward during backward: the peak is (k + n/k)·a,
smallest at k = √n, for about one extra forward pass (the step time is measured, on this
machine, as it is).

Gradient accumulation runs K micro-batches of B/K with each loss divided by K before one
optimizer step. For a loss that is a mean over examples the summed gradient is the full
batch's, to float rounding; without the ÷K it is K times too large, and BatchNorm, which
normalizes each micro-batch with its own mean and variance, gives another gradient.

A checkpoint file lets a run stop and go on: `torch.save` the model's, Adam's and the cosine
scheduler's state dicts and the batch generator's RNG state to a temporary file of our own,
build everything afresh, `torch.load(..., weights_only=True)`, and the resumed loss curve is
the uninterrupted one bit for bit; leave one part out and it is not.

Look at the two byte curves against the model's crosses, the accumulation errors (1e-7 is
float rounding), and the resumed curve lying inside the uninterrupted one.
"""
from typing import Literal

import pandas as pd
from pydantic import Field, ValidationInfo, field_validator

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, in_turn, shown_by, together
from scenarios.explanation import Explanation, join, say, trajectory
from scenarios.memory_tricks import claims as said, figures as look
from scenarios.memory_tricks.figures import ACCUMULATION, CHECKPOINTING, RESUMED, UNINTERRUPTED
from scenarios.plotting import Figures, arm_colors
from scenarios.records import Records
from scenarios.words import count

Dropped = Literal["optimizer state", "scheduler state", "RNG state"]
PART_OF = {"optimizer state": "optimizer", "scheduler state": "scheduler", "RNG state": "rng"}
MIN_COMPARED_STEPS = 2  # a loss is taken before its step's update: one step alone shows nothing left out


def without(dropped: str) -> str:
    return f"resumed without the {dropped}"


class Config(ScenarioConfig):
    layers: int = Field(16, ge=2, le=64, description="Tanh layers in the checkpointed stack (n); k runs over its divisors.")
    width: int = Field(128, ge=16, le=512, description="Units per layer: a layer's output is batch × width floats.")
    batch: int = Field(64, ge=8, le=256, description="Examples per batch, for checkpointing and for accumulation.")
    timing_repeats: int = Field(5, ge=1, le=20, description="Timed steps per k (the median is drawn).")
    steps: int = Field(200, ge=10, le=2000, description="Adam steps (batch 32, cosine decay) of the checkpoint/resume runs.")
    resume_fraction: float = Field(0.5, ge=0.05, le=0.95, description="Where the run is saved and resumed, as a share of steps "
                                 "(at least 2 steps must be left after it).")
    dropped: Dropped = Field("optimizer state", description="What the third run leaves out when it resumes.")
    lr: float = Field(1e-2, ge=1e-4, le=1e-1, json_schema_extra={"scale": "log"}, description="Adam's peak learning rate.")

    @field_validator("resume_fraction")
    @classmethod
    def _leaves_steps_to_compare(cls, fraction: float, info: ValidationInfo) -> float:
        """A missing part shows only in steps after the resume: at least two must be left."""
        steps = info.data.get("steps")
        if steps is not None and steps - resume_at(steps, fraction) < MIN_COMPARED_STEPS:
            at = resume_at(steps, fraction)
            raise ValueError(f"with steps={steps} the run resumes at step {at} and leaves {count(steps - at, 'step')} to "
                             f"compare; at least {MIN_COMPARED_STEPS} are needed (lower resume_fraction or raise steps)")
        return fraction


def resume_at(steps: int, fraction: float) -> int:
    return min(steps - 1, max(1, round(fraction * steps)))


def resume_step(config: Config) -> int:
    return resume_at(config.steps, config.resume_fraction)


def arm_names(config: Config) -> list[str]:
    return [UNINTERRUPTED, RESUMED, without(config.dropped)]


class MemoryTricks(Scenario):
    id = "memory-tricks"
    title = "Memory tricks: activation checkpointing, gradient accumulation, save and resume"
    order = 65
    topic = "Optimization"
    question = "What does backward keep from forward, and what do activation checkpointing, gradient accumulation and checkpoint files trade for it?"
    terms = {
        "Checkpoint": shown_by("resume_gap", "loss", "checkpoint_bytes/", arm=RESUMED,
                               how="model, Adam, scheduler and RNG state saved and loaded (weights_only=True): the same curve"),
        "Activation checkpointing": shown_by("checkpoint_memory", "saved_peak_bytes", "saved_after_forward_bytes",
                                             arm=CHECKPOINTING, how="bytes autograd holds, counted by saved_tensors_hooks, vs k"),
        "Gradient accumulation": shown_by("accumulation", "rel_diff/", arm=ACCUMULATION,
                                          how="K micro-batches with loss ÷ K against one full batch"),
        "Batch normalization": shown_by("accumulation", "rel_diff/BatchNorm, ÷ K", arm=ACCUMULATION,
                                        how="per-micro-batch statistics: the accumulated gradient is another one"),
        "Optimizer": shown_by("resume_loss", "loss", arm="without the optimizer state",
                              how="Adam's moments and its lr are part of the run: resumed without them, the curve leaves"),
        "Learning rate schedule": shown_by("resume_lr", "lr", arm="scheduler", when={"dropped": "scheduler state"},
                                           how="the cosine schedule, and a fresh scheduler that does not know its place"),
    }
    formula = (r"\begin{aligned}\text{saved at the peak} &\approx \Big(k + \frac{n}{k}\Big)\,a,\quad"
               r"\min_k \text{ at } k=\sqrt n:\ 2\sqrt n\,a\qquad(a = B\cdot d\cdot 4\ \text{bytes})\\"
               r"\sum_{j=1}^{K}\nabla\frac{L(\text{micro-batch}_j)}{K} &= \nabla L(\text{batch})"
               r"\quad\text{when } L \text{ is a mean over examples}\end{aligned}")
    Config = Config
    tiny = {"layers": 4, "width": 32, "batch": 16, "timing_repeats": 1, "steps": 10}
    presets = {
        "the failure: resume without the optimizer state": {"dropped": "optimizer state"},
        "the fix (all four parts) beside a missing scheduler state": {"dropped": "scheduler state"},
        "resume without the RNG state": {"dropped": "RNG state"},
        "Chen et al. 2016: 64 layers": {"layers": 64, "width": 64},
    }

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"resume_steps": 0.000508, "run": 0.0274, "sweep_layers": 0.000124, "sweep_macs": 1.04e-10}
    rates_reference = 0.1397  # the reference workload's CPU s beside the fit
    timed = ({"layers": 32, "width": 256, "batch": 128, "timing_repeats": 3}, {"steps": 600, "timing_repeats": 1},
             {"width": 512, "layers": 8, "batch": 256, "timing_repeats": 2, "steps": 50})

    def work(self, config: Config) -> Work:
        """The checkpointing sweep: for no checkpointing and every divisor k of `layers`, one counted step
        and `timing_repeats` timed ones through `layers` Linear layers of `width` (k segments recompute
        forward); the accumulation check; three small runs (every step logged) for the resume."""
        divisors = sum(config.layers % k == 0 for k in range(1, config.layers + 1))
        sweep_steps = (divisors + 1) * (config.timing_repeats + 1)
        return Work({"sweep_steps": sweep_steps, "sweep_layers": sweep_steps * config.layers,
                     "sweep_macs": sweep_steps * config.layers * config.batch * config.width ** 2,
                     "resume_steps": 3 * config.steps},
                    floats=config.layers * (2 * config.width ** 2 + 3 * config.batch * config.width))

    def phases(self, config: Config):
        from engines.distributed.activation_memory import accumulation_sweep, checkpoint_sweep
        from engines.distributed.resume import PARTS, resumed, uninterrupted
        divisors = sum(config.layers % k == 0 for k in range(1, config.layers + 1)) + 1
        sweeps = in_turn(Arm(CHECKPOINTING, checkpoint_sweep(config.layers, config.width, config.batch,
                                                             config.timing_repeats, config.seed), divisors,
                             cost=2 + config.timing_repeats),
                         Arm(ACCUMULATION, accumulation_sweep(config.batch, 32, config.seed), 5))
        at, common = resume_step(config), (config.seed, config.steps, config.lr)
        parts = tuple(p for p in PARTS if p != PART_OF[config.dropped])
        return sweeps + together(Arm(UNINTERRUPTED, uninterrupted(*common), config.steps, cost=0.1),
                                 Arm(RESUMED, resumed(*common, at), config.steps, cost=0.1),
                                 Arm(without(config.dropped), resumed(*common, at, parts), config.steps, cost=0.1))

    def arm_universe(self) -> list[str]:
        return [UNINTERRUPTED, RESUMED, *(without(d) for d in Dropped.__args__), CHECKPOINTING, ACCUMULATION]

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records = Records(frame)
        k, peaks = look.sweep(records, "saved_peak_bytes")
        best = float(k[peaks.argmin()]) if len(k) else None
        gaps = {arm: said.loss_gap(arm)(records) for arm in arm_names(config)[1:]}
        headline = {"peak saved bytes, no checkpointing": look.none_value(records, "saved_peak_bytes"),
                    "peak saved bytes, best k": float(peaks.min()) if len(k) else None,
                    "resumed: largest |Δ loss|": gaps[RESUMED],
                    "resumed without a part: largest |Δ loss|": gaps[without(config.dropped)]}
        return {"headline": headline, "best_segments": best, "loss_gap": gaps,
                "accumulation_rel_diff": {name: float(v.max()) if len(v := records.values(ACCUMULATION, f"rel_diff/{name}"))
                                          else None for name in look.VARIANTS}}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records = Records(frame)
        details = [said.contents_sentence(records, RESUMED), said.lr_sentence(records, arm_names(config)),
                   said.peak_sentence(records, config.layers), said.accumulation_sentence(records)]
        resumes = [s for arm in arm_names(config)[1:] if (s := said.resume_sentence(records, arm)) is not None]
        if resumes:
            takeaway = join(*resumes)
        elif records.series(UNINTERRUPTED, "loss").size:
            takeaway = say("{}: loss {}", UNINTERRUPTED, trajectory(records, UNINTERRUPTED))
        else:
            details = [d for d in details if d is not None]
            if not details:
                return Explanation(waiting="Run to count saved bytes per k, compare accumulated gradients, and resume a run.")
            takeaway = details.pop(0)
        return Explanation(takeaway, tuple(d for d in details if d is not None))

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records, arms = Records(frame), arm_names(config)
        colors = arm_colors(arms, self.arm_universe())
        return Figures({
            "resume_loss": lambda: look.resume_figure(records, colors, arms, "loss", "Training loss: uninterrupted and resumed runs", "cross-entropy (nats)", log_y=False),
            "resume_gap": lambda: look.gap_figure(records, colors, arms),
            "checkpoint_contents": lambda: look.contents_figure(records, RESUMED),
            "checkpoint_memory": lambda: look.memory_figure(records, config.layers),
            "checkpoint_time": lambda: look.time_figure(records),
            "accumulation": lambda: look.accumulation_figure(records),
            "resume_lr": lambda: look.resume_figure(records, colors, arms, "lr", "Learning rate per step (cosine decay)",
                                                    "learning rate", log_y=False),
        })
