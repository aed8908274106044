"""A tiny decoder-only Transformer language model, and the measurements every LM scenario shares.

A language model gives every position a distribution over the next token. Trained on windows
of text with *teacher forcing* — the input at each position is the true previous text — one
forward pass scores every position at once: the loss is the mean cross-entropy

    L = −(1/T) Σ_t ln p(x_{t+1} | x_≤t)          (nats per token)

and the same number in other units: perplexity e^L (the effective number of equally likely
choices), bits per byte L / ln 2 × tokens/byte (comparable across tokenizers). No model
beats the source's entropy rate on held-out text (engines.sequence.text).

`TinyLM` is GPT-shaped and small enough for a CPU in seconds: token + learned position
embeddings, `layers` Pre-LN blocks (x + attn(LN x), x + MLP(LN x), GELU), a final LayerNorm
and an untied read-out. `causal=True` masks attention to the past (a decoder, for next-token
prediction); `causal=False` lets every position see the whole window (an encoder, for masked
LM: `masked_objective` hides 15% of the tokens, 80% as [MASK], 10% random, 10% kept, Devlin
et al. 2019). Attention is engines.sequence.attention.SelfAttention (SDPA). Every parameter
is drawn from a generator seeded by `LMSpec.seed`.

API (for scenarios and later engines):
- `TinyLM(LMSpec(vocab, context, ...))`; `model(ids)` → logits (batch, seq, vocab);
  `model.probe()` → a LayerProbe: per block, the MLP input weight's gradient norm and update
  ratio, and the block's output (the residual stream): its std and back-propagated gradient.
- `WindowBatches(tokens, context, batch, seed)`: random windows (batch, context + 1), forever;
  `evaluation_windows(tokens, context, limit)`: non-overlapping windows, in order.
- objectives for `engines.loop.training.train`: `next_token_objective`, `masked_objective`,
  `scheduled_sampling_objective` (Bengio et al. 2015: each input token replaced, with a
  probability that grows over training, by the model's own sample; targets stay the truth).
- `token_nll(model, windows)` → nats per target (n, context); `bits_per_byte`, `perplexity`.
- `generate(model, prompt, steps, temperature, generator)` → ids, the sampling entropy per step
  and (optionally) the model's distribution per step.
- `lm_arm(model, batches, steps, lr=..., log_every=..., on_log=...)`: one probed AdamW arm.
"""
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engines.loop.probes import LayerProbe
from engines.loop.records import Diverged, StepRecord
from engines.loop.training import train
from engines.sequence.attention import SelfAttention, init_seeded

IGNORE = -100  # a target position that counts for nothing (masked LM: the unmasked ones)
LN2 = math.log(2)


@dataclass(frozen=True)
class LMSpec:
    vocab: int
    context: int = 32     # the longest window the model reads (learned positions)
    d_model: int = 32
    layers: int = 2
    heads: int = 2
    ffn: int = 0          # 0: 4 · d_model
    causal: bool = True   # False: bidirectional (masked LM)
    seed: int = 0


class Block(nn.Module):
    """Pre-LN: x + attn(LN x), then x + MLP(LN x)."""

    def __init__(self, spec: LMSpec) -> None:
        super().__init__()
        width = spec.ffn or 4 * spec.d_model
        self.norm1, self.norm2 = nn.LayerNorm(spec.d_model), nn.LayerNorm(spec.d_model)
        self.attention = SelfAttention(spec.d_model, spec.heads, causal=spec.causal)
        self.up, self.act, self.down = nn.Linear(spec.d_model, width), nn.GELU(), nn.Linear(width, spec.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.feedforward(x)  # (batch, seq, d_model)

    def feedforward(self, x: torch.Tensor) -> torch.Tensor:
        """The MLP branch, added to the residual stream after attention's."""
        return self.down(self.act(self.up(self.norm2(x))))


class TinyLM(nn.Module):
    def __init__(self, spec: LMSpec) -> None:
        super().__init__()
        self.spec = spec
        self.tokens = nn.Embedding(spec.vocab, spec.d_model)
        self.positions = nn.Embedding(spec.context, spec.d_model)
        self.blocks = nn.ModuleList(Block(spec) for _ in range(spec.layers))
        self.norm, self.head = nn.LayerNorm(spec.d_model), nn.Linear(spec.d_model, spec.vocab)
        init_seeded(self, spec.seed)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if ids.shape[1] > self.spec.context:
            raise ValueError(f"a window of {ids.shape[1]} tokens is longer than the model's context {self.spec.context}")
        h = self.tokens(ids) + self.positions.weight[: ids.shape[1]]  # (batch, seq, d_model)
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))  # (batch, seq, vocab)

    def probe(self) -> LayerProbe:
        return LayerProbe([block.up for block in self.blocks], list(self.blocks))

    def parameter_counts(self) -> dict[str, int]:
        """Embedding (token table + read-out) against the rest: what a bigger vocabulary costs."""
        embedding = self.tokens.weight.numel() + self.head.weight.numel() + self.head.bias.numel()
        total = sum(p.numel() for p in self.parameters())
        return {"embedding_params": embedding, "body_params": total - embedding}


# --- data -----------------------------------------------------------------------------------------
class WindowBatches:
    """Random windows of `context + 1` tokens (inputs and next-token targets) from a 1-D token tensor:
    random crops anywhere in the stream, as GPT-style training takes them."""

    def __init__(self, tokens: torch.Tensor, context: int, batch: int, seed: int) -> None:
        if len(tokens) < context + 2:
            raise ValueError(f"{len(tokens)} tokens cannot fill a window of {context + 1}")
        self.tokens, self.context, self.batch = tokens, context, batch
        self.generator = torch.Generator().manual_seed(seed)
        self._offsets = torch.arange(context + 1)

    def __iter__(self) -> Iterator[torch.Tensor]:
        return self

    def __next__(self) -> torch.Tensor:
        starts = torch.randint(0, len(self.tokens) - self.context, (self.batch, 1), generator=self.generator)
        return self.tokens[starts + self._offsets]  # (batch, context + 1)


def evaluation_windows(tokens: torch.Tensor, context: int, limit: int | None = None) -> torch.Tensor:
    """Non-overlapping windows of `context + 1` tokens from the start, at most `limit` of them."""
    count = (len(tokens) - 1) // context
    count = count if limit is None else min(count, limit)
    starts = torch.arange(count)[:, None] * context
    return tokens[starts + torch.arange(context + 1)]  # (count, context + 1)


# --- objectives -------------------------------------------------------------------------------------
def next_token_objective(model: nn.Module) -> Callable:
    """Teacher forcing: predict window[:, 1:] from window[:, :-1]; top-1 accuracy on logged steps."""
    def objective(window: torch.Tensor, logging: bool):
        logits = model(window[:, :-1])
        targets = window[:, 1:]
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        if not logging:
            return loss
        return loss, {"accuracy": (logits.detach().argmax(-1) == targets).float().mean()}
    return objective


def mask_tokens(ids: torch.Tensor, mask_id: int, vocab: int, rate: float, generator: torch.Generator
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's corruption: each position chosen with probability `rate` (at least one); of those 80%
    become `mask_id`, 10% a random token below `vocab`, 10% stay. Targets: the chosen tokens, IGNORE elsewhere."""
    draws = torch.rand(ids.shape, generator=generator)
    chosen = draws < rate
    if not chosen.any():
        chosen.view(-1)[0] = True
    how = torch.rand(ids.shape, generator=generator)
    inputs = ids.clone()
    inputs[chosen & (how < 0.8)] = mask_id
    swap = chosen & (how >= 0.8) & (how < 0.9)
    inputs[swap] = torch.randint(0, vocab, (int(swap.sum()),), generator=generator)
    return inputs, torch.where(chosen, ids, torch.full_like(ids, IGNORE))


def masked_objective(model: nn.Module, mask_id: int, vocab: int, seed: int, rate: float = 0.15) -> Callable:
    """Masked LM on a bidirectional model: the loss on the chosen positions only."""
    generator = torch.Generator().manual_seed(seed)

    def objective(window: torch.Tensor, logging: bool):
        inputs, targets = mask_tokens(window, mask_id, vocab, rate, generator)
        logits = model(inputs)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
        if not logging:
            return loss
        keep = targets != IGNORE
        return loss, {"accuracy": (logits.detach().argmax(-1) == targets)[keep].float().mean()}
    return objective


def scheduled_sampling_objective(model: nn.Module, own_share: Callable[[int], float], seed: int) -> Callable:
    """Scheduled sampling for a Transformer (two passes, Mihaylova & Martins 2019): a no-grad pass on
    the true inputs samples the model's own token at every position; each input after the first is
    swapped for that sample with probability `own_share(step)`; the second pass trains on the mix
    against the true next tokens. The share used is logged as `own_share`."""
    generator, calls = torch.Generator().manual_seed(seed), [0]

    def objective(window: torch.Tensor, logging: bool):
        share = float(own_share(calls[0]))
        calls[0] += 1
        inputs, targets = window[:, :-1], window[:, 1:]
        if share > 0:
            with torch.no_grad():
                probs = torch.softmax(model(inputs).float(), -1)  # (batch, seq, vocab)
                own = torch.multinomial(probs.flatten(0, 1), 1, generator=generator).view_as(targets)
            # the model's guess for position t+1 may stand in for the input at t+1
            swap = torch.rand(targets.shape, generator=generator) < share
            swap[:, -1] = False
            mixed = inputs.clone()
            mixed[:, 1:] = torch.where(swap[:, :-1], own[:, :-1], inputs[:, 1:])
            inputs = mixed
        logits = model(inputs)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        if not logging:
            return loss
        return loss, {"own_share": torch.tensor(share)}
    return objective


# --- measurements -----------------------------------------------------------------------------------
@torch.no_grad()
def token_nll(model: nn.Module, windows: torch.Tensor, batch: int = 256) -> torch.Tensor:
    """−ln p(x_{t+1} | x_≤t) for every target of every window (teacher forcing): (n, context) nats."""
    out = []
    for chunk in windows.split(batch):
        logits = model(chunk[:, :-1]).float()
        out.append(F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten(), reduction="none").view(len(chunk), -1))
    return torch.cat(out)


def bits_per_byte(nats_per_token: float, bytes_per_token: float) -> float:
    """nats/token ÷ ln 2 ÷ bytes/token: the loss in a unit that does not depend on the tokenizer."""
    return nats_per_token / LN2 / bytes_per_token


def perplexity(nats_per_token: float) -> float:
    return math.exp(nats_per_token)


@dataclass(frozen=True)
class Generation:
    ids: torch.Tensor                 # (batch, prompt + steps)
    entropy: torch.Tensor             # (batch, steps): nats of the distribution each token was drawn from
    probs: torch.Tensor | None        # (batch, steps, vocab): the model's own (temperature 1) distribution


@torch.no_grad()
def generate(model: TinyLM, prompt: torch.Tensor, steps: int, temperature: float, generator: torch.Generator,
             keep_probs: bool = False) -> Generation:
    """Sample `steps` tokens after `prompt` (batch, p), each from softmax(logits / temperature) over the
    last `context` tokens, drawn with `generator`."""
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    was_training = model.training
    model.eval()
    ids, entropies, kept = prompt, [], []
    try:
        for _ in range(steps):
            logits = model(ids[:, -model.spec.context:])[:, -1].float()  # (batch, vocab)
            scaled = torch.log_softmax(logits / temperature, -1)
            entropies.append(-(scaled.exp() * scaled).sum(-1))
            if keep_probs:
                kept.append(torch.softmax(logits, -1))
            ids = torch.cat([ids, torch.multinomial(scaled.exp(), 1, generator=generator)], dim=1)
    finally:
        model.train(was_training)
    return Generation(ids, torch.stack(entropies, 1), torch.stack(kept, 1) if keep_probs else None)


def lm_arm(model: TinyLM, batches: Iterator[torch.Tensor], steps: int, *, lr: float, log_every: int,
           objective: Callable | None = None, on_log: Callable | None = None, weight_decay: float = 0.0,
           probe: bool = True) -> Iterator[StepRecord | Diverged | None]:
    """One arm through the shared loop: AdamW (betas 0.9, 0.95 as GPT-style LMs use), the model's
    probe, next-token prediction unless another objective is given."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay, foreach=True)
    yield from train(model, optimizer, batches, objective or next_token_objective(model), steps,
                     probe=model.probe() if probe else None, log_every=log_every, on_log=on_log)
