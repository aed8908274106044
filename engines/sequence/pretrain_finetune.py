"""Pretraining, then fine-tuning: one byte-level TinyLM pretrained on prose, reused by ULMFiT and by SFT.

Everything reads bytes (vocabulary 256), so the prose, the target domain and the instructions are one
alphabet and one model reads them all. `Stages` holds the models between the page's phases:

1. `pretrain`: next-byte prediction on the prose (engines.sequence.text: standard-library
   docstrings), random 32-byte windows. Logged: held-out bits per byte of the prose and of the
   target domain.
2. `domain_finetune`: ULMFiT's second stage, the pretrained LM fine-tuned on unlabelled text of the
   target domain, with discriminative rates and the slanted triangular schedule
   (engines.sequence.finetune). The domain (`symbol_lines`): lines of 16 printable symbols, each
   line written by one of `topics` topics, each topic with its own `per_topic` symbols (disjoint)
   and its own first-order chain over them. To predict the next symbol, the LM must learn which
   symbols follow which: symbols of one topic come to predict alike, and their states sit together.
3. `classifier`: which topic wrote a line, from its first CLUE = 2 symbols. With 100 labelled lines
   many symbols are never seen labelled; the unlabelled text has shown every one in company. ULMFiT:
   the domain-tuned body, a new head on concat pooling, discriminative rates, gradual unfreezing,
   the slanted triangular schedule. The same from the prose LM alone (no stage 2). From scratch: the
   same classifier from a random body, every group at η_L from the first step, the same schedule
   and steps. The labelled examples are the first n of one pool, so every count's set contains the
   smaller ones'.
4. `sft`: the pretrained LM fine-tuned on instructions (engines.sequence.instructions), its loss on
   the response only or on every byte. Logged: held-out instruction accuracy and the prose's
   held-out bits per byte (what fine-tuning costs: forgetting). Step 0 logs before any update.
"""
import copy
import functools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import train
from engines.sequence import finetune as ft
from engines.sequence.instructions import PAD, RowBatches, instruction_sets, response_scores, sft_objective
from engines.sequence.lm import (LN2, LMSpec, TinyLM, WindowBatches, evaluation_windows, lm_arm, next_token_objective,
                                token_nll)
from engines.sequence.text import prose

CONTEXT, D_MODEL, LAYERS, HEADS = 32, 32, 2, 2
LM_BATCH, CLASSIFIER_BATCH, SFT_BATCH = 16, 32, 32
EVAL_WINDOWS, TEST_LINES, DOMAIN_LINES, LINE_SYMBOLS = 32, 512, 3000, 16
CLUE = 2  # the classifier reads a line's first CLUE symbols
BETAS = (0.9, 0.95)


def byte_ids(text: str) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64))


@functools.lru_cache(maxsize=1)
def prose_bytes() -> tuple[torch.Tensor, torch.Tensor]:
    """(training bytes, held-out evaluation windows) of the prose."""
    corpus = prose()
    return byte_ids(corpus.train_text), evaluation_windows(byte_ids(corpus.held_out_text), CONTEXT, EVAL_WINDOWS)


@dataclass(frozen=True)
class Domain:
    """The target domain: unlabelled text, a labelled pool, a test set (rows of bytes, lengths, topics)."""
    train: torch.Tensor          # unlabelled bytes, lines joined by newlines
    held_out: torch.Tensor       # evaluation windows of unlabelled held-out lines
    pool: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    topics: int


def labelled(texts: list[str], topics: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rows of each text's bytes (at most CONTEXT), padded with PAD to the longest, their lengths and topics."""
    width = min(CONTEXT, max(len(text.encode()) for text in texts))
    rows = torch.full((len(texts), width), PAD, dtype=torch.long)
    lengths = torch.empty(len(texts), dtype=torch.long)
    for i, text in enumerate(texts):
        ids = byte_ids(text)[:CONTEXT]
        rows[i, : len(ids)], lengths[i] = ids, len(ids)
    return rows, lengths, torch.as_tensor(topics, dtype=torch.long)


SYMBOLS = "".join(chr(c) for c in range(33, 127))  # printable ASCII, no space


def symbol_lines(topics: int, per_topic: int, branching: int, lines: int, length: int, seed: int,
                 table_seed: int) -> tuple[list[str], np.ndarray]:
    """`lines` lines of `length` symbols: a topic drawn uniformly, then its own first-order chain over its
    `per_topic` symbols (disjoint from the other topics'), `branching` successors each."""
    rng = np.random.default_rng(table_seed)
    table = np.zeros((topics, per_topic, per_topic))
    for t in range(topics):
        for j in range(per_topic):
            table[t, j, rng.permutation(per_topic)[:branching]] = rng.dirichlet(np.ones(branching))
    draw = np.random.default_rng(seed)
    label = draw.integers(0, topics, lines)
    out = np.empty((lines, length), dtype=np.int64)
    out[:, 0] = draw.integers(0, per_topic, lines)
    cdf = np.cumsum(table, -1)
    for k in range(1, length):
        u = draw.random(lines)[:, None]
        out[:, k] = np.minimum((u > cdf[label, out[:, k - 1]]).sum(-1), per_topic - 1)
    symbols = out + label[:, None] * per_topic
    return ["".join(SYMBOLS[i] for i in row) for row in symbols], label


@functools.lru_cache(maxsize=4)
def domain(topics: int, branching: int, per_topic: int, pool_size: int, seed: int) -> Domain:
    """Unlabelled train and held-out lines of LINE_SYMBOLS symbols, the labelled pool and the test lines
    (their first CLUE symbols), four samples seeded apart from one table."""
    draws = [symbol_lines(topics, per_topic, branching, n, LINE_SYMBOLS, seed * 4 + k, seed)
             for k, n in enumerate((DOMAIN_LINES, 200, pool_size, TEST_LINES))]
    train_text, held_text = ("\n".join(texts) for texts, _ in draws[:2])
    return Domain(byte_ids(train_text), evaluation_windows(byte_ids(held_text), CONTEXT, EVAL_WINDOWS),
                  labelled([t[:CLUE] for t in draws[2][0]], draws[2][1]), labelled([t[:CLUE] for t in draws[3][0]], draws[3][1]),
                  topics)


def bits_per_byte(model: TinyLM, windows: torch.Tensor) -> float:
    """Mean held-out nats per byte ÷ ln 2 (byte-level: a token is a byte)."""
    return float(token_nll(model, windows).mean()) / LN2


class Stages:
    """The models a run passes from phase to phase: `pretrained` after stage 1, `domain_lm` after 2."""

    def __init__(self, topics: int, branching: int, per_topic: int, most_labels: int, seed: int) -> None:
        self.seed = seed
        self.domain = domain(topics, branching, per_topic, most_labels, seed)
        self.prose_train, self.prose_held = prose_bytes()
        self.pretrained: TinyLM | None = None
        self.domain_lm: TinyLM | None = None

    def spec(self, seed_offset: int) -> LMSpec:
        return LMSpec(256, CONTEXT, D_MODEL, LAYERS, HEADS, seed=self.seed + seed_offset)

    def lm_measures(self, model: TinyLM):
        def on_log(step: int) -> dict[str, float]:
            return {"prose_bpb": bits_per_byte(model, self.prose_held),
                    "domain_bpb": bits_per_byte(model, self.domain.held_out)}
        return on_log

    def pretrain(self, steps: int, lr: float, log_every: int) -> Iterator[StepRecord | Diverged | None]:
        model = TinyLM(self.spec(0))
        batches = WindowBatches(self.prose_train, CONTEXT, LM_BATCH, self.seed + 1)
        yield from lm_arm(model, batches, steps, lr=lr, log_every=log_every, on_log=self.lm_measures(model))
        self.pretrained = model

    def domain_finetune(self, steps: int, lr: float, log_every: int) -> Iterator[StepRecord | Diverged | None]:
        model = copy.deepcopy(self.pretrained)
        optimizer = torch.optim.AdamW(ft.param_groups(model, lr), betas=BETAS, weight_decay=0.0)
        batches = WindowBatches(self.domain.train, CONTEXT, LM_BATCH, self.seed + 2)
        yield from train(model, optimizer, batches, next_token_objective(model), steps, probe=model.probe(),
                         log_every=log_every, scheduler=ft.slanted_triangular(optimizer, steps),
                         on_log=self.lm_measures(model))
        self.domain_lm = model

    def classifier(self, labels: int, start: str, steps: int, lr: float, log_every: int
                   ) -> Iterator[StepRecord | Diverged | None]:
        """`start`: "domain" (ULMFiT: the domain-tuned LM), "pretrained" (the prose LM, no stage 2), or
        "scratch" (a random body; every group at η_L from the first step)."""
        ulmfit = start != "scratch"
        body = copy.deepcopy({"domain": self.domain_lm, "pretrained": self.pretrained}[start]) if ulmfit else TinyLM(self.spec(5))
        model = ft.Classifier(body, self.domain.topics, self.seed + 6)
        groups = ft.layer_groups(model)
        optimizer = torch.optim.AdamW(ft.param_groups(model, lr, discriminative=ulmfit), betas=BETAS, weight_decay=0.0)
        unfreezing = ft.GradualUnfreezing(groups, ft.unfreeze_every(steps, len(groups))) if ulmfit else None
        rows, lengths, topics = (t[:labels] for t in self.domain.pool)
        test_rows, test_lengths, test_topics = self.domain.test

        def objective(index: torch.Tensor, logging: bool):
            logits = model(rows[index], lengths[index])
            loss = F.cross_entropy(logits, topics[index])
            return (loss, {"accuracy": (logits.detach().argmax(-1) == topics[index]).float().mean()}) if logging else loss

        def on_log(step: int) -> dict[str, float]:
            with torch.no_grad():
                model.eval()
                right = model(test_rows, test_lengths).argmax(-1) == test_topics
                model.train()
            trainable = unfreezing.unfrozen if unfreezing else len(groups)
            out = {"heldout_accuracy": float(right.float().mean()), "labels": float(labels),
                   "trainable_groups": float(trainable)}
            for level, group in enumerate(optimizer.param_groups, start=1):  # what each group steps with now
                out[f"group_lr/{level}"] = group["lr"] if level > len(groups) - trainable else 0.0
                out[f"base_lr/{level}"] = group["initial_lr"]  # η_l, before the schedule's factor
            return out

        batches = RowBatches(_Indexable(labels), CLASSIFIER_BATCH, self.seed + 7)
        yield from train(model, optimizer, batches, ft.scheduled(objective, unfreezing), steps, log_every=log_every,
                         scheduler=ft.slanted_triangular(optimizer, steps), on_log=on_log)

    def sft(self, response_only: bool, tasks: tuple[str, ...], letters: int, length: int, steps: int, lr: float,
            log_every: int) -> Iterator[StepRecord | Diverged | None]:
        model = copy.deepcopy(self.pretrained)
        train_rows, held_rows = instruction_sets(tasks, letters, length, self.seed)
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=BETAS, weight_decay=0.0)

        def on_log(step: int) -> dict[str, float]:
            return {**response_scores(model, held_rows), "prose_bpb": bits_per_byte(model, self.prose_held),
                    "train_instructions": float(len(train_rows)), "heldout_instructions": float(len(held_rows))}

        yield from train(model, optimizer, RowBatches(train_rows, SFT_BATCH, self.seed + 8),
                         sft_objective(model, train_rows, response_only), steps, probe=model.probe(),
                         log_every=log_every, on_log=on_log)


class _Indexable:
    """A length for RowBatches to draw indices below."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size
