"""Next-token prediction: what does the loss measure, what is its floor, and what does teacher forcing hide?

A language model is trained to give the next token a high probability; its loss is the mean
cross-entropy −ln p(next token), in nats per token. The same number reads as perplexity e^loss
(how many equally likely choices), and as bits per byte, loss ÷ ln 2 ÷ bytes per token, which
does not depend on the tokenizer. Two texts, each split into training and held-out parts:

- *Topic lines*, a synthetic language built in code: each line starts with a topic word, and the
  rest are words of that topic's chain (engines/sequence/topics.py). Its entropy rate H — the
  least loss any model can reach on fresh text — is computed exactly, and held-out loss
  approaches it from above.
- *Prose*: the docstrings of a fixed list of Python standard-library modules, read from the
  interpreter that runs this (its size and hash are in the run), tokenized by byte-level BPE.

Counting gives the baselines: a unigram (word frequencies) and a bigram (frequencies after each
word). A small causal Transformer is measured against both, and against H.

Training uses teacher forcing: at every position the model reads the *true* prefix. When it
writes, it reads its own samples instead. On topic lines a slip into another topic's word is a
prefix no training line had. Training windows are random crops, so the model often reads a line
without its topic word and learns to infer the topic from the words; after its own slip it tends
to follow it, and the probability it puts on tokens the source forbids grows along the line when
it runs free, well past what it puts there when fed the true line (exposure bias; Bengio et al.
2015, Ross et al. 2011). Measured at the defaults (seed 0): fed the true line 0.022 → 0.052
(median over the first and the last quarter of the line), on its own samples 0.030 → 0.21. The scheduled-
sampling arm mixes the model's own samples into its training inputs, more as training goes on.
Last, the same prompts sampled at temperatures 0.5–2: the entropy of what is drawn per token.
"""
from typing import Literal

import pandas as pd
from pydantic import Field, model_validator

from scenarios.base import Arm, Scenario, Work, ScenarioConfig, in_turn, shown_by, together
from scenarios.cost import logs
from scenarios.explanation import Explanation
from scenarios.next_token import claims, figures as look
from scenarios.next_token.figures import (BI_P, BI_T, PROSE, PROSE_FACTS, SOURCE, SS, TF, TOPIC_ARMS, UNI_P, UNI_T)
from scenarios.plotting import Figures, arm_colors, curves_figure, full_width
from scenarios.records import Records


class Config(ScenarioConfig):
    steps: int = Field(200, ge=20, le=3000, description="AdamW steps per model, a batch of 16 windows each.")
    line_length: int = Field(32, ge=4, le=32, description="Tokens per line of topic lines: the topic word, then words of "
                                                          "that topic. A line must fit in the model's context.")
    context: int = Field(32, ge=8, le=64, description="Tokens the model reads at once (its learned positions).")
    topics: int = Field(2, ge=1, le=4, description="Topics of the synthetic language; each writes 10 of its 16 words.")
    branching: int = Field(3, ge=1, le=8, description="Next words each word allows within a topic (1: every line "
                                                      "determined by its first two tokens).")
    scheduled_max: float = Field(0.25, title="scheduled sampling, most", ge=0.05, le=1.0, description="Scheduled sampling: the share of training inputs "
                                                                    "replaced by the model's own samples, ramped from 0 "
                                                                    "to this at the last step.")
    prose_vocab: Literal[256, 512, 1024] = Field(512, description="Tokens of the prose's BPE (256: plain bytes).")
    lr: float = Field(1e-2, ge=1e-4, le=5e-2, json_schema_extra={"scale": "log"}, description="AdamW learning rate.")

    @model_validator(mode="after")
    def _lines_fit(self) -> "Config":
        if self.line_length > self.context:
            raise ValueError(f"line_length={self.line_length} is longer than the model's context (context={self.context}): "
                             "the model could not read a whole line; shorten the lines or widen the context")
        return self


def arm_specs(config: Config) -> dict[str, dict]:
    shape = dict(context=config.context, d_model=48, layers=1, heads=2, seed=config.seed)
    return {TF: dict(shape, scheduled_max=0.0), SS: dict(shape, scheduled_max=config.scheduled_max),
            PROSE: dict(shape, scheduled_max=0.0)}


class NextToken(Scenario):
    id = "next-token"
    title = "Next-token prediction and teacher forcing"
    order = 40
    topic = "Language models"
    picture = "heldout_loss"
    question = "What does a language model's loss measure, what is its floor, and what does teacher forcing hide?"
    terms = {
        "Cross-entropy": shown_by("heldout_loss", "heldout_nats", arm=TF, how="held-out −ln p(next token), nats per token"),
        "Entropy rate": shown_by("heldout_loss", "entropy_rate", "floor/", arm=SOURCE,
                                 how="the exact floor of the synthetic source, drawn under the held-out loss"),
        "Perplexity": shown_by("units", "heldout_ppl", arm=TF, how="e^loss beside nats and bits per byte"),
        "Bits per byte": shown_by("units", "heldout_bpb", arm=PROSE, how="loss ÷ ln 2 ÷ bytes per token, any tokenizer"),
        "Exposure bias": shown_by("exposure", "exposure/", arm=TF, how="error along the line: true prefix against its own samples"),
        "Scheduled sampling": shown_by("exposure", "exposure/", "own_share", arm=SS,
                                       how="the arm trained with its own samples mixed into the inputs"),
        "Temperature": shown_by("temperature", "sampling/", arm=TF, how="softmax(z/T): the entropy of what is drawn"),
        "Token": shown_by("units", "heldout_nats", "tokens_per_byte", arm="prose", how="a word, or a BPE token of the prose"),
    }
    methods = {
        "Next-token prediction": shown_by("heldout_loss", "heldout_nats", "loss", arm=TF,
                                          how="a causal Transformer trained to predict each token from the ones before"),
        "Cross-entropy loss": shown_by("heldout_loss", "heldout_nats", "entropy_rate", arm="topic lines",
                                       how="held-out cross-entropy approaching the exact entropy rate from above"),
        "Teacher forcing": shown_by("exposure", "exposure/teacher_forced/", "exposure/free_running/", arm=TF,
                                    how="trained on true prefixes; measured on true prefixes and on its own samples"),
    }
    formula = (r"\begin{aligned}L &= -\frac1T\sum_t \ln p_\theta(x_{t+1}\mid x_{\le t})\ \ge\ H"
               r" = \lim_{n\to\infty}\tfrac1n H(X_1,\dots,X_n)\quad(\text{held-out, in expectation})\\"
               r"\text{perplexity} &= e^{L},\qquad \text{bits per byte} = \frac{L}{\ln 2}\cdot\frac{\text{tokens}}{\text{bytes}}"
               r"\qquad \text{sampling: } p_T(x) \propto e^{z_x/T}\end{aligned}")
    Config = Config
    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"prose_vocab": 0.000673, "run": 0.186, "token_steps": 0.000154}
    rates_reference = 0.1372  # the reference workload's CPU s beside the fit
    tiny = {"steps": 20, "line_length": 8, "context": 16, "prose_vocab": 256}
    timed = ({"steps": 60, "context": 32}, {"steps": 40, "context": 64, "prose_vocab": 1024}, {"steps": 100, "context": 8, "line_length": 8})
    tiny_space = {"prose_vocab": [256], "context": [8, 16], "line_length": [4, 8]}
    presets = {
        "exposure bias, longer training": {"steps": 600},
        "a deterministic language": {"branching": 1},
        "four topics, short lines": {"topics": 4, "line_length": 16},
        "plain bytes for the prose": {"prose_vocab": 256},
    }

    def phases(self, config: Config) -> list[list[Arm]]:
        from engines.loop.training import log_every_for
        from engines.sequence import next_token as engine
        from engines.sequence.lm import LMSpec
        source = dict(topics=config.topics, branching=config.branching, line_length=config.line_length, seed=config.seed)
        log_every = log_every_for(config.steps, 25)
        facts = in_turn(Arm("topic lines", engine.topic_fact_records(**source, names=(SOURCE, UNI_T, BI_T)), 3),
                        Arm("prose", engine.prose_fact_records(config.prose_vocab, (PROSE_FACTS, UNI_P, BI_P)), 3, cost=20))
        arms = {}
        for name, spec in arm_specs(config).items():
            vocab = config.prose_vocab if name == PROSE else config.topics + 16
            scheduled = spec.pop("scheduled_max")
            arm = engine.LMArm(LMSpec(vocab, **spec), config.steps, config.lr, log_every, scheduled)
            records = engine.prose_lm_records(arm) if name == PROSE else engine.topic_lm_records(arm, **source)
            arms[name] = Arm(name, records, config.steps, cost=1.3 if name == SS else 1.0)
        return facts + together(*arms.values())

    def arm_universe(self) -> list[str]:
        return [TF, SS, PROSE, SOURCE, UNI_T, BI_T, PROSE_FACTS, UNI_P, BI_P]

    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records = Records(frame)
        last = {arm: {unit: records.last(arm, unit) for unit in ("heldout_nats", "heldout_bpb", "heldout_ppl")}
                for arm in (TF, SS, PROSE, UNI_T, BI_T, UNI_P, BI_P)}
        headline = {"topic lines: held-out nats (teacher forcing)": last[TF]["heldout_nats"],
                    "topic lines: entropy-rate floor (nats)": records.first(SOURCE, "entropy_rate"),
                    "prose: held-out bits per byte": last[PROSE]["heldout_bpb"],
                    "free-running error at the line's end": look.exposure_end(records, TF, "free_running")}
        return {"headline": headline, "held_out": last, "prose_bytes": records.first(PROSE_FACTS, "prose_bytes"),
                "prose_hash48": records.first(PROSE_FACTS, "prose_hash48"),
                "exposure": {arm: {mode: look.exposure_profile(records, arm, mode) for mode in look.MODES}
                             for arm in TOPIC_ARMS}}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records = Records(frame)
        sentences = [s for s in (claims.floor_sentence(records), claims.exposure_sentence(records),
                                 claims.scheduled_sentence(records), claims.prose_sentence(records),
                                 claims.temperature_sentence(records)) if s is not None]
        if not sentences:
            return Explanation(waiting="Run to train the models and measure them against the entropy floor.")
        return Explanation(sentences[0], tuple(sentences[1:]))

    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records = Records(frame)
        colors = arm_colors(self.arm_universe(), self.arm_universe())
        return Figures({
            "heldout_loss": lambda: look.heldout_figure(records, colors),
            "exposure": lambda: look.exposure_figure(records, colors),
            "units": lambda: look.units_figure(records, colors),
            "prose_loss": lambda: look.prose_figure(records, colors),
            "temperature": lambda: look.temperature_figure(records, colors),
            "grad_norm": lambda: full_width(curves_figure(  # alone in its row: the page's width
                records, colors, "grad_norm/layer_01", arms=[TF, SS, PROSE],
                title="The block's weight-gradient norm (MLP input), step by step", y_title="‖∂L/∂W‖ (probe)")),
        })

    def work(self, config: Config) -> Work:
        """Three models side by side (the scheduled-sampling arm also samples its inputs), each step 16
        windows of `context` tokens; the prose's BPE and counted baselines once; ~25 held-out evaluations."""
        token_steps = 3 * config.steps * config.context
        return Work({"steps": 3 * config.steps, "token_steps": token_steps, "vocab_steps": config.steps * config.prose_vocab,
                     "prose_vocab": config.prose_vocab, "logs": 3 * logs(config.steps, 25)},
                    floats=3 * (48 * 48 * 12 + (config.prose_vocab + 64) * 48 * 2) + 16 * config.context * 48 * 20)
