"""Next-token prediction measured: held-out loss in three units, counted baselines, the entropy floor,
exposure bias and sampling temperature. The arms of the next-token page, reusable by any LM page.

- `counted_ngrams`: unigram and bigram models by counting the training tokens, add-½ smoothed
  (Jeffreys: every count plus ½, so no held-out token gets probability 0), scored on held-out
  text like a model: nats per token, bits per byte, perplexity.
- `lm_records`: one causal `TinyLM` arm through the shared loop (`engines.loop.training.train`),
  teacher-forced or with scheduled sampling; on every logged step the held-out loss
  (`heldout_nats`, `heldout_bpb`, `heldout_ppl`, over line-aligned windows so the exact floor
  applies), and at the last one, on the topic-lines source, the exposure-bias and temperature
  measurements below.
- Exposure bias (`exposure`): per position of a line, the probability the model puts on tokens
  the source forbids after the prefix it is reading — the true line (teacher forcing) or its own
  samples from a two-token prompt (free running). Recorded as `exposure/teacher_forced/pos_XX`
  and `exposure/free_running/pos_XX`.
- Temperature (`temperature_sweep`, teacher-forced arms): up to 16 tokens sampled at each of
  `TEMPERATURES` from the same prompts: the mean entropy of the distributions drawn from
  (`sampling/entropy/T_x.xx`, nats per token) and the share of drawn tokens the source forbids
  (`sampling/forbidden/T_x.xx`).

Bits per byte are exact for the text scored: total nats ÷ ln 2 ÷ total bytes of the target tokens.
"""
import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from engines.loop.records import Diverged, StepRecord
from engines.sequence.lm import LN2, LMSpec, TinyLM, WindowBatches, evaluation_windows, generate, lm_arm, \
    scheduled_sampling_objective, token_nll
from engines.sequence.bpe import BPE, train_bpe
from engines.sequence.text import prose
from engines.sequence.topics import TopicLines, topic_lines

TEMPERATURES = (0.5, 0.75, 1.0, 1.5, 2.0)
EVAL_WINDOWS, PROBE_LINES, SAMPLED_LINES, SAMPLED_TOKENS, BATCH = 96, 192, 64, 16, 16
TRAIN_LINES, HELD_OUT_LINES = 4000, 400


def units(nats: float, target_bytes: float, targets: int) -> dict[str, float]:
    """Mean nats per token, bits per byte and perplexity of `targets` tokens covering `target_bytes` bytes."""
    per_token = nats / targets
    return {"heldout_nats": per_token, "heldout_bpb": nats / LN2 / target_bytes, "heldout_ppl": math.exp(per_token)}


def counted_ngrams(train: np.ndarray, held_out: np.ndarray, vocab: int, token_bytes: np.ndarray) -> dict[str, dict[str, float]]:
    """Held-out units of the add-½ unigram and bigram models counted on `train` (first held-out token: unigram)."""
    unigram = (np.bincount(train, minlength=vocab) + 0.5) / (len(train) + 0.5 * vocab)
    pairs = np.zeros((vocab, vocab))
    np.add.at(pairs, (train[:-1], train[1:]), 1.0)
    bigram = (pairs + 0.5) / (pairs.sum(1, keepdims=True) + 0.5 * vocab)
    target_bytes = float(token_bytes[held_out].sum())
    uni_nats = -np.log(unigram[held_out]).sum()
    bi_nats = -np.log(unigram[held_out[0]]) - np.log(bigram[held_out[:-1], held_out[1:]]).sum()
    return {"unigram": units(float(uni_nats), target_bytes, len(held_out)),
            "bigram": units(float(bi_nats), target_bytes, len(held_out))}


@torch.no_grad()
def heldout_units(model: TinyLM, windows: torch.Tensor, token_bytes: torch.Tensor) -> dict[str, float]:
    nll = token_nll(model, windows).double()
    return units(float(nll.sum()), float(token_bytes[windows[:, 1:]].sum()), nll.numel())


@torch.no_grad()
def exposure(model: TinyLM, source: TopicLines, lines: np.ndarray, seed: int) -> dict[str, float]:
    """Per line position 2 … L−1: the model's probability on forbidden tokens after the true prefix
    and after its own samples (temperature 1) from the line's first two tokens."""
    ids = torch.as_tensor(lines)
    probs = torch.softmax(model(ids[:, :-1]).double(), -1).numpy()  # (n, L−1, vocab): predictions of 1 … L−1
    forced = (probs * ~source.allowed_next(lines[:, :-1])).sum(-1)[:, 1:].mean(0)  # positions 2 … L−1
    run = generate(model, ids[:, :2], source.line_length - 2, 1.0, torch.Generator().manual_seed(seed), keep_probs=True)
    allowed = source.allowed_next(run.ids[:, :-1].numpy())[:, 1:]  # what may follow each generated prefix
    free = (run.probs.double().numpy() * ~allowed).sum(-1).mean(0)
    out = {f"exposure/teacher_forced/pos_{j + 2:02d}": float(v) for j, v in enumerate(forced)}
    out.update({f"exposure/free_running/pos_{j + 2:02d}": float(v) for j, v in enumerate(free)})
    return out


@torch.no_grad()
def temperature_sweep(model: TinyLM, source: TopicLines, prompts: np.ndarray, seed: int) -> dict[str, float]:
    out = {}
    for temperature in TEMPERATURES:
        run = generate(model, torch.as_tensor(prompts), min(SAMPLED_TOKENS, source.line_length - 2), temperature,
                       torch.Generator().manual_seed(seed))
        drawn = run.ids.numpy()
        allowed = source.allowed_next(drawn[:, :-1])[:, 1:]  # (n, L−2, vocab)
        forbidden = ~np.take_along_axis(allowed, drawn[:, 2:, None], -1)[..., 0]
        out[f"sampling/entropy/T_{temperature:.2f}"] = float(run.entropy.mean())
        out[f"sampling/forbidden/T_{temperature:.2f}"] = float(forbidden.mean())
    return out


@dataclass(frozen=True)
class LMArm:
    """One next-token arm: the model's shape, its training, and (on topic lines) the final probes."""
    spec: LMSpec
    steps: int
    lr: float
    log_every: int
    scheduled_max: float = 0.0   # scheduled sampling: the share of own tokens, ramped linearly from 0 to this
    batch: int = BATCH


def lm_records(arm: LMArm, train: np.ndarray, held_out: np.ndarray, token_bytes: np.ndarray, window: int,
               source: TopicLines | None = None) -> Iterator[StepRecord | Diverged | None]:
    """Train one arm on `train` ids; held-out units on `window`-token windows of `held_out` at each log
    (and, with a `source`, exposure and temperature at the last). Step 0 records the parameter counts."""
    model = TinyLM(arm.spec)
    windows = evaluation_windows(torch.as_tensor(held_out), window, EVAL_WINDOWS)
    byte_table = torch.as_tensor(token_bytes, dtype=torch.float64)
    lines = held_out[: len(held_out) // source.line_length * source.line_length].reshape(-1, source.line_length)[
        :PROBE_LINES] if source is not None else None
    objective = (scheduled_sampling_objective(model, own_share_schedule(arm.scheduled_max, arm.steps), arm.spec.seed + 11)
                 if arm.scheduled_max > 0 else None)

    def measure(step: int) -> dict[str, float]:
        values = heldout_units(model, windows, byte_table)
        if step == 0:
            values.update({k: float(v) for k, v in model.parameter_counts().items()})
        if source is not None and step == arm.steps - 1:
            values.update(exposure(model, source, lines, arm.spec.seed + 12))
            if arm.scheduled_max == 0:  # the temperature sweep of the teacher-forced model only
                values.update(temperature_sweep(model, source, lines[:SAMPLED_LINES, :2], arm.spec.seed + 13))
        return values

    # random crops, as GPT-style training takes them: a window often starts inside a line, without its topic word
    batches = WindowBatches(torch.as_tensor(train), arm.spec.context, arm.batch, arm.spec.seed + 1)
    yield from lm_arm(model, batches, arm.steps, lr=arm.lr, log_every=arm.log_every, objective=objective, on_log=measure)


def facts_records(values: dict[str, float]) -> Iterator[StepRecord]:
    """One record of exact or counted facts (a source's entropy rate, a baseline's held-out units)."""
    yield StepRecord(0, dict(values))


def source_facts(source: TopicLines, train: np.ndarray, held_out: np.ndarray) -> dict[str, float]:
    """The exact entropy rate (per token, per byte, position by position) and the held-out sample's own
    loss under the true source."""
    facts = {"entropy_rate": source.entropy_rate, "entropy_rate_bpb": source.entropy_rate_per_byte / LN2,
             "bytes_per_token": source.bytes_per_token, "train_tokens": float(len(train)),
             "heldout_tokens": float(len(held_out)), "true_heldout_nats": float(-source.log_prob(held_out).mean())}
    facts.update({f"floor/pos_{j:02d}": float(h) for j, h in enumerate(source.per_position_entropy)})
    return facts


def token_byte_lengths(spellings: list[bytes] | tuple[str, ...]) -> np.ndarray:
    """Bytes per token id: a spelled word and its space, or a BPE token's bytes."""
    return np.array([len(s.encode()) + 1 if isinstance(s, str) else len(s) for s in spellings], dtype=np.int64)


def own_share_schedule(maximum: float, steps: int) -> Callable[[int], float]:
    """Scheduled sampling's share of own tokens: 0 at the first step, `maximum` at the last, linear."""
    return lambda step: maximum * min(1.0, step / max(1, steps - 1))


# --- the two corpora, built once per process and setting ------------------------------------------
@functools.lru_cache(maxsize=4)
def topic_corpus(topics: int, branching: int, line_length: int, seed: int) -> tuple[TopicLines, np.ndarray, np.ndarray]:
    """The topic-lines source (16 words, 10 per topic) and its train and held-out samples, seeded apart."""
    source = topic_lines(topics, 16, 10, branching, line_length, seed=seed)
    return source, source.sample(TRAIN_LINES, seed * 2 + 1), source.sample(HELD_OUT_LINES, seed * 2 + 2)


@functools.lru_cache(maxsize=4)
def prose_corpus(vocab_size: int) -> tuple[BPE, np.ndarray, np.ndarray]:
    """The prose as token ids of a pre-split BPE with `vocab_size` tokens trained on its training split
    (256: the bytes themselves)."""
    corpus = prose()
    bpe = train_bpe(corpus.train, vocab_size)
    return bpe, np.array(bpe.encode(corpus.train_text), dtype=np.int64), np.array(bpe.encode(corpus.held_out_text), dtype=np.int64)


def topic_fact_records(topics: int, branching: int, line_length: int, seed: int, names: tuple[str, str, str]
                       ) -> Iterator[tuple[str, StepRecord]]:
    """The source's exact facts, then its counted unigram and bigram, each under its own arm name."""
    source, train, held_out = topic_corpus(topics, branching, line_length, seed)
    yield names[0], StepRecord(0, source_facts(source, train, held_out))
    counted = counted_ngrams(train, held_out, source.vocab, token_byte_lengths(source.spellings))
    yield names[1], StepRecord(0, counted["unigram"])
    yield names[2], StepRecord(0, counted["bigram"])


def prose_fact_records(vocab_size: int, names: tuple[str, str, str]) -> Iterator[tuple[str, StepRecord]]:
    """The prose's size and hash, its tokens per byte, then its counted unigram and bigram."""
    corpus = prose()
    bpe, train, held_out = prose_corpus(vocab_size)
    token_bytes = np.array([len(t) for t in bpe.vocabulary()], dtype=np.int64)
    yield names[0], StepRecord(0, {"prose_bytes": float(corpus.size_bytes), "prose_hash48": corpus.hash48,
                                   "train_tokens": float(len(train)), "heldout_tokens": float(len(held_out)),
                                   "tokens_per_byte": len(held_out) / float(token_bytes[held_out].sum()),
                                   "vocab_size": float(bpe.vocab_size)})
    counted = counted_ngrams(train, held_out, bpe.vocab_size, token_bytes)
    yield names[1], StepRecord(0, counted["unigram"])
    yield names[2], StepRecord(0, counted["bigram"])


def topic_lm_records(arm: LMArm, topics: int, branching: int, line_length: int, seed: int):
    source, train, held_out = topic_corpus(topics, branching, line_length, seed)
    window = arm.spec.context // line_length * line_length  # whole lines: the exact floor applies
    yield from lm_records(arm, train, held_out, token_byte_lengths(source.spellings), window, source)


def prose_lm_records(arm: LMArm):
    bpe, train, held_out = prose_corpus(arm.spec.vocab)
    token_bytes = np.array([len(t) for t in bpe.vocabulary()], dtype=np.int64)
    yield from lm_records(arm, train, held_out, token_bytes, arm.spec.context)
