"""Temperature in distillation: what does a teacher's softened output teach a small student?

A teacher MLP trained on plenty of data knows more than its argmax: how close each point
lies to the other classes. Divided by a temperature T before the softmax, its logits give
soft targets p = softmax(v/T) that spell this out; a small student that sees only a small
transfer set learns from them far more than from the hard labels alone (default run: 79%
test accuracy from 200 hard labels, 82% distilled at T=1, 88-89% at T = 4…20).

The soft loss KL(p ‖ q) has the exact gradient (q − p)/T with respect to the student's
logits, which for large T shrinks as 1/T² (Hinton et al. 2015). Multiplied by T², the soft
term keeps its weight against the hard-label term at any T; switch the T² factor off and,
at large T, the hard labels take over again.

Look at: student accuracy against T next to the hard-label line (it rises, then levels off:
no sharp optimum); the teacher's soft targets for one example flattening as T grows; the
soft-loss gradient at initialization, flat in T with T², falling as 1/T² without it.
"""
import math
from typing import Literal

import pandas as pd
import plotly.graph_objects as go
from pydantic import Field

from engines import distill
from engines.training import Diverged, log_every_for
from scenarios._distillation_figures import (CLASS_PREFIX, HARD, accuracy_figure, arm_of, curves_figure, grad_figure,
                                             loss_figure, per_arm, soft_targets_figure)
from scenarios.base import Event, Run, Scenario, ScenarioConfig
from scenarios.plotting import arm_colors

N_FEATURES, N_CLASSES, CLUSTERS_PER_CLASS = 16, 10, 3
TEACHER_DEPTH, TEACHER_BATCH, TEACHER_LR = 2, 256, 3e-3
TEST_SIZE = 4000


class Config(ScenarioConfig):
    temperatures: Literal["1,2,4,8,20", "1,2,4", "2,4,8,16", "1,3,10,30", "1,20", "4"] = Field(
        "1,2,4,8,20", description="Temperatures to distil at; one student arm each, beside the hard-label arm.")
    alpha: float = Field(0.9, ge=0.0, le=1.0, description="α: weight of the soft (teacher) loss; 1 − α goes to the hard labels.")
    t_squared: bool = Field(True, description="Multiply the soft loss by T², so its gradient does not shrink as 1/T².")
    transfer_size: int = Field(200, ge=20, le=5000, json_schema_extra={"scale": "log"},
                               description="Examples the student sees (with true labels and the teacher's logits).")
    student_width: int = Field(32, ge=4, le=256, description="Hidden units of the one-layer student.")
    student_steps: int = Field(200, ge=10, le=3000, description="Full-batch SGD steps (momentum 0.9) for each student.")
    lr: float = Field(0.2, ge=1e-3, le=1.0, json_schema_extra={"scale": "log"}, description="Student learning rate.")
    teacher_width: int = Field(128, ge=16, le=512, description="Units in each of the teacher's two hidden layers.")
    teacher_steps: int = Field(300, ge=10, le=3000, description="Teacher Adam steps, a fresh batch of 256 each.")
    noise_std: float = Field(0.7, ge=0.1, le=2.0,
                             description="Std of each Gaussian blob around its centre: how much the classes overlap.")
    example: int = Field(0, ge=0, le=99, description="Which test example's soft targets to draw.")


def temperatures_of(config: Config) -> list[float]:
    return [float(t) for t in config.temperatures.split(",")]


def arm_names(config: Config) -> list[str]:
    return [HARD] + [arm_of(t) for t in temperatures_of(config)]


class Distillation(Scenario):
    id = "distillation-temperature"
    title = "Temperature in distillation"
    order = 60
    question = "What does a teacher's temperature-softened output teach a small student that hard labels cannot?"
    terms = ("Knowledge distillation", "Soft targets", "Temperature", "KL divergence")
    formula = (r"\begin{aligned}L &= \alpha\,T^2\,\mathrm{KL}\big(\mathrm{softmax}(v/T)\,\|\,\mathrm{softmax}(z/T)\big)"
               r" + (1-\alpha)\,\mathrm{CE}(y, z)\\"
               r"\frac{\partial\,\mathrm{KL}}{\partial z_i} &= \frac{q_i - p_i}{T}"
               r"\;\approx\;\frac{z_i - v_i}{N\,T^2}\quad(T\ \text{large})\end{aligned}")
    Config = Config
    tiny = {"temperatures": "1,20", "teacher_steps": 20, "teacher_width": 32, "student_steps": 10}
    presets = {
        "the paper's setting (T² on, α = 0.9)": {"t_squared": True, "alpha": 0.9, "temperatures": "1,2,4,8,20"},
        "the failure: no T²": {"t_squared": False, "alpha": 0.9, "temperatures": "1,2,4,8,20"},
        "soft targets only (α = 1)": {"alpha": 1.0},
        "plenty of labels": {"transfer_size": 2000},
    }

    def execute(self, config: Config, run: Run) -> None:
        task = distill.MixtureTask(N_FEATURES, N_CLASSES, CLUSTERS_PER_CLASS, config.noise_std, config.seed)
        temperatures = temperatures_of(config)
        work = config.teacher_steps + (len(temperatures) + 1) * config.student_steps  # in steps, for progress

        # The teacher, trained once per run on a fresh batch every step.
        teacher = distill.mlp(N_FEATURES, config.teacher_width, TEACHER_DEPTH, N_CLASSES, seed=config.seed + 10)
        records = distill.train_teacher(teacher, task, config.teacher_steps, TEACHER_BATCH, TEACHER_LR,
                                        seed=config.seed + 1, log_every=log_every_for(config.teacher_steps, 50))
        if not self._drain(run, "teacher", records, done=0, work=work) or run.events:
            return  # stopped, or the teacher diverged: nothing to distil
        transfer = distill.labelled_split(teacher, task, config.transfer_size, seed=config.seed + 2)
        test = distill.labelled_split(teacher, task, TEST_SIZE, seed=config.seed + 3)
        teacher_accuracy = (test.teacher_logits.argmax(1) == test.labels).float().mean()
        run.add("teacher", config.teacher_steps - 1, {"teacher/test_accuracy": float(teacher_accuracy),
                                                      "example/label": float(test.labels[config.example])})
        for t in temperatures:  # the example's soft targets at each T, drawn before any student trains
            probs, entropy = distill.soft_targets(test.teacher_logits[config.example], t)
            run.add(arm_of(t), 0, {**{f"{CLASS_PREFIX}{c:02d}": p for c, p in enumerate(probs.tolist())},
                                   "soft_target/entropy_nats": float(entropy)})

        # The students: same initial weights, same transfer set; only the targets differ.
        log_every = log_every_for(config.student_steps, 50)
        for i, t in enumerate([None, *temperatures]):
            arm = HARD if t is None else arm_of(t)
            student = distill.mlp(N_FEATURES, config.student_width, 1, N_CLASSES, seed=config.seed + 20)
            records = distill.train_student(student, transfer, test, t, config.alpha, config.t_squared,
                                            config.lr, config.student_steps, log_every)
            done = config.teacher_steps + i * config.student_steps
            if not self._drain(run, arm, records, done=done, work=work, final=True):
                return

    @staticmethod
    def _drain(run: Run, arm: str, records, *, done: int, work: int, final: bool = False) -> bool:
        """Report one arm's records as they come; False if the run was stopped."""
        last = None
        for record in records:
            if run.should_stop():
                records.close()
                return False
            if isinstance(record, Diverged):
                run.event(Event(arm, record.step, "diverged", record.message))
                return True
            run.add(arm, record.step, record.metrics)
            last = record
            run.progress((done + record.step + 1) / work)
        if final and last is not None:
            run.add(arm, last.step, {"final/test_accuracy": last.metrics["test_accuracy"]})
        return True

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        temperatures, final = temperatures_of(config), per_arm(frame, "final/test_accuracy")
        with_t2, without_t2 = per_arm(frame, "grad_norm/soft_with_t2", at=0), per_arm(frame, "grad_norm/soft_without_t2", at=0)
        entropy, label = per_arm(frame, "soft_target/entropy_nats", at=0), per_arm(frame, "example/label").get("teacher")
        by_t = {f"{t:g}": final[arm_of(t)] for t in temperatures if arm_of(t) in final}
        best = max(by_t, key=by_t.get) if by_t else None
        ends = [t for t in temperatures if arm_of(t) in with_t2 and arm_of(t) in without_t2]  # step 0: one init for all
        measured = [with_t2[arm_of(t)] for t in ends]
        spread = len(ends) > 1 and min(measured) > 0 and without_t2[arm_of(ends[-1])] > 0
        return {
            "teacher_accuracy": per_arm(frame, "teacher/test_accuracy").get("teacher"),
            "hard_accuracy": final.get(HARD),
            "accuracy_by_T": by_t,
            "best_T": best,
            "near_best_T": [t for t, acc in by_t.items() if acc >= by_t[best] - 0.01] if best else [],
            "entropy_by_T": {f"{t:g}": entropy[arm_of(t)] for t in temperatures if arm_of(t) in entropy},
            "grad_t_range": [ends[0], ends[-1]] if spread else None,
            "grad_with_t2_spread": max(measured) / min(measured) if spread else None,
            "grad_without_t2_drop": without_t2[arm_of(ends[0])] / without_t2[arm_of(ends[-1])] if spread else None,
            "example_label": int(label) if label is not None else None,
        }

    def explain(self, summary: dict, config: Config) -> str:
        teacher, hard, by_t = summary["teacher_accuracy"], summary["hard_accuracy"], summary["accuracy_by_T"]
        if teacher is None:
            return "Run to train the teacher, then one student per arm on the same small transfer set."
        lines = [f"The teacher reaches **{teacher:.1%}** on {TEST_SIZE} held-out examples."]
        if hard is not None:
            lines.append(f"From {config.transfer_size} transfer examples, the student trained on hard labels alone "
                         f"reaches **{hard:.1%}**.")
        if by_t:
            scaling = "soft loss × T²" if config.t_squared else "soft loss *without* T²"
            listing = ", ".join(f"T={t} {acc:.1%}" for t, acc in by_t.items())
            line = f"Distilled (α = {config.alpha:g}, {scaling}): {listing}."
            if hard is not None:
                wins = sum(acc > hard for acc in by_t.values())
                best, best_acc = summary["best_T"], by_t[summary["best_T"]]
                gain = 100 * (best_acc - hard)
                line += (f" {wins} of {len(by_t)} temperatures beat hard labels; the best, T={best}, by {gain:+.1f} points."
                         if gain > 0 else f" None beats hard labels; the best, T={best}, is {-gain:.1f} points below.")
                if teacher < hard:
                    line += " The teacher is worse than the hard-label student: it has little to teach (more teacher steps?)."
            lines.append(line)
            lines.append(t_shape(by_t, summary["near_best_T"], [f"{t:g}" for t in temperatures_of(config)]))
        if summary["grad_with_t2_spread"] is not None:
            low, high = summary["grad_t_range"]
            spread, drop = summary["grad_with_t2_spread"], summary["grad_without_t2_drop"]
            lines.append(f"At initialization the soft term's gradient norm changes only ×{spread:.1f} "
                         f"across T = {low:g}…{high:g} with T², but falls ×{drop:.0f} without it "
                         f"((T_max/T_min)² = {(high / low) ** 2:.0f}): the 1/T² of Hinton et al.")
            if not config.t_squared and config.alpha < 1 and hard is not None and f"{high:g}" in by_t:
                gap = 100 * (by_t[f"{high:g}"] - hard)
                lines.append(f"Without T², the soft term's pull shrinks as 1/T² against the hard-label term "
                             f"(weight {1 - config.alpha:g}): T={high:g} ends {gap:+.1f} points from hard labels"
                             + (" — back on the hard-label line." if abs(gap) < 1.5 else "."))
        entropy = summary["entropy_by_T"]
        if len(entropy) > 1:
            (t_low, h_low), (t_high, h_high) = list(entropy.items())[0], list(entropy.items())[-1]
            lines.append(f"Example {config.example} (true class {summary['example_label']}): the teacher's soft targets "
                         f"have entropy {h_low:.2f} nats at T={t_low} and {h_high:.2f} at T={t_high} "
                         f"(uniform: ln {N_CLASSES} = {math.log(N_CLASSES):.2f}).")
        return "\n".join("- " + line for line in lines if line)

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> dict[str, go.Figure]:
        colors, temperatures = arm_colors(arm_names(config)), temperatures_of(config)
        return {
            "accuracy_vs_T": accuracy_figure(frame, temperatures, colors, config.alpha, config.t_squared,
                                             config.student_steps),
            "loss": loss_figure(frame, colors),
            "test_accuracy": curves_figure(frame, colors, "test_accuracy", "Student test accuracy during training",
                                           "test accuracy (%)", scale=100),
            "soft_targets": soft_targets_figure(frame, temperatures, colors, config.example, N_CLASSES),
            "soft_grad_norm": grad_figure(frame, temperatures, colors),
        }


def t_shape(by_t: dict[str, float], near_best: list[str], sweep: list[str]) -> str:
    """How accuracy depends on T, read from the run: flat, a plateau, or a peak (never promised)."""
    if len(by_t) < 3:
        return ""
    spread = 100 * (max(by_t.values()) - min(by_t.values()))
    if spread <= 1.5:
        return f"Accuracy barely depends on T (all within {spread:.1f} points): no optimum to read off."
    if len(near_best) > 1:
        trailing = [t for t in by_t if t not in near_best]
        return (f"T = {', '.join(near_best)} are within 1 point of the best: no sharp optimum"
                + (f"; T = {', '.join(trailing)} trail by up to {spread:.1f} points." if trailing else "."))
    best = near_best[0]
    edge = " — at the edge of the sweep, so the best T may lie beyond it" if best in (sweep[0], sweep[-1]) else ""
    runner_up = sorted(by_t.values())[-2]
    return f"T={best} leads the next best by {100 * (by_t[best] - runner_up):.1f} points{edge}."
