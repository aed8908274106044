"""Temperature in distillation: what does a teacher's softened output teach a small student?

A teacher MLP trained on plenty of data knows more than its argmax: how close each point
lies to the other classes. Divided by a temperature T before the softmax, its logits give
soft targets p = softmax(v/T) that spell this out; a small student that sees only a small
transfer set learns from them more than from hard labels alone — and depends on T only weakly.

The soft loss KL(p ‖ q) has the exact gradient (q − p)/T with respect to the student's
logits, which for large T shrinks as 1/T² (Hinton et al. 2015). Multiplied by T², the soft
term keeps its weight against the hard-label term at any T; without T², at large T, the
hard labels take over again.

Look at: accuracy against T beside the hard-label line; soft targets flattening as T grows;
the soft-loss gradient at initialization, flat in T with T², falling as 1/T² without it.
"""
import functools
from typing import Literal

import pandas as pd
from pydantic import Field

from engines.loop import arms_memory
from scenarios.base import Arm, Machine, Scenario, ScenarioConfig, Work, in_turn, shown_by, view_field
from scenarios.cost import logs
from scenarios.claims import DivergedAt
from scenarios.distillation import figures as look
from scenarios.distillation.figures import HARD, TEACHER, arm_of, percent
from scenarios.explanation import Explanation, say
from scenarios.plotting import Figures, arm_colors, curves_figure
from scenarios.records import Records

N_FEATURES, N_CLASSES, CLUSTERS_PER_CLASS = 16, 10, 3
TEACHER_DEPTH, TEACHER_BATCH, TEACHER_LR = 2, 256, 3e-3
TEST_SIZE, EXAMPLES = 4000, 100  # soft targets are recorded for the first EXAMPLES test examples
Sweep = Literal["1,2,4,8,20", "1,2,4", "2,4,8,16", "1,3,10,30", "1,20", "4"]


class Config(ScenarioConfig):
    temperatures: Sweep = Field(
        "1,2,4,8,20", description="Temperatures to distil at; one student arm each, beside the hard-label arm.")
    alpha: float = Field(0.9, ge=0.0, le=1.0, description="α: weight of the soft (teacher) loss; 1 − α goes to the hard labels.")
    t_squared: bool = Field(True, title="soft loss × T²", description="Multiply the soft loss by T², so its gradient does not shrink as 1/T².")
    transfer_size: int = Field(200, ge=20, le=5000, json_schema_extra={"scale": "log"},
                               description="Examples the student sees (with true labels and the teacher's logits).")
    student_width: int = Field(32, ge=4, le=256, description="Hidden units of the one-layer student.")
    student_steps: int = Field(200, ge=10, le=3000, description="Full-batch SGD steps (momentum 0.9) for each student.")
    lr: float = Field(0.2, ge=1e-3, le=1.0, json_schema_extra={"scale": "log"}, description="Student learning rate.")
    teacher_width: int = Field(128, ge=16, le=512, description="Units in each of the teacher's two hidden layers.")
    teacher_steps: int = Field(300, ge=10, le=3000, description="Teacher Adam steps, a fresh batch of 256 each.")
    noise_std: float = Field(0.7, ge=0.1, le=2.0, description="Std of each Gaussian blob: how much the classes overlap.")
    example: int = view_field(0, ge=0, le=EXAMPLES - 1, description="Which test example's soft targets to draw.")


def temperatures_of(config: Config) -> list[float]:
    return [float(t) for t in config.temperatures.split(",")]


def arm_names(config: Config) -> list[str]:
    return [HARD] + [arm_of(t) for t in temperatures_of(config)]


def teacher_arm(config: Config, built: dict):
    """The teacher (a fresh batch every step), then the transfer and test sets it labels, then
    the soft targets of the first EXAMPLES test examples at each T (as each T arm's step 0)."""
    from engines.loop.records import Diverged, StepRecord
    from engines.loop.training import log_every_for
    from engines.supervised import distill
    task = distill.MixtureTask(N_FEATURES, N_CLASSES, CLUSTERS_PER_CLASS, config.noise_std, config.seed)
    teacher = distill.mlp(N_FEATURES, config.teacher_width, TEACHER_DEPTH, N_CLASSES, seed=config.seed + 10)
    for record in distill.train_teacher(teacher, task, config.teacher_steps, TEACHER_BATCH, TEACHER_LR,
                                        seed=config.seed + 1, log_every=log_every_for(config.teacher_steps, 50)):
        yield record
        if isinstance(record, Diverged):
            return
    built["transfer"] = distill.labelled_split(teacher, task, config.transfer_size, seed=config.seed + 2)
    test = built["test"] = distill.labelled_split(teacher, task, TEST_SIZE, seed=config.seed + 3)
    accuracy = float((test.teacher_logits.argmax(1) == test.labels).float().mean())
    yield StepRecord(config.teacher_steps - 1, {"teacher/test_accuracy": accuracy,
                                                **look.label_metrics(test.labels[:EXAMPLES].tolist())})
    for t in temperatures_of(config):
        probs, entropy = distill.soft_targets(test.teacher_logits[:EXAMPLES], t)  # (examples, classes), (examples,)
        yield arm_of(t), StepRecord(0, look.soft_target_metrics(probs.tolist(), entropy.tolist()))


def student_arm(config: Config, temperature: float | None, built: dict):
    """One student: the same initial weights and transfer set for every arm; only the targets differ."""
    from engines.loop.training import log_every_for
    from engines.supervised import distill
    student = distill.mlp(N_FEATURES, config.student_width, 1, N_CLASSES, seed=config.seed + 20)
    yield from distill.train_student(student, built["transfer"], built["test"], temperature, config.alpha,
                                     config.t_squared, config.lr, config.student_steps,
                                     log_every_for(config.student_steps, 50))


def students_arm(config: Config, built: dict):
    """Every student as one batched model (engines/supervised/distill_arms.py): the same records as
    `student_arm` gives each alone, at about the cost of one."""
    from engines.loop.training import log_every_for
    from engines.supervised import distill
    from engines.supervised.distill_arms import train_students
    temperatures = [None, *temperatures_of(config)]
    students = [distill.mlp(N_FEATURES, config.student_width, 1, N_CLASSES, seed=config.seed + 20) for _ in temperatures]
    yield from train_students(arm_names(config), students, built["transfer"], built["test"], temperatures, config.alpha,
                              config.t_squared, config.lr, config.student_steps, log_every_for(config.student_steps, 50))


class Distillation(Scenario):
    id = "distillation-temperature"
    title = "Temperature in distillation"
    order = 60
    arms_note = ("The students train together as one batched model (one per T and the hard-label arm, stacked): each "
                 "arm's records are those it gives trained alone, bit for bit. The teacher trains first, alone.")
    topic = "Fine-tuning & compression"
    question = "What does a teacher's temperature-softened output teach a small student that hard labels cannot?"
    terms = {
        "Knowledge distillation": shown_by("accuracy_vs_T", "test_accuracy", "teacher/test_accuracy",
                                           how="students taught by the teacher's outputs against the hard-label student"),
        "Soft targets": shown_by("soft_targets", look.SOFT_PREFIX, arm="T=", how="the teacher's full probability vector"),
        "Temperature": shown_by("soft_targets", look.SOFT_PREFIX, arm="T=", how="the same logits flatten as T grows"),
        "Softmax": shown_by("soft_targets", look.SOFT_PREFIX, arm="T=", how="softmax(v/T): positive, summing to 1"),
        "KL divergence": shown_by("kl", "kl", arm="T=", how="KL(p ‖ q) between soft targets and student, step by step"),
        "Cross-entropy": shown_by("test_loss", "test_loss", how="each student's cross-entropy on the true test labels"),
    }
    methods = {"Knowledge distillation": shown_by("accuracy_vs_T", "test_accuracy", "teacher/test_accuracy",
                                                  how="students taught by the teacher's softened outputs")}
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

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"run": 0.0219, "student_examples": 9.21e-07, "student_logs": 0.00115, "student_macs": 2.37e-10,
             "student_steps": 0.000178, "teacher_macs": 8.15e-11, "teacher_steps": 0.000613}
    rates_reference = 0.1371  # the reference workload's CPU s beside the fit
    timed = ({"teacher_width": 512, "teacher_steps": 100, "temperatures": "4"},
             {"transfer_size": 5000, "student_steps": 60, "temperatures": "1,2,4"}, {"student_steps": 400, "temperatures": "1,20"})

    def work(self, config: Config) -> Work:
        """The teacher (two hidden layers, batches of 256), then each student full-batch on the transfer set,
        scored on 4000 test examples at every log."""
        arms, teacher, student = 1 + len(temperatures_of(config)), config.teacher_width, config.student_width
        steps, logged = arms * config.student_steps, arms * logs(config.student_steps, 50)
        return Work({"teacher_steps": config.teacher_steps,
                     "teacher_macs": config.teacher_steps * TEACHER_BATCH * (teacher ** 2 + 26 * teacher),
                     "student_steps": steps, "student_examples": steps * config.transfer_size,
                     "student_macs": steps * config.transfer_size * 26 * student,
                     "student_logs": logged, "log_macs": logged * TEST_SIZE * 26 * student},
                    floats=4 * teacher ** 2 + TEACHER_BATCH * teacher * 6 + (TEST_SIZE + config.transfer_size) * (
                        26 + 3 * max(teacher, student)))

    def phases(self, config: Config, batched: bool = True) -> list[list[Arm]]:
        """The teacher, then the students: trained together as one batched model, or (`batched=False`,
        the reference the tests compare with) one after another."""
        from engines.loop.batched import arm_cost
        built: dict = {}  # the teacher's transfer and test sets, for the students of later phases
        temperatures = temperatures_of(config)
        teacher = Arm(TEACHER, teacher_arm(config, built), config.teacher_steps + 1 + len(temperatures), needed=True)
        if batched:
            return in_turn(teacher, Arm("students", students_arm(config, built), config.student_steps,
                                        arm_cost(len(temperatures) + 1)))
        return in_turn(teacher, *(Arm(arm, student_arm(config, t, built), config.student_steps)
                                  for arm, t in zip(arm_names(config), [None, *temperatures])))

    def batched_bytes(self, config: Config) -> float:
        """The students as one batched model: K one-layer MLPs (SGD: one momentum slot) and the test pass,
        or the transfer set's three (objective, soft gradient, its backward), whichever is larger."""
        weights = arms_memory.linear_weights(N_FEATURES, config.student_width, N_CLASSES)
        rows = max(TEST_SIZE, 3 * config.transfer_size)
        return arms_memory.batched_bytes(len(arm_names(config)), weights, 1, rows * (config.student_width + N_CLASSES))

    def refusal(self, config: Config, machine: Machine) -> str | None:
        return arms_memory.refusal(f"temperatures={config.temperatures}", len(arm_names(config)),
                                   self.batched_bytes(config), machine.memory_limit_bytes,
                                   machine.memory_basis(arms_memory.FILL))

    def arm_universe(self) -> list[str]:
        every = [arm_of(float(t)) for sweep in Sweep.__args__ for t in sweep.split(",")]
        return list(dict.fromkeys([HARD, *every, TEACHER]))

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records, temperatures, last = Records(frame), temperatures_of(config), config.student_steps - 1
        by_t = {f"{t:g}": a for t in temperatures if (a := look.final_accuracy(records, arm_of(t), last)) is not None}
        best = max(by_t, key=by_t.get) if by_t else None
        teacher, hard = records.last(TEACHER, "teacher/test_accuracy"), look.final_accuracy(records, HARD, last)
        return {"headline": {"teacher test accuracy": teacher, "hard-label test accuracy": hard,
                             "best distilled test accuracy": by_t[best] if best else None},
                "teacher_accuracy": teacher, "hard_accuracy": hard, "accuracy_by_T": by_t, "best_T": best,
                **look.gradient_summary(records, temperatures)}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records, last, temperatures = Records(frame), config.student_steps - 1, temperatures_of(config)
        teacher = look.recorded(records, TEACHER, "teacher/test_accuracy", shown=percent)
        details = [say("{} {}.", arm, DivergedAt(arm, step)) for arm in [TEACHER, *arm_names(config)]
                   if (step := records.diverged_at(arm)) is not None]
        if teacher is not None:
            details.append(say(f"The teacher ends at {{}} test accuracy on {TEST_SIZE} held-out examples.", teacher))
        if not details:
            return Explanation(waiting="Run to train the teacher, then one student per arm on the same small transfer set.")
        finished = [arm for arm in arm_names(config) if look.final_accuracy(records, arm, last) is not None]
        distilled = [arm for arm in finished if arm != HARD]
        if HARD in finished and distilled:
            takeaway = look.verdict(records, distilled, last, config.transfer_size)
        else:  # nothing to compare yet: what the run did so far leads
            takeaway = details.pop(0)
        if distilled:
            details.append(look.accuracy_sentence(records, distilled, last, config.alpha, config.t_squared))
        details += look.gradient_sentences(records, temperatures)
        details += look.entropy_sentences(records, temperatures, config.example, N_CLASSES)
        return Explanation(takeaway, tuple(details[:5]))

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records, temps, students = Records(frame), temperatures_of(config), arm_names(config)
        colors = arm_colors(students + [TEACHER], self.arm_universe())
        curves = functools.partial(curves_figure, records, colors, arms=students, x_title="student step", y_title="nats")
        return Figures({  # the teacher trains first, a third of a run: its curve leads, so the page is live at once
            "teacher": lambda: look.teacher_figure(records, colors),
            "accuracy_vs_T": lambda: look.accuracy_figure(records, temps, colors, config.alpha, config.t_squared, config.student_steps),
            "loss": lambda: curves("loss", title="Objective on the transfer set (what each arm minimises)"),
            "test_loss": lambda: curves("test_loss", title="Test cross-entropy against the true labels"),
            "kl": lambda: curves("kl", arms=students[1:], title="Soft term: KL(softmax(v/T) ‖ softmax(z/T)) on the transfer set"),
            "test_accuracy": lambda: look.as_percent(curves("test_accuracy", title="Student test accuracy during training",
                                                            y_title="test accuracy")),
            "soft_targets": lambda: look.soft_targets_figure(records, temps, colors, config.example, N_CLASSES),
            "soft_grad_norm": lambda: look.grad_figure(records, temps, colors),
        })
