"""Positional encodings on a task that needs order: copy the token `offset` places back.

Every output position i ≥ offset must name the input token x_{i−offset}. Self-attention
without masks and without positions is permutation-equivariant: permuting the tokens
permutes the outputs, so position i's output is a function of x_i and the bag of all
tokens only. The best such guess is the commonest other token of the bag
(`order_free_accuracy`); nothing order-blind beats it. Three ways to tell positions apart:

- learned absolute: a trained vector per position added to the token (a table of MAX_LENGTH
  rows; rows past the trained length get no gradient and keep their random init);
- sinusoidal: PE(p, 2i) = sin(p·θ_i), PE(p, 2i+1) = cos(p·θ_i), θ_i = 10000^(−2i/d), added;
- RoPE: q and k of every head rotated by their position, so scores see m − n only.

Evaluated at longer lengths than trained on, the schemes part: "offset back" is a
relative rule, which RoPE states directly.
"""
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import train
from engines.sequence.attention import SelfAttention, init_seeded, residual_stack, rope_theta, rotate, sinusoidal

Scheme = Literal["none", "learned", "sinusoidal", "rope"]
VOCAB, D_MODEL, MAX_LENGTH, BATCH, EVAL_SIZE = 16, 24, 64, 64, 128
IGNORE = -100  # positions before `offset` have no target


class ShiftTask:
    def __init__(self, offset: int, seed: int) -> None:
        self.offset = offset
        self.generator = torch.Generator().manual_seed(seed)

    def batch(self, size: int, length: int, generator: torch.Generator | None = None):
        x = torch.randint(0, VOCAB, (size, length), generator=generator or self.generator)  # (batch, seq)
        y = torch.full_like(x, IGNORE)
        y[:, self.offset:] = x[:, :-self.offset]
        return x, y

    def batches(self, size: int, length: int) -> Iterator:
        while True:
            yield self.batch(size, length)


def eval_sets(offset: int, lengths: list[int], seed: int) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """The held-out sequences per length, the same for every arm of a run."""
    task = ShiftTask(offset, seed)
    return {length: task.batch(EVAL_SIZE, length, torch.Generator().manual_seed(seed * 131 + length)) for length in lengths}


def order_free_accuracy(x: torch.Tensor, y: torch.Tensor) -> float:
    """Expected accuracy of the best order-blind guess on these sequences: at position i, the
    target is one of the other tokens, each as likely, so guess a commonest token of the bag
    without x_i (ties broken at random: credit 1/|ties| when the target is among them)."""
    counts = F.one_hot(x, VOCAB).sum(1, keepdim=True) - F.one_hot(x, VOCAB)  # (batch, seq, vocab): bag − x_i
    best = counts == counts.max(-1, keepdim=True).values
    keep = y != IGNORE
    hit = best.gather(-1, y.clamp_min(0)[..., None]).squeeze(-1).float() / best.sum(-1)
    return float(hit[keep].mean())


class PositionalTransformer(nn.Module):
    """Tokens (+ positions) → `layers` × (x + attention(x)) → LayerNorm → token logits; no mask."""

    def __init__(self, scheme: Scheme, layers: int = 1, heads: int = 2, rope_base: float = 10000.0, seed: int = 0) -> None:
        super().__init__()
        self.scheme = scheme
        self.tokens = nn.Embedding(VOCAB, D_MODEL)
        self.positions = nn.Embedding(MAX_LENGTH, D_MODEL) if scheme == "learned" else None
        rope = rope_base if scheme == "rope" else None
        self.attention = nn.ModuleList(SelfAttention(D_MODEL, heads, rope_base=rope) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(D_MODEL), nn.Linear(D_MODEL, VOCAB)
        init_seeded(self, seed)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        h = self.tokens(x)  # (batch, seq, d)
        if self.scheme == "learned":
            h = h + self.positions.weight[: x.shape[1]]
        elif self.scheme == "sinusoidal":
            h = h + sinusoidal(x.shape[1], D_MODEL)
        return h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(residual_stack(self.attention, self.embed(x))[0]))  # (batch, seq, vocab)

    def maps(self, x: torch.Tensor) -> torch.Tensor:
        """Attention weights, mean over the batch: (layers, heads, queries, keys)."""
        _, inputs = residual_stack(self.attention, self.embed(x))
        return torch.stack([layer.weights(h).mean(0) for layer, h in zip(self.attention, inputs)])


def shift_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=IGNORE)


def shift_accuracy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    keep = y != IGNORE
    return (logits.argmax(-1) == y)[keep].float().mean()


def equivariance_error(model: nn.Module, x: torch.Tensor, seed: int) -> torch.Tensor:
    """max |f(x permuted) − f(x) permuted| over the logits: 0 up to rounding iff order-blind."""
    order = torch.randperm(x.shape[1], generator=torch.Generator().manual_seed(seed))
    return (model(x[:, order]) - model(x)[:, order]).abs().max()


@dataclass(frozen=True)
class PositionArm:
    scheme: Scheme
    train_length: int = 8
    offset: int = 1
    layers: int = 1
    heads: int = 2
    rope_base: float = 10000.0
    lr: float = 3e-3
    seed: int = 0


def eval_lengths(train_length: int) -> list[int]:
    """The trained length, then 1.5×, 2×, 3× and 4× it (at most MAX_LENGTH)."""
    return sorted({min(MAX_LENGTH, round(train_length * f)) for f in (1, 1.5, 2, 3, 4)})


def train_position_arm(spec: PositionArm, steps: int, log_every: int, snapshots: int = 10) -> Iterator[StepRecord | Diverged | None]:
    """Loss, accuracy, held-out accuracy at the trained length, the permutation test; at
    `snapshots` logs also held-out accuracy at every evaluated length and the attention maps."""
    model = PositionalTransformer(spec.scheme, spec.layers, spec.heads, spec.rope_base, seed=spec.seed)
    task = ShiftTask(spec.offset, seed=spec.seed + 1)
    held_out = eval_sets(spec.offset, eval_lengths(spec.train_length), spec.seed + 2)
    logged, snapshot_every = {"count": 0}, max(1, (steps // log_every) // snapshots)

    def measure(step: int) -> dict:
        at_length = held_out[spec.train_length]
        with torch.no_grad():
            values = {"eval_accuracy": shift_accuracy(model(at_length[0]), at_length[1]),
                      "equivariance_error": equivariance_error(model, at_length[0], spec.seed + 3)}
            if logged["count"] % snapshot_every == 0 or step == steps - 1:
                values.update({f"eval_accuracy/len_{n:02d}": shift_accuracy(model(x), y) for n, (x, y) in held_out.items()})
                maps = model.maps(at_length[0]).double().flatten().tolist()
                names = [f"attn/l{l + 1}/h{h + 1}/q{q:02d}/p{p:02d}" for l in range(spec.layers) for h in range(spec.heads)
                         for q in range(spec.train_length) for p in range(spec.train_length)]
                values.update(zip(names, maps))
        logged["count"] += 1
        return values

    def objective(batch, logging: bool):
        x, y = batch
        logits = model(x)
        loss = shift_loss(logits, y)
        return (loss, {"accuracy": shift_accuracy(logits.detach(), y)}) if logging else loss

    optimizer = torch.optim.Adam(model.parameters(), lr=spec.lr, foreach=True)
    yield from train(model, optimizer, task.batches(BATCH, spec.train_length), objective, steps, log_every=log_every,
                     on_log=measure)


def order_free_records(train_length: int, offset: int, seed: int) -> Iterator[StepRecord]:
    """The order-blind optimum on the very held-out sequences every arm is scored on."""
    sets = eval_sets(offset, eval_lengths(train_length), seed + 2)
    yield StepRecord(0, {f"eval_accuracy/len_{n:02d}": order_free_accuracy(x, y) for n, (x, y) in sets.items()})


def rope_records(dim: int, length: int, base: float, seed: int) -> Iterator[StepRecord]:
    """⟨R_m q, R_n k⟩ for every m, n < length (random q, k, float64), how far pairs with the same
    m − n differ from ⟨R_{m−n} q, k⟩, how far rotation moves a norm, and the angles θ_i."""
    generator = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 1, dim, generator=generator, dtype=torch.float64)
    positions = torch.arange(length)
    rq, rk = rotate(q.expand(length, dim), positions, base), rotate(k.expand(length, dim), positions, base)  # (length, d)
    dots = rq @ rk.T  # (m, n)
    offsets = positions[:, None] - positions[None, :]
    reference = rotate(q.expand(2 * length - 1, dim), torch.arange(-(length - 1), length), base) @ k[0]  # ⟨R_δ q, k⟩
    relative = (dots - reference[offsets + length - 1]).abs().max()
    norms = (torch.cat([rq.norm(dim=1) - q.norm(), rk.norm(dim=1) - k.norm()])).abs().max()
    metrics = {f"rope_dot/m_{m:02d}/n_{n:02d}": v for m, row in enumerate(dots.tolist()) for n, v in enumerate(row)}
    metrics.update({f"rope_theta/i_{i:02d}": t for i, t in enumerate(rope_theta(dim, base).tolist())})
    yield StepRecord(0, {**metrics, "rope_relative_error": float(relative), "rope_norm_error": float(norms),
                         "rope_dot_scale": float(q.norm() * k.norm()), "log_base": math.log10(base)})
