"""Pretraining, then fine-tuning: what does a pretrained language model give a task with few labels,
how is an LM taught to follow instructions, and what does fine-tuning cost what it learned first?

One tiny byte-level Transformer LM (2 blocks, d_model 32, 32-byte context) is pretrained on prose —
the docstrings of a fixed list of Python standard-library modules — and reused by both halves.

ULMFiT (Howard & Ruder 2018), three stages. (1) The general LM on the prose. (2) The same LM
fine-tuned on unlabelled text of the target domain: lines of printable symbols, each line written
by one topic's own symbols and its own chain over them. Predicting the next symbol teaches which
symbols keep company. (3) A classifier (which topic wrote a line, from its first two symbols) on
the LM's body: a new head on concat pooling, discriminative learning rates η_l = η_L / 2.6^(L−l)
per layer group (embeddings, block 1, block 2, top), gradual unfreezing from the top, and the
slanted triangular schedule (cut_frac 0.1, ratio 32). The same classifier from the prose LM alone
(no stage 2), and from scratch (every group at η_L, nothing frozen), train on the same labelled
lines with the same schedule and steps;
accuracy on held-out lines against the number of labelled lines. A hundred labelled lines leave
many symbols never seen labelled; the unlabelled text showed every one. Measured at the defaults
(seeds 0, 1): ULMFiT 96.7% and 94.3% at 100 labels, from scratch 88.7% and 84.0%, the prose LM
alone 77.5% and 72.5%; at 1000 labels all but the prose LM alone reach 99%.

SFT and instruction tuning (Wei et al. 2022; Ouyang et al. 2022). A toy instruction format,
"reverse: dbca → acbd", "sort: dbca → abcd", "count: dbca → 4", one line each; a quarter of the
input strings are held out under every task. Two SFT arms from the pretrained LM: the loss on the
response bytes only, and on every byte (prompt included). Look at the exact-match accuracy on held-
out instructions before and after, the loss on prompt and response, and the prose's held-out loss
before and after: what fine-tuning cost the pretraining (forgetting).
"""
import math
from typing import Literal

import pandas as pd
from pydantic import Field, model_validator

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, in_turn, shown_by, together
from scenarios.cost import logs
from scenarios.explanation import Explanation
from scenarios.finetuning import claims, figures as look
from scenarios.finetuning.figures import DOMAIN, PRE, SFT_ALL, SFT_ARMS, SFT_RESPONSE, STARTS, classifier_label
from scenarios.plotting import Figures, arm_colors, curves_figure
from scenarios.records import Records

Tasks = Literal["reverse,sort,count", "reverse,sort", "reverse,count", "sort,count", "reverse", "sort", "count"]


class Config(ScenarioConfig):
    pretrain_steps: int = Field(100, ge=10, le=2000, description="Stage 1: AdamW steps of next-byte prediction on the "
                                                                 "prose, 16 windows of 32 bytes each.")
    domain_steps: int = Field(300, ge=10, le=2000, description="Stage 2: steps of LM fine-tuning on unlabelled lines "
                                                               "of the target domain.")
    classifier_steps: int = Field(60, ge=10, le=1000, description="Stage 3: steps of each classifier, 32 labelled lines each.")
    fewest_labels: int = Field(100, ge=100, le=1000, description="The fewest labelled lines a classifier gets.")
    most_labels: int = Field(1000, ge=100, le=1000, description="The most labelled lines (a third count lies between, "
                                                                "geometrically).")
    topics: int = Field(4, ge=2, le=4, description="Topics of the target domain: the classes.")
    symbols_per_topic: int = Field(23, ge=4, le=23, description="Each topic's own symbols (printable ASCII: 4 × 23 of the 94).")
    branching: int = Field(3, ge=1, le=4, description="Symbols each symbol may be followed by, within its topic.")
    sft_steps: int = Field(150, ge=10, le=2000, description="SFT steps of each arm, 32 instructions each.")
    tasks: Tasks = Field("reverse,sort,count", description="The instructions: reverse, sort or count the input letters.")
    letters: int = Field(5, ge=3, le=8, description="Letters the inputs are written with (a, b, c, …).")
    length: int = Field(4, ge=2, le=6, description="The longest input, in letters (the shortest is 2).")
    lr: float = Field(1e-2, ge=1e-4, le=3e-2, json_schema_extra={"scale": "log"},
                      description="Peak AdamW rate of stages 1 and 2 (stage 2: the top group's, slanted triangle).")
    classifier_lr: float = Field(1e-2, ge=1e-4, le=3e-2, json_schema_extra={"scale": "log"},
                                 description="η_L: the classifier's top-group peak rate.")
    sft_lr: float = Field(6e-3, ge=1e-4, le=3e-2, json_schema_extra={"scale": "log"}, description="SFT's AdamW rate.")

    @model_validator(mode="after")
    def _fits(self) -> "Config":
        if self.fewest_labels > self.most_labels:
            raise ValueError(f"fewest_labels={self.fewest_labels} is more than most_labels={self.most_labels}: "
                             "raise most_labels or lower fewest_labels")
        return self


def label_counts(config: Config) -> list[int]:
    """The fewest, the geometric middle (to 10) and the most labelled lines."""
    middle = int(round(math.sqrt(config.fewest_labels * config.most_labels) / 10) * 10)
    return sorted({config.fewest_labels, min(max(middle, config.fewest_labels), config.most_labels), config.most_labels})


class Finetuning(Scenario):
    id = "pretrain-finetune"
    title = "Pretraining, then fine-tuning: ULMFiT, SFT and instruction tuning"
    order = 44
    topic = "Language models"
    picture = "labels"
    arms_note = "The arms train one after another or side by side as separate models: each stage starts from the last."
    question = ("What does a pretrained LM give a classifier with few labels, how does SFT teach it to follow "
                "instructions, and what does fine-tuning cost what it learned first?")
    terms = {
        "Transfer learning": shown_by("labels", "heldout_accuracy", arm="ULMFiT",
                                      how="a body pretrained on text, reused by a classifier with few labels"),
        "Fine-tuning": shown_by("stages", "domain_bpb", "prose_bpb", arm=DOMAIN,
                                how="the pretrained LM trained further on the target domain's text"),
        "Learning rate schedule": shown_by("schedule", "group_lr/", arm="ULMFiT",
                                           how="the slanted triangle: a short rise, a long fall, per layer group"),
    }
    methods = {
        "Pretraining": shown_by("stages", "prose_bpb", "loss", arm=PRE, how="next-byte prediction on unlabelled prose"),
        "ULMFiT": shown_by("labels", "heldout_accuracy", "group_lr/", arm="ULMFiT",
                           how="three stages, discriminative rates, gradual unfreezing, slanted triangular schedule"),
        "Supervised fine-tuning": shown_by("sft", "instruction_accuracy", "response_nats", arm="SFT",
                                           how="next-token training on prompt–response lines, the loss on the response"),
        "Instruction tuning": shown_by("instructions", "accuracy/", "instruction_accuracy", arm="SFT",
                                       how="several tasks written as instructions; held-out instructions before and after"),
    }
    formula = (r"\begin{aligned}\eta_l &= \eta_L / 2.6^{\,L-l},\qquad \eta_t = \eta_{\max}\,\frac{1 + p_t(\text{ratio}-1)}"
               r"{\text{ratio}},\quad p_t = \begin{cases} t/\text{cut} & t < \text{cut}\\ 1 - \frac{t-\text{cut}}"
               r"{\text{cut}\,(1/\text{cut\_frac} - 1)} & \text{else}\end{cases}\\"
               r"L_{\text{SFT}} &= -\frac{1}{|R|}\sum_{t \in R} \ln p_\theta(x_t \mid x_{<t})\quad"
               r"(R:\ \text{response bytes; or every byte})\end{aligned}")
    Config = Config
    tiny = {"pretrain_steps": 10, "domain_steps": 10, "classifier_steps": 10, "sft_steps": 10, "most_labels": 200,
            "length": 3}
    tiny_space = {"most_labels": [100, 200, 300], "length": [2, 3], "letters": [3, 4, 5]}
    presets = {
        "a longer stage 2: the LM knows the domain better": {"domain_steps": 800},
        "no time for stage 2": {"domain_steps": 10},
        "one task: reverse": {"tasks": "reverse", "sft_steps": 300},
        "a harder domain: fewer symbols, more overlap in use": {"symbols_per_topic": 8, "branching": 4},
    }

    def phases(self, config: Config) -> list[list[Arm]]:
        from engines.loop.training import log_every_for
        from engines.sequence.pretrain_finetune import Stages
        stages = Stages(config.topics, config.branching, config.symbols_per_topic, config.most_labels, config.seed)
        pre = Arm(PRE, stages.pretrain(config.pretrain_steps, config.lr, log_every_for(config.pretrain_steps, 10)),
                  config.pretrain_steps, needed=True)
        domain = Arm(DOMAIN, stages.domain_finetune(config.domain_steps, config.lr, log_every_for(config.domain_steps, 10)),
                     config.domain_steps, needed=True)
        tasks = tuple(config.tasks.split(","))
        sft = [Arm(arm, stages.sft(arm == SFT_RESPONSE, tasks, config.letters, config.length, config.sft_steps,
                                   config.sft_lr, log_every_for(config.sft_steps, 10)), config.sft_steps, cost=1.2)
               for arm in SFT_ARMS]
        every = log_every_for(config.classifier_steps, 20)
        classifiers = [Arm(classifier_label(start, n), stages.classifier(n, start, config.classifier_steps,
                                                                          config.classifier_lr, every),
                           config.classifier_steps, cost=0.3)
                       for n in label_counts(config) for start in STARTS]
        return in_turn(pre) + together(domain, *sft) + together(*classifiers)

    def arm_universe(self) -> list[str]:
        return [*STARTS.values(), PRE, DOMAIN, SFT_RESPONSE, SFT_ALL,
                *(classifier_label(start, n) for n in (100, 320, 1000) for start in STARTS)]

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04 21:21, load 6-8, rates_reference beside them):
    rates = {"classifier_steps": 0.00333, "lm_steps": 0.00721, "run": 0.793, "sft_byte_steps": 0.000326}
    rates_reference = 0.1529  # the reference workload's CPU s beside the fit
    timed = ({"pretrain_steps": 100, "domain_steps": 10, "sft_steps": 10, "classifier_steps": 10},
             {"sft_steps": 60, "length": 6, "pretrain_steps": 10, "domain_steps": 10, "classifier_steps": 10},
             {"classifier_steps": 100, "most_labels": 100, "pretrain_steps": 10, "domain_steps": 50, "sft_steps": 10})

    def work(self, config: Config) -> Work:
        """Stages 1 and 2 (16 × 32 bytes a step), 3 classifiers per label count on 2-byte lines, two SFT arms
        on rows of ~15 + 2·length bytes; each log scores held-out text."""
        classifiers = 3 * len(label_counts(config))
        row = 15 + 2 * config.length
        lm = config.pretrain_steps + config.domain_steps
        counted = (logs(config.pretrain_steps, 10) + logs(config.domain_steps, 10) + len(SFT_ARMS) * logs(config.sft_steps, 10))
        return Work({"lm_steps": lm, "classifier_steps": classifiers * config.classifier_steps,
                     "sft_byte_steps": len(SFT_ARMS) * config.sft_steps * row, "logs": counted},
                    floats=4 * 45_000 * (2 + classifiers) + 32 * 32 * 256 * 6)

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records = Records(frame)
        fewest = config.fewest_labels
        accuracy = {arm: records.last(arm, "heldout_accuracy") for arm in records.arms_with("heldout_accuracy")}
        headline = {f"ULMFiT, {fewest} labels: held-out accuracy": accuracy.get(classifier_label("domain", fewest)),
                    f"from scratch, {fewest} labels": accuracy.get(classifier_label("scratch", fewest)),
                    "SFT (response loss): held-out instructions": records.last(SFT_RESPONSE, "instruction_accuracy"),
                    "prose bits per byte after SFT (response loss)": records.last(SFT_RESPONSE, "prose_bpb")}
        return {"headline": headline, "classifier_accuracy": accuracy,
                "instruction_accuracy": {arm: records.last(arm, "instruction_accuracy") for arm in SFT_ARMS},
                "prose_bpb": {arm: records.last(arm, "prose_bpb") for arm in (PRE, DOMAIN, *SFT_ARMS)}}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records = Records(frame)
        sentences = [s for s in (claims.ulmfit_sentence(records, 1 / config.topics), claims.sft_sentence(records),
                                 claims.stages_sentence(records), claims.schedule_sentence(records),
                                 claims.prompt_sentence(records), claims.forgetting_sentence(records)) if s is not None]
        if not sentences:
            return Explanation(waiting="Run to pretrain the LM on prose, then fine-tune it three ways.")
        return Explanation(sentences[0], tuple(sentences[1:]))

    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records = Records(frame)
        colors = arm_colors([*self.arm_universe(), *records.arms()], self.arm_universe())
        shown = classifier_label("domain", config.fewest_labels)
        return Figures({
            "labels": lambda: look.labels_figure(records, colors, 1 / config.topics, label_counts(config)),
            "stages": lambda: look.stages_figure(records, colors, config.pretrain_steps),
            "schedule": lambda: look.schedule_figure(records, shown),
            "classifier_curves": lambda: look.curves_by_start(records, colors, config.fewest_labels),
            "instructions": lambda: look.instructions_figure(records, colors),
            "sft": lambda: look.sft_figure(records, colors),
            "forgetting": lambda: look.forgetting_figure(records, colors),
            "grad_norm": lambda: curves_figure(records, colors, "grad_norm/layer_01", arms=[PRE, DOMAIN, *SFT_ARMS],
                                               title="The first block's weight-gradient norm (MLP input), step by step",
                                               y_title="‖∂L/∂W‖ (probe)"),
        })
