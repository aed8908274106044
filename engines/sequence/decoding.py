"""Decoding a TinyLM with a key/value cache: each new token runs one position through the blocks.

`model(ids)[:, -1]` recomputes every earlier position to score the next token, so writing n
tokens after a prompt of p costs (p + 1) + … + (p + n) positions. Under causal attention an
earlier position's keys and values never change once written, so they can be kept: the prompt
runs once (its keys and values per block are the cache), then each new token runs alone,
attending to the cached keys and values and its own. The logits are `model(ids)[:, -1]`'s up
to float rounding (SDPA sums one query's row in another order): tests/test_decoding.py.

API: `Cache.prefill(model, prompts)` → (cache, last logits); `cache.step(tokens)` → the next
logits, (batch, vocab). The model must be a causal TinyLM without RoPE (every LM scenario's).
"""
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from engines.sequence.lm import TinyLM


@dataclass
class Cache:
    model: TinyLM
    keys: list[torch.Tensor] = field(default_factory=list)    # per block: (batch, heads, length, d_head)
    values: list[torch.Tensor] = field(default_factory=list)

    @property
    def length(self) -> int:
        return self.keys[0].shape[2]

    @classmethod
    @torch.no_grad()
    def prefill(cls, model: TinyLM, prompts: torch.Tensor) -> tuple["Cache", torch.Tensor]:
        attention = model.blocks[0].attention
        if not model.spec.causal or attention.rope_base is not None or attention.uniform:
            raise ValueError("a key/value cache needs causal attention without RoPE or uniform weights")
        cache = cls(model)
        return cache, cache._run(prompts, causal=True)[:, -1]

    @torch.no_grad()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (batch, 1): the next token of every row -> the logits after it, (batch, vocab)."""
        if self.length >= self.model.spec.context:
            raise ValueError(f"the cache holds {self.length} positions: the model's context is {self.model.spec.context}")
        return self._run(tokens, causal=False)[:, -1]

    def _run(self, ids: torch.Tensor, causal: bool) -> torch.Tensor:
        start = self.length if self.keys else 0
        h = self.model.tokens(ids) + self.model.positions.weight[start:start + ids.shape[1]]  # (batch, new, d_model)
        for i, block in enumerate(self.model.blocks):
            q, k, v = block.attention.project(block.norm1(h))  # (batch, heads, new, d_head)
            if len(self.keys) > i:
                self.keys[i], self.values[i] = torch.cat([self.keys[i], k], 2), torch.cat([self.values[i], v], 2)
            else:
                self.keys.append(k)
                self.values.append(v)
            mixed = F.scaled_dot_product_attention(q, self.keys[i], self.values[i], is_causal=causal)
            h = h + block.attention.out(mixed.transpose(1, 2).flatten(2))
            h = h + block.feedforward(h)
        return self.model.head(self.model.norm(h))  # (batch, new, vocab)
