"""Tokenization measured: what a BPE vocabulary buys in bytes per token, what the pre-split prevents, and
what a bigger vocabulary costs a small language model at a fixed compute budget.

BPE learns from the first `prose_kib` KiB of the training prose (engines.sequence.vocabulary, torch-free,
which also says how large a vocabulary that text supports); everything is scored on the held-out
prose. One replay of the merges over the held-out text gives its length at every vocabulary size
(`bpe.token_counts`).

Records (floats only; strings travel as their bytes):
- `tokenizer_records`, one per vocabulary size on a grid (the record's step is the size):
  `bytes_per_token` (held-out bytes ÷ tokens) and `merge_count` (how often the last merged pair
  occurred); at the final size also `vocab_length/bytes_NN` (tokens of each length),
  `usage_length/bytes_NN` (held-out tokens of each length), `spanning_tokens` (merged tokens with a
  space after a non-space: across a word boundary), the first merges (`merge/rank_NN/left|right|count`),
  examples of spanning tokens (`spanning/ex_NN/byte_MM`, `.../rank`, `.../count`) and one held-out
  sentence's bytes with its token lengths at three sizes (`sentence/byte_NNN`, `sentence/v_VVVV/len_NNN`).
- `lm_records`: a tiny causal LM on the prose tokenized at one vocabulary size, trained for as many
  steps as a fixed budget of training FLOPs allows: C = 6 · N · tokens, N counting the weights a token
  passes through (the blocks and the read-out, not the input table, which is a lookup). The byte-level
  model gets `budget_steps` steps; a vocabulary with a k-times-larger N gets 1/k of them. Records the
  held-out bits per byte (exact for the windows scored), `flops` so far, and at step 0 the parameter counts.
"""
import re
from collections.abc import Iterator

import numpy as np
import torch

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import log_every_for
from engines.sequence.bpe import BPE, BYTES, token_counts
from engines.sequence.lm import LMSpec, TinyLM, WindowBatches, evaluation_windows, lm_arm
from engines.sequence.next_token import heldout_units
from engines.sequence.text import prose
from engines.sequence.vocabulary import (held_out_sentence, lm_vocab_sizes, tokenizer, training_text,
                                         vocab_grid)

FIRST_MERGES, EXAMPLES, LONGEST = 20, 10, 16  # lengths from 16 bytes on share one bin
EVAL_WINDOWS, BATCH, CONTEXT, D_MODEL = 96, 16, 32, 48
SPANNING = re.compile(rb"\S\s")  # a space after a non-space: the token runs across a word boundary


def length_bins(lengths: list[int], prefix: str) -> dict[str, float]:
    counts = np.bincount(np.minimum(lengths, LONGEST), minlength=LONGEST + 1)[1:]
    return {f"{prefix}/bytes_{n:02d}": float(c) for n, c in enumerate(counts, start=1)}


def bytes_record(prefix: str, data: bytes) -> dict[str, float]:
    return {f"{prefix}/byte_{i:03d}": float(b) for i, b in enumerate(data)}


def tokenizer_records(prose_kib: int, vocab_size: int, pre_split: bool) -> Iterator[StepRecord]:
    bpe = tokenizer(prose_kib, vocab_size, pre_split)
    held_out = prose().held_out
    held_bytes = sum(len(p.encode()) for p in held_out)
    lengths = token_counts(bpe, held_out)
    top = bpe.vocab_size
    for size in vocab_grid(top):
        metrics = {"bytes_per_token": held_bytes / lengths[size - BYTES]}
        if size > BYTES:
            metrics["merge_count"] = float(bpe.counts[size - BYTES - 1])
        if size == top:
            metrics.update(final_metrics(bpe, prose_kib, vocab_size))
        yield StepRecord(size, metrics)


def final_metrics(bpe: BPE, prose_kib: int, vocab_size: int) -> dict[str, float]:
    vocabulary = bpe.vocabulary()
    used = [len(vocabulary[t]) for paragraph in prose().held_out for t in bpe.encode(paragraph)]
    spanning = [rank for rank, token in enumerate(vocabulary[BYTES:]) if SPANNING.search(token)]
    metrics = {**length_bins([len(t) for t in vocabulary], "vocab_length"), **length_bins(used, "usage_length"),
               "spanning_tokens": float(len(spanning)), "merges": float(len(bpe.merges)),
               "train_bytes": float(sum(len(p.encode()) + 1 for p in training_text(prose_kib))),
               "prose_bytes": float(prose().size_bytes), "prose_hash48": prose().hash48}
    for rank, ((left, right), count) in enumerate(zip(bpe.merges[:FIRST_MERGES], bpe.counts)):
        metrics.update({f"merge/rank_{rank:02d}/left": float(left), f"merge/rank_{rank:02d}/right": float(right),
                        f"merge/rank_{rank:02d}/count": float(count)})
    for i, rank in enumerate(spanning[:EXAMPLES]):
        metrics.update({f"spanning/ex_{i:02d}/rank": float(rank), f"spanning/ex_{i:02d}/count": float(bpe.counts[rank]),
                        **bytes_record(f"spanning/ex_{i:02d}", vocabulary[BYTES + rank])})
    if bpe.pre_split:
        sentence = held_out_sentence()
        metrics.update(bytes_record("sentence", sentence.encode()))
        for size in lm_vocab_sizes(vocab_size):
            tokens = bpe.truncated(size).encode(sentence)
            metrics.update({f"sentence/v_{size:04d}/len_{i:03d}": float(len(vocabulary[t])) for i, t in enumerate(tokens)})
    return metrics


# --- a tiny LM per vocabulary size, at one compute budget ------------------------------------------------
def compute_params(model: TinyLM) -> int:
    """Weights a token's forward pass multiplies through: everything but the input token table."""
    return sum(p.numel() for p in model.parameters()) - model.tokens.weight.numel()


def lm_spec(vocab_size: int, seed: int) -> LMSpec:
    return LMSpec(vocab_size, CONTEXT, d_model=D_MODEL, layers=1, heads=2, seed=seed)


def planned_steps(vocab_size: int, budget_steps: int) -> int:
    """Steps this vocabulary's model gets for the FLOPs the byte-level model spends in `budget_steps`."""
    ratio = compute_params(TinyLM(lm_spec(BYTES, 0))) / compute_params(TinyLM(lm_spec(vocab_size, 0)))
    return max(1, round(budget_steps * ratio))


def lm_records(prose_kib: int, vocab_size: int, budget_steps: int, lr: float, seed: int, points: int = 30
               ) -> Iterator[StepRecord | Diverged | None]:
    """One LM on the prose tokenized at `vocab_size`, for `planned_steps` steps, logged about `points` times."""
    bpe = tokenizer(prose_kib, vocab_size, True)
    corpus = prose()
    train = torch.tensor(bpe.encode(corpus.train_text))
    held_out = torch.tensor(bpe.encode(corpus.held_out_text))
    token_bytes = torch.tensor([len(t) for t in bpe.vocabulary()], dtype=torch.float64)
    model = TinyLM(lm_spec(vocab_size, seed))
    windows = evaluation_windows(held_out, CONTEXT, EVAL_WINDOWS)
    flops_per_step = 6.0 * compute_params(model) * BATCH * CONTEXT
    steps = planned_steps(vocab_size, budget_steps)

    def measure(step: int) -> dict[str, float]:
        values = {**heldout_units(model, windows, token_bytes), "flops": flops_per_step * (step + 1)}
        if step == 0:
            counts = model.parameter_counts()
            values.update({k: float(v) for k, v in counts.items()})
            values.update({"compute_params": float(compute_params(model)), "planned_steps": float(steps),
                           "bytes_per_token": len(corpus.held_out_text.encode()) / len(held_out)})
        return values

    batches = WindowBatches(train, CONTEXT, BATCH, seed + 1)
    yield from lm_arm(model, batches, steps, lr=lr, log_every=log_every_for(steps, points), on_log=measure)
