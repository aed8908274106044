"""Overfitting, early stopping, dropout and weight decay: when does fitting the training set stop helping?

An MLP with thousands of weights can memorize a few hundred examples outright, noise and all
(Zhang et al. 2017). Here a fifth of the labels are flipped at random, so what is left to
learn after the real pattern is noise: the training loss keeps falling toward 0, while the
loss on fresh examples — the validation set — falls, bottoms out and climbs again. The
difference between the two is the generalization gap.

Three cures, as arms on the same data and initial weights. Early stopping (Prechelt 1998)
keeps the weights of the best validation step; with a patience of P steps it stops once P
steps pass without a new best. Dropout (Srivastava et al. 2014) zeroes each hidden unit with
probability p in training and scales the survivors by 1/(1 − p), so every unit's expected
output is the same as in evaluation, when nothing is dropped: the net cannot lean on any one
unit. Weight decay pulls every weight toward 0 (Krogh & Hertz 1992), either as AdamW's
decoupled p ← p(1 − lr·λ) or as an L2 term ½λ‖W‖² in the loss. More data is the fourth:
a sweep over the training-set size draws the final gap against n.

Look at the validation curve's U against the falling training curve, the diamond where early
stopping would have restored the weights, and the test loss of those weights against the
final ones (the test set was never used to choose anything).
"""
from typing import Literal

import pandas as pd
from pydantic import Field

from engines.loop import arms_memory
from scenarios.base import Arm, Machine, Scenario, ScenarioConfig, Work, shown_by, together
from scenarios.cost import logs
from scenarios.explanation import Explanation
from scenarios.generalization import figures as look
from scenarios.generalization.figures import BOTH, DECAY, DROPOUT, MAIN_ARMS, NONE, sweep_label
from scenarios.plotting import Figures, arm_colors, curves_figure
from scenarios.records import Records
from scenarios.seeded import named

Sweep = Literal["50,200,1000,5000", "50,100,200,500,1000,2000,5000", "100,1000", "none"]
DecayKind = Literal["AdamW (decoupled)", "L2 in the loss"]


class Config(ScenarioConfig):
    n: int = Field(200, title="training examples n", ge=50, le=5000, json_schema_extra={"scale": "log"},
                   description="Training examples. Validation and test sets: 1000 each, same distribution.")
    label_noise: float = Field(0.2, ge=0.0, le=0.75, description="Share of labels replaced by another class (0.75: random).")
    width: int = Field(64, ge=8, le=512, json_schema_extra={"scale": "log"}, description="Units per hidden layer (two).")
    dropout: float = Field(0.5, ge=0.05, le=0.8, description="p of the dropout arms: each hidden unit dropped with p.")
    decay_kind: DecayKind = Field("AdamW (decoupled)",
                                  description="AdamW's p ← p(1 − lr·λ), or ½λ‖W‖² added to the loss (weights only).")
    weight_decay: float = Field(1.0, ge=0.0, le=3.0,
                                description="λ of the weight-decay arms. AdamW at lr 2e-3 needs ~1; L2 in the loss ~0.01.")
    lr: float = Field(2e-3, ge=1e-4, le=0.03, json_schema_extra={"scale": "log"}, description="AdamW's learning rate.")
    steps: int = Field(200, ge=10, le=3000, description="Steps of AdamW on batches of 128 (reshuffled epochs).")
    patience: int = Field(50, ge=5, le=1000, description="Early stopping: steps without a new best validation loss.")
    sweep: Sweep = Field("50,200,1000,5000", description="Training-set sizes for the gap-vs-n sweep (no regularization).")


def regularizers_of(config: Config) -> dict[str, tuple[float, float]]:
    """Arm -> (dropout p, weight decay λ)."""
    return {NONE: (0.0, 0.0), DROPOUT: (config.dropout, 0.0), DECAY: (0.0, config.weight_decay),
            BOTH: (config.dropout, config.weight_decay)}


def sweep_of(config: Config) -> dict[int, str]:
    """n -> the arm that trains at n without regularization (the main arm at the config's own n)."""
    sizes = [] if config.sweep == "none" else [int(n) for n in config.sweep.split(",")]
    return {n: NONE if n == config.n else sweep_label(n) for n in sorted({*sizes, config.n})}


class Generalization(Scenario):
    id = "generalization"
    title = "Overfitting, early stopping, dropout, weight decay"
    order = 15
    counted = ("train_loss",)  # its final/ and restored/ rows sit one step past the last training step
    arms_note = ("The four regularization arms train together as one batched model (per-arm dropout and decay), and "
                 "the training-set-size sweep as one per batch size: each arm's records are those it gives trained "
                 "alone, bit for bit.")
    batches_seeds = True  # repeat over seeds: every seed's arms in the same batched models
    topic = "Generalization"
    question = "When does fitting the training set stop helping, and what do early stopping, dropout and weight decay buy?"
    terms = {
        "Overfitting": shown_by("loss", "train_loss", "val_loss", arm=NONE,
                                how="training loss falls toward 0 while validation loss turns and climbs"),
        "Early stopping": shown_by("early_stopping", "early_stop/best_step", "restored/test_loss", "final/test_loss",
                                   how="the best validation step's weights, restored, against the final ones"),
        "Dropout": shown_by("gap", "gap", "dropout/train_mean", "dropout/eval_mean", arm=DROPOUT,
                            how="a smaller gap; train-mode mean = eval-mode mean through the 1/(1 − p) scaling"),
        "Weight decay / L2 regularization": shown_by("gap", "gap", arm=DECAY, how="decoupled (AdamW) or L2 in the loss"),
        "AdamW": shown_by("gap", "gap", arm=DECAY, when={"decay_kind": "AdamW (decoupled)"},
                          how="decoupled decay: p ← p(1 − lr·λ) beside the Adam step"),
        "Cross-entropy": shown_by("loss", "train_loss", "val_loss", how="both curves are cross-entropy in eval mode"),
    }
    methods = {
        "Dropout": shown_by("gap", "gap", "dropout/train_mean", "dropout/eval_mean", arm=DROPOUT,
                            how="random units zeroed in training: a smaller train/validation gap"),
        "Cross-entropy loss": shown_by("loss", "train_loss", "val_loss", partial=True,
                                       how="cross-entropy of a classifier, not of the next token"),
    }
    formula = (r"\begin{aligned}\text{gap} &= L_{\text{val}} - L_{\text{train}}\qquad"
               r"\text{dropout: } \tilde h = \frac{m \odot h}{1-p},\ m_i \sim \text{Bernoulli}(1-p)"
               r"\ \Rightarrow\ \mathbb{E}[\tilde h] = h\\"
               r"\text{AdamW: } \theta &\leftarrow \theta(1-\eta\lambda) - \eta\,\frac{\hat m}{\sqrt{\hat v}+\epsilon}"
               r"\qquad \text{L2: } L + \tfrac{\lambda}{2}\|W\|^2\end{aligned}")
    Config = Config
    tiny = {"n": 50, "width": 16, "steps": 12, "patience": 5, "sweep": "100,1000"}
    presets = {
        "the failure: 512 units on 200 noisy examples": {"width": 512},
        "the fix: more data (n = 5000)": {"n": 5000},
        "L2 in the loss (λ = 0.01)": {"decay_kind": "L2 in the loss", "weight_decay": 0.01},
        "clean labels: less to overfit": {"label_noise": 0.0},
        "Zhang et al. 2017: random labels": {"label_noise": 0.75},
    }

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"logs": 0.00103, "macs": 3.42e-11, "steps": 0.000245}
    rates_reference = 0.1347  # the reference workload's CPU s beside the fit
    timed = ({"width": 256, "steps": 40}, {"n": 2000, "steps": 300, "sweep": "none"}, {"steps": 200, "sweep": "100,1000"})

    def work(self, config: Config) -> Work:
        """Four regularizer arms (60 logs) and the sweep's arms (10 logs), each step a batch of ≤ 128; every
        log scores the arm's training set and the 1000 validation examples in eval mode."""
        sizes = [config.n] * 4 + [n for n, arm in sweep_of(config).items() if arm != NONE]
        example_macs = config.width ** 2 + 14 * config.width  # 10 → width → width → 4
        steps, main_logs, sweep_logs = config.steps + 1, logs(config.steps, 60), logs(config.steps, 10)
        logged = [main_logs] * 4 + [sweep_logs] * (len(sizes) - 4)
        return Work({"steps": steps * len(sizes), "logs": sum(logged),
                     "macs": example_macs * sum(3 * steps * min(128, n) + count * (n + 1000)
                                                for n, count in zip(sizes, logged))},
                    floats=len(sizes) * 5 * example_macs + (max(sizes) + 2000) * (10 + 2 * config.width))

    def phases(self, config: Config, batched: bool = True):
        """The four regularization arms, then the training-set-size sweep. The four share their
        architecture and train as one batched model (`batched=False`: one model each, side by side,
        the reference the tests compare with); the sweep's arms each have a training set of their own."""
        if batched:
            return self.seed_phases(config, [config.seed])
        from engines.loop.training import log_every_for
        from engines.supervised.generalization import NoisyTeacherTask, generalization_arm
        setup = dict(width=config.width, decoupled=config.decay_kind == "AdamW (decoupled)", lr=config.lr,
                     steps=config.steps, patience=config.patience, seed=config.seed)
        task = NoisyTeacherTask(config.n, config.label_noise, config.seed)
        main = [Arm(arm, generalization_arm(task, dropout=p, weight_decay=wd, log_every=log_every_for(config.steps, 60),
                                            **setup), config.steps + 1) for arm, (p, wd) in regularizers_of(config).items()]
        sweep = [Arm(arm, generalization_arm(NoisyTeacherTask(n, config.label_noise, config.seed), dropout=0.0,
                                             weight_decay=0.0, log_every=log_every_for(config.steps, 10), **setup),
                     config.steps + 1, cost=0.7) for n, arm in sweep_of(config).items() if arm != NONE]
        return together(*main) + together(*sweep)

    def seed_phases(self, config: Config, seeds: list[int]):
        """The batched phases for every seed at once: the four arms of every seed as one model, the sweep's
        arms of every seed as one model per batch size (a training set smaller than a batch is its own batch)."""
        from engines.loop.batched import arm_cost
        from engines.loop.training import log_every_for
        from engines.supervised.generalization import BATCH, NoisyTeacherTask
        from engines.supervised.generalization_arms import generalization_arms
        setup = dict(width=config.width, decoupled=config.decay_kind == "AdamW (decoupled)", lr=config.lr,
                     steps=config.steps, patience=config.patience)
        tasks = {seed: NoisyTeacherTask(config.n, config.label_noise, seed) for seed in seeds}
        regularizers = regularizers_of(config)
        dropouts, decays = (list(values) * len(seeds) for values in zip(*regularizers.values()))
        main = Arm("regularization arms", generalization_arms(
            named(list(regularizers), seeds), [tasks[s] for s in seeds for _ in regularizers], dropouts=dropouts,
            weight_decays=decays, seed=[s for s in seeds for _ in regularizers], log_every=log_every_for(config.steps, 60),
            **setup), config.steps + 1, arm_cost(len(dropouts)))
        by_batch: dict[int, list[int]] = {}
        for n, arm in sweep_of(config).items():
            if arm != NONE:
                by_batch.setdefault(min(n, BATCH), []).append(n)
        sweep = [Arm(f"n sweep, batch {batch}", generalization_arms(
            named([sweep_of(config)[n] for n in group], seeds),
            [NoisyTeacherTask(n, config.label_noise, s) for s in seeds for n in group],
            dropouts=[0.0] * len(group) * len(seeds), weight_decays=[0.0] * len(group) * len(seeds),
            seed=[s for s in seeds for _ in group], log_every=log_every_for(config.steps, 10), **setup),
                     config.steps + 1, cost=0.7 * arm_cost(len(group) * len(seeds))) for batch, group in by_batch.items()]
        return together(main) + together(*sweep)

    def batched_bytes(self, config: Config) -> float:
        """The four regularization arms as one batched MLP (10 → width → width → 4, AdamW) and its largest
        pass: the training set or the 1000 validation examples, two hidden layers and the logits."""
        weights = arms_memory.linear_weights(10, config.width, config.width, 4)
        return arms_memory.batched_bytes(len(MAIN_ARMS), weights, 2, max(config.n, 1000) * (2 * config.width + 4))

    def refusal(self, config: Config, machine: Machine) -> str | None:
        return arms_memory.refusal(f"width={config.width}, n={config.n}", len(MAIN_ARMS), self.batched_bytes(config),
                                   machine.memory_limit_bytes,
                                   machine.memory_basis(arms_memory.FILL))

    def arm_universe(self) -> list[str]:
        sizes = sorted({int(n) for choice in Sweep.__args__ if choice != "none" for n in choice.split(",")})
        return [*MAIN_ARMS, *(sweep_label(n) for n in sizes)]

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records, end = Records(frame), config.steps
        val = records.series(NONE, "val_loss")
        arms = {arm: {"final_gap": records.last(arm, "gap"), "final_val_loss": records.last(arm, "val_loss"),
                      "final_train_loss": records.last(arm, "train_loss"), "diverged_at": records.diverged_at(arm),
                      **{k: records.at(arm, k, end) for k in ("early_stop/best_step", "early_stop/stopped_at",
                                                              "restored/test_loss", "final/test_loss",
                                                              "restored/test_accuracy", "final/test_accuracy")}}
                for arm in MAIN_ARMS}
        headline = {"final gap (no regularization)": arms[NONE]["final_gap"], "final gap (dropout)": arms[DROPOUT]["final_gap"],
                    "final gap (weight decay)": arms[DECAY]["final_gap"],
                    "test loss, restored − final (no regularization)":
                        arms[NONE]["restored/test_loss"] - arms[NONE]["final/test_loss"]
                        if None not in (arms[NONE]["restored/test_loss"], arms[NONE]["final/test_loss"]) else None}
        return {"headline": headline, "arms": arms,
                "val_min_step": int(val.idxmin()) if len(val) else None, "val_min": float(val.min()) if len(val) else None,
                "gap_by_n": {n: records.last(arm, "gap") for n, arm in sweep_of(config).items()}}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records = Records(frame)
        shown = [arm for arm in MAIN_ARMS if records.has("val_loss", arm)]
        if not shown:
            return Explanation(waiting="Run to train the four arms on the same small noisy training set.")
        lead = look.u_sentence(records, NONE) if NONE in shown else look.u_sentence(records, shown[0])
        details = [look.gap_sentence(records, shown),
                   look.stopping_sentence(records, shown, config.steps, config.patience),
                   look.sweep_sentence(records, sweep_of(config)), look.dropout_sentence(records, DROPOUT)]
        return Explanation(lead, tuple(sentence for sentence in details if sentence is not None))

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records = Records(frame)
        points = sweep_of(config)
        colors = arm_colors([*MAIN_ARMS, *points.values()], self.arm_universe())
        return Figures({
            "loss": lambda: look.loss_figure(records, colors, MAIN_ARMS),
            "gap": lambda: curves_figure(records, colors, "gap", arms=MAIN_ARMS, log_y=False, y_title="validation − train loss",
                                         title="Generalization gap"),
            "gap_vs_n": lambda: look.gap_vs_n_figure(records, colors, points),
            "early_stopping": lambda: look.early_stopping_figure(records, MAIN_ARMS),
            "val_accuracy": lambda: curves_figure(records, colors, "val_accuracy", arms=MAIN_ARMS, log_y=False,
                                                  title="Validation accuracy", y_title="accuracy (eval mode)"),
        })
