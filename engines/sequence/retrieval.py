"""What heads learn: a two-key lookup that one attention head cannot do and two can.

The context is `pairs` tokens, each a key and its value (embedded as E_key[k] + E_value[v];
keys distinct, values drawn with repetition), then `QUERIES` query tokens, each naming two
of the context's keys a and b (E_a[a] + E_b[b]). At every query the model must output both
values v_a and v_b. The model is attention only: embeddings, `layers` residual
self-attention layers (SDPA, no MLP), a LayerNorm and a linear read-out of 2 × values logits.

Why heads matter here: one head's output is one weighted mean of value vectors, linear in
E_key + E_value. Attending to a and b at once it reads E_v[v_a] + E_v[v_b] (+ keys): which
value went with which key is lost, so it gets one right and guesses the order of the other.
Two heads each make one lookup. With two layers a single head can do them in turn. With the
scores frozen uniform (`SelfAttention(uniform=True)`) every query sees the mean of all pairs:
only the bag of values, never which key holds which.
"""
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import train
from engines.sequence.attention import SelfAttention, init_seeded, residual_stack, stack_sdpa_gap

KEYS, VALUES, QUERIES, D_MODEL = 16, 16, 4, 32
EVAL_SIZE, BATCH = 256, 32


class LookupTask:
    """Batches of (keys, values, query a, query b) and the targets (v_a, v_b), from one generator."""

    def __init__(self, pairs: int, seed: int) -> None:
        self.pairs = pairs
        self.generator = torch.Generator().manual_seed(seed)

    def batch(self, size: int, generator: torch.Generator | None = None):
        g = generator or self.generator
        keys = torch.rand(size, KEYS, generator=g).argsort(1)[:, :self.pairs]  # (batch, pairs), distinct
        values = torch.randint(0, VALUES, (size, self.pairs), generator=g)
        picked = torch.rand(size, QUERIES, self.pairs, generator=g).argsort(-1)[..., :2]  # two distinct pairs per query
        a, b = keys.gather(1, picked[..., 0]), keys.gather(1, picked[..., 1])  # (batch, queries)
        targets = torch.stack([values.gather(1, picked[..., 0]), values.gather(1, picked[..., 1])], -1)
        return (keys, values, a, b), targets  # targets: (batch, queries, 2)

    def batches(self, size: int) -> Iterator:
        while True:
            yield self.batch(size)


class LookupTransformer(nn.Module):
    """Embeddings → `layers` × (x + attention(x)) → LayerNorm → two value read-outs per query."""

    def __init__(self, heads: int, layers: int = 1, uniform: bool = False, seed: int = 0) -> None:
        super().__init__()
        self.key, self.value = nn.Embedding(KEYS, D_MODEL), nn.Embedding(VALUES, D_MODEL)
        self.query_a, self.query_b = nn.Embedding(KEYS, D_MODEL), nn.Embedding(KEYS, D_MODEL)
        self.attention = nn.ModuleList(SelfAttention(D_MODEL, heads, uniform=uniform) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(D_MODEL), nn.Linear(D_MODEL, 2 * VALUES)
        init_seeded(self, seed)

    def embed(self, inputs) -> torch.Tensor:
        keys, values, a, b = inputs
        return torch.cat([self.key(keys) + self.value(values), self.query_a(a) + self.query_b(b)], 1)  # (batch, seq, d)

    def forward(self, inputs, written: bool = False) -> torch.Tensor:
        x, _ = residual_stack(self.attention, self.embed(inputs), written)
        queries = x[:, -QUERIES:]
        return self.head(self.norm(queries)).unflatten(-1, (2, VALUES))  # (batch, queries, 2, values)

    def maps(self, inputs) -> torch.Tensor:
        """Attention weights of every layer: (layers, batch, heads, seq, seq), written out."""
        _, per_layer = residual_stack(self.attention, self.embed(inputs))
        return torch.stack([layer.weights(x) for layer, x in zip(self.attention, per_layer)])


def lookup_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 2), targets.flatten())


def lookup_accuracy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The share of looked-up values right (both lookups of every query count)."""
    return (logits.argmax(-1) == targets).float().mean()


@dataclass(frozen=True)
class HeadsArm:
    heads: int
    layers: int = 1
    uniform: bool = False  # the attention scores frozen at 0: every position takes the mean
    pairs: int = 8
    lr: float = 5e-3
    seed: int = 0


def example_metrics(inputs) -> dict[str, float]:
    """The drawn example's tokens: key and value of each pair, the two keys of each query."""
    keys, values, a, b = (t[0].tolist() for t in inputs)
    tokens = {f"example/key_{i:02d}": k for i, k in enumerate(keys)}
    tokens.update({f"example/value_{i:02d}": v for i, v in enumerate(values)})
    tokens.update({f"example/query_{i:02d}/{n}": x for i, (qa, qb) in enumerate(zip(a, b)) for n, x in (("a", qa), ("b", qb))})
    return {name: float(value) for name, value in tokens.items()}


def map_metrics(maps: torch.Tensor) -> dict[str, float]:
    """`attn/l1/h2/q03/p11`: the weight query row 3 (of the QUERIES) puts on position 11; one `.tolist()`."""
    layers, heads, queries, positions = maps.shape
    flat = iter(maps.double().flatten().tolist())
    return {f"attn/l{l + 1}/h{h + 1}/q{q:02d}/p{p:02d}": next(flat) for l in range(layers)
            for h in range(heads) for q in range(queries) for p in range(positions)}


def train_heads_arm(spec: HeadsArm, steps: int, log_every: int, snapshots: int = 10) -> Iterator[StepRecord | Diverged | None]:
    """One arm on the seeded task (the same batches in every arm): loss, batch and held-out
    accuracy, |SDPA − written| on the drawn example, and its attention maps `snapshots` times."""
    model = LookupTransformer(spec.heads, spec.layers, spec.uniform, seed=spec.seed)
    task = LookupTask(spec.pairs, seed=spec.seed + 1)
    held_out = task.batch(EVAL_SIZE, torch.Generator().manual_seed(spec.seed + 2))
    example = tuple(t[:1] for t in held_out[0])
    logged = {"count": 0}
    map_every = max(1, (steps // log_every) // snapshots)

    def measure(step: int) -> dict:
        with torch.no_grad():
            values = {"eval_accuracy": lookup_accuracy(model(held_out[0]), held_out[1]),
                      **stack_sdpa_gap(model.attention, model.embed(example))}
            if logged["count"] % map_every == 0 or step == steps - 1:
                values.update(map_metrics(model.maps(example)[:, 0, :, -QUERIES:, :]))
            if logged["count"] == 0:
                values.update(example_metrics(example))
        logged["count"] += 1
        return values

    def objective(batch, logging: bool):
        inputs, targets = batch
        logits = model(inputs)
        loss = lookup_loss(logits, targets)
        return (loss, {"accuracy": lookup_accuracy(logits.detach(), targets)}) if logging else loss

    optimizer = torch.optim.Adam(model.parameters(), lr=spec.lr, foreach=True)
    yield from train(model, optimizer, task.batches(BATCH), objective, steps, log_every=log_every, on_log=measure)
