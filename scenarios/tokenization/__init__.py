"""Tokenization: what does a BPE vocabulary buy, what does GPT-2's pre-split prevent, and what does a
bigger vocabulary cost a small language model?

A model reads integer tokens, not text. Byte-level BPE (Sennrich et al. 2016; GPT-2, Radford et
al. 2019) starts from the 256 byte values — so any string, in any language, is already encodable —
and repeatedly merges the most frequent adjacent pair of tokens into a new token. Trained here on
the docstrings of a fixed list of Python standard-library modules, read from the interpreter that
runs this (its size and hash are recorded), and scored on held-out paragraphs. The BPE is written
in this project (engines/sequence/bpe.py); its merges equal Hugging Face `tokenizers`' on the
same text (tests/test_bpe.py).

More merges, fewer tokens: held-out bytes per token rise with the vocabulary, fast at first,
then slowly, as the frequent pairs are used up. GPT-2 first cuts text into words with a regex,
each with its leading space, and never merges across that cut; without it, frequent phrases
("e the", "s, and") become tokens. A bigger vocabulary is not free: the embedding table and the
read-out grow with it, and at a fixed budget of training FLOPs (6·N per token, N counting the
blocks and the read-out) a tiny LM with a bigger vocabulary gets fewer steps — but each token
carries more bytes, and its 32-token context reaches further back.

Look at the bytes-per-token curve, the first merges, one held-out sentence at three sizes, the
token lengths, the merges across words that the pre-split prevents, and the LMs' held-out bits
per byte against training FLOPs.
"""
from typing import Literal

import pandas as pd
from pydantic import Field, model_validator

from scenarios.base import Arm, Scenario, Work, ScenarioConfig, in_turn, shown_by, together
from scenarios.explanation import Explanation
from scenarios.plotting import Figures, arm_colors, curves_figure, full_width
from scenarios.records import Records
from scenarios.tokenization import claims, figures as look
from scenarios.tokenization.figures import PRE, RAW, lm_arms, lm_label

COMMON_SIZES = (256, 704, 2048, 512, 1024, 4096, 1472, 3008)


class Config(ScenarioConfig):
    vocab_size: int = Field(2048, ge=256, le=4096, description="Tokens of the BPE vocabulary: 256 bytes plus the merges. "
                                                                "The LMs use 256, the geometric middle and this many.")
    prose_kib: Literal[16, 32, 64, 128, 256] = Field(256, title="prose (KiB)", description="KiB of training prose BPE learns from (256: all of "
                                                                      "it, about 160 KiB). Less text supports fewer merges.")
    budget_steps: int = Field(150, ge=10, le=1000, description="The compute budget: steps of the byte-level LM (16 × 32 "
                                                               "tokens each). Bigger vocabularies get the same training "
                                                               "FLOPs, so fewer steps.")
    lr: float = Field(1e-2, ge=1e-4, le=5e-2, json_schema_extra={"scale": "log"}, description="AdamW learning rate of the LMs.")

    @model_validator(mode="after")
    def _text_supports_the_vocabulary(self) -> "Config":
        from engines.sequence.vocabulary import supported_vocab  # torch-free: BPE to exhaustion, cached
        supported = supported_vocab(self.prose_kib)
        if self.vocab_size > supported:
            raise ValueError(f"vocab_size={self.vocab_size} is more than {self.prose_kib} KiB of prose supports "
                             f"({supported} tokens: after that no pair of tokens occurs twice); lower vocab_size or "
                             "raise prose_kib")
        return self


def lm_sizes(config: Config) -> list[int]:
    from engines.sequence.vocabulary import lm_vocab_sizes
    return lm_vocab_sizes(config.vocab_size)


class Tokenization(Scenario):
    id = "tokenization"
    title = "Tokenization and byte-pair encoding"
    order = 38
    topic = "Language models"
    picture = "bytes_per_token"
    question = "What does a BPE vocabulary buy, what does GPT-2's pre-split prevent, and what does a bigger vocabulary cost?"
    terms = {
        "Byte-pair encoding (BPE)": shown_by("first_merges", "merge/", arm=PRE, how="the most frequent adjacent pair, joined, again and again"),
        "Token": shown_by("sentence", "sentence/", arm=PRE, how="one held-out sentence cut into tokens at three sizes"),
        "Vocabulary size": shown_by("bytes_per_token", "bytes_per_token", arm=PRE, how="held-out bytes per token, 256 tokens and up"),
        "Embedding": shown_by("vocab_cost", "embedding_params", arm=look.LM_PREFIX, how="a row per token: the table grows with the vocabulary"),
        "Bits per byte": shown_by("lm_curves", "heldout_bpb", arm=look.LM_PREFIX, how="LMs with different tokenizers on one scale"),
    }
    methods = {"Tokenization": shown_by("bytes_per_token", "bytes_per_token", "merge/", arm="BPE",
                                        how="byte-level BPE trained on prose, with and without GPT-2's pre-split")}
    formula = (r"\begin{aligned}(a, b)^{*} &= \arg\max_{(a,b)} \#\{\text{adjacent } a\,b\},\qquad a\,b \mapsto 256 + k"
               r"\quad(k\text{-th merge})\\ \text{bits per byte} &= \frac{L_{\text{nats/token}}}{\ln 2}\cdot"
               r"\frac{\text{tokens}}{\text{bytes}},\qquad C \approx 6\,N\,D\ \text{(training FLOPs)}\end{aligned}")
    Config = Config
    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"lm_budget_steps": 0.00433, "merges": 0.000148, "prose_kib": 0.00219, "run": 0.292}
    rates_reference = 0.1371  # the reference workload's CPU s beside the fit
    tiny = {"vocab_size": 320, "prose_kib": 16, "budget_steps": 10}
    timed = ({"prose_kib": 32, "vocab_size": 1024, "budget_steps": 40}, {"prose_kib": 64, "vocab_size": 512, "budget_steps": 100},
             {"prose_kib": 16, "vocab_size": 1024, "budget_steps": 20})
    tiny_space = {"prose_kib": [16, 32]}
    presets = {
        "GPT-2 style, 4096 tokens": {"vocab_size": 4096},
        "bytes only": {"vocab_size": 256},
        "little text, small vocabulary": {"prose_kib": 16, "vocab_size": 1024},
        "a bigger compute budget": {"budget_steps": 400},
    }

    def phases(self, config: Config) -> list[list[Arm]]:
        from engines.sequence.tokenization import lm_records, planned_steps
        from engines.sequence.vocabulary import vocab_grid
        points = len(vocab_grid(config.vocab_size))
        tokenizers = in_turn(Arm(PRE, tokenizer_stream(config, True), points, cost=3),
                             Arm(RAW, tokenizer_stream(config, False), points, cost=8))
        lms = [Arm(lm_label(size), lm_records(config.prose_kib, size, config.budget_steps, config.lr, config.seed),
                   planned_steps(size, config.budget_steps)) for size in lm_sizes(config)]
        return tokenizers + together(*lms)

    def arm_universe(self) -> list[str]:
        return [PRE, RAW, *dict.fromkeys(lm_label(size) for size in COMMON_SIZES)]

    def work(self, config: Config) -> Work:
        """Two BPEs over the prose (the one without a pre-split counts pairs across words: the dearer),
        then an LM per vocabulary size at one compute budget: each spends the byte-level model's FLOPs
        of `budget_steps` (fewer, dearer steps as the vocabulary grows)."""
        sizes = lm_sizes(config)
        return Work({"prose_kib": config.prose_kib, "merges": config.vocab_size - 256,
                     "lm_budget_steps": len(sizes) * config.budget_steps},
                    floats=sum(size * 64 * 4 for size in sizes) + config.prose_kib * 1024 * 8)

    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records = Records(frame)
        arms = lm_arms(records)
        top = records.last_step(PRE, "bytes_per_token")
        headline = {"bytes per token (pre-split, largest vocabulary)": records.at(PRE, "bytes_per_token", top) if top else None,
                    "tokens across words without the pre-split": records.last(RAW, "spanning_tokens"),
                    "bits per byte, byte-level LM": records.last(arms[0], "heldout_bpb") if arms else None,
                    "bits per byte, largest-vocabulary LM": records.last(arms[-1], "heldout_bpb") if arms else None}
        return {"headline": headline, "prose_bytes": records.last(PRE, "prose_bytes"),
                "prose_hash48": records.last(PRE, "prose_hash48"),
                "lms": {arm: {"heldout_bpb": records.last(arm, "heldout_bpb"), "steps": records.first(arm, "planned_steps"),
                              "embedding_params": records.first(arm, "embedding_params")} for arm in arms}}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records = Records(frame)
        sentences = [s for s in (claims.compression_sentence(records), claims.pre_split_sentence(records),
                                 claims.first_merge_sentence(records), claims.compute_sentence(records),
                                 claims.prose_sentence(records)) if s is not None]
        if not sentences:
            return Explanation(waiting="Run to train the tokenizers on the prose and the LMs at one compute budget.")
        return Explanation(sentences[0], tuple(sentences[1:]))

    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records = Records(frame)
        colors = arm_colors([*self.arm_universe(), *lm_arms(records)], self.arm_universe())
        return Figures({
            "bytes_per_token": lambda: look.bytes_per_token_figure(records, colors, config.vocab_size),
            "first_merges": lambda: look.first_merges_figure(records, colors),
            "sentence": lambda: look.sentence_figure(records),
            "token_lengths": lambda: look.token_lengths_figure(records, colors),
            "pre_split": lambda: look.pre_split_figure(records, colors),
            "lm_curves": lambda: look.lm_curves_figure(records, colors),
            "vocab_cost": lambda: look.vocab_cost_figure(records, colors),
            "grad_norm": lambda: full_width(curves_figure(  # alone in its row: the page's width
                records, colors, "grad_norm/layer_01", arms=lm_arms(records),
                title="LMs: the block's weight-gradient norm (MLP input), step by step", y_title="‖∂L/∂W‖ (probe)")),
        })


def tokenizer_stream(config: Config, pre_split: bool):
    from engines.sequence.tokenization import tokenizer_records
    yield from tokenizer_records(config.prose_kib, config.vocab_size, pre_split)
