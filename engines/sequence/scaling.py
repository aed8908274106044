"""Scaling laws' grid points: one tiny LM of width d trained for a budget of D tokens, measured against the floor.

A grid point is a model size N (the width `d_model` of `engines.sequence.lm.TinyLM`, 2 layers, 2 heads)
and a token budget D = steps × batch × context tokens of the synthetic Markov source
(`engines.sequence.text.markov_source`: order 2 over 16 words, its entropy rate H known exactly). Each
point trains its own model from scratch (AdamW, 10% linear warmup, then cosine decay to 0 at its own
last step: a short run is not a prefix of a long one, as Chinchilla found it must not be) and reads
its held-out loss on the positions that see at least `order` earlier words, where no model can beat H.

Parameters are counted two ways (Pearce & Song 2024: the exponent moves with the count):
`body_params` (non-embedding: the blocks and the final LayerNorm, as Kaplan et al. counted) and
`total_params` (with the token and position tables and the read-out).

A point is a pure function of its `PointSpec` (its own seeds; the data are drawn from the source's
seed), so a stored point stands for a retrained one: `point_key` names it.
"""
import functools
import json
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import torch

from engines.loop.schedules import build_scheduler
from engines.loop.records import StepRecord
from engines.loop.training import train
from engines.sequence.lm import LMSpec, TinyLM, WindowBatches, evaluation_windows, next_token_objective, token_nll
from engines.sequence.text import markov_source

VOCAB, ORDER, BRANCHING = 16, 2, 4     # the source: 16 words, order 2, 4 next words per state
CONTEXT, BATCH, LAYERS, HEADS = 16, 32, 2, 2
TRAIN_TOKENS, HELD_OUT_TOKENS = 200_000, 8_192  # a long stream: random windows rarely repeat at these budgets
WIDTHS = (8, 16, 24, 32, 48, 64, 96, 128)       # the size ladder (d_model): the first `sizes` are trained
STEPS = (25, 50, 100, 200, 400, 800)            # the budget ladder (optimizer steps): the first `budgets`
TOKENS_PER_STEP = BATCH * CONTEXT


@dataclass(frozen=True)
class PointSpec:
    width: int          # d_model
    steps: int          # optimizer steps; D = steps × TOKENS_PER_STEP tokens
    lr: float
    source_seed: int    # which Markov chain, and its samples
    seed: int           # the model's initial weights and its window order

    @property
    def tokens(self) -> int:
        return self.steps * TOKENS_PER_STEP


def point_key(spec: PointSpec) -> str:
    """The canonical name of a point (what a point cache keys on, beside the code version)."""
    return json.dumps({**asdict(spec), "vocab": VOCAB, "order": ORDER, "branching": BRANCHING, "context": CONTEXT,
                       "batch": BATCH, "layers": LAYERS, "heads": HEADS}, sort_keys=True, separators=(",", ":"))


def model_of(width: int, seed: int = 0) -> TinyLM:
    return TinyLM(LMSpec(VOCAB, CONTEXT, width, LAYERS, HEADS, seed=seed))


def counts(width: int) -> dict[str, float]:
    """Non-embedding and total parameters of the model of this width (no training)."""
    parts = model_of(width).parameter_counts()
    positions = CONTEXT * width
    body = parts["body_params"] - positions  # the position table is an embedding too
    return {"body_params": float(body), "total_params": float(body + parts["embedding_params"] + positions)}


class Data:
    """The source's training stream and held-out windows, made once per run and shared by its points."""

    def __init__(self, source_seed: int) -> None:
        self.source, self.source_seed = markov_source(VOCAB, ORDER, BRANCHING, seed=source_seed), source_seed
        held_ids = self.source.sample(HELD_OUT_TOKENS, source_seed * 2 + 2)  # markov_corpus's held-out draw
        self.held_out = evaluation_windows(torch.from_numpy(held_ids), CONTEXT)  # (n, context + 1)
        # the true conditional's loss on the same held-out targets: the sample's own floor
        nll = -torch.from_numpy(self.source.log_prob(held_ids))  # targets from index ORDER on
        starts = torch.arange(len(self.held_out))[:, None] * CONTEXT + torch.arange(ORDER, CONTEXT + 1)
        self.sample_floor = float(nll[starts - ORDER].mean())

    @functools.cached_property
    def train(self) -> torch.Tensor:
        """The training stream, drawn when a point first trains (a grid served from a cache needs none)."""
        return torch.from_numpy(self.source.sample(TRAIN_TOKENS, self.source_seed * 2 + 1))  # markov_corpus's draw

    @property
    def entropy_rate(self) -> float:
        return self.source.entropy_rate


def point_steps(spec: PointSpec, data: Data) -> Iterator[dict[str, float] | None]:
    """Train the point's model to the end of its budget: `None` after every step (a consumer may stop
    there), then its final metrics (floats) as the last item."""
    model = model_of(spec.width, spec.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, betas=(0.9, 0.95), weight_decay=0.0, foreach=True)
    scheduler = build_scheduler(optimizer, max(1, spec.steps // 10), spec.steps, "cosine")
    batches = WindowBatches(data.train, CONTEXT, BATCH, spec.seed)
    last = None
    for item in train(model, optimizer, batches, next_token_objective(model), spec.steps, log_every=spec.steps,
                      scheduler=scheduler):
        last = item if item is not None else last
        yield None
    model.eval()
    # target j+1 sees j+1 earlier words: it has the whole state from j + 1 >= ORDER on
    heldout = float(token_nll(model, data.held_out)[:, ORDER - 1:].mean()) if isinstance(last, StepRecord) else math.nan
    train_loss = float(last.metrics["loss"]) if isinstance(last, StepRecord) else math.nan
    yield {"width": float(spec.width), "steps": float(spec.steps), "tokens": float(spec.tokens), **counts(spec.width),
           "heldout_loss": heldout, "train_loss": train_loss}


def train_point(spec: PointSpec, data: Data) -> dict[str, float]:
    """The point's final metrics (the last item of `point_steps`)."""
    *_, metrics = point_steps(spec, data)
    return metrics
