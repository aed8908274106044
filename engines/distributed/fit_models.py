"""Two built-in decoder architectures for "will my model fit?": GPT-style and Llama-style.

**GPT-style** (Radford et al. 2019, as in nanoGPT): token and learned position embeddings,
`layers` pre-LN blocks of causal self-attention (one fused q/k/v projection, all heads
full size) and a 4h GELU MLP, a final LayerNorm and an untied vocabulary head; biases on.
Per block 12h² + 13h parameters, so Ψ ≈ 12·L·h² + 2·V·h (+ positions).

**Llama-style** (Touvron et al. 2023): no position embedding (RoPE rotates q and k), RMSNorm,
grouped-query attention (Ainslie et al. 2023: `kv_heads` key/value heads shared by the
`heads` query heads), a SwiGLU MLP (Shazeer 2020) of width `ffn` (default 8h/3 rounded up to
a multiple of 256, as Llama does), no biases, an untied head.

Attention goes through `F.scaled_dot_product_attention` (causal), which on CPU and GPU keeps
no s×s score matrix for backward. Both models are built by `build()` and carry `.blocks`,
a ModuleList: the units FSDP shards one by one and activation checkpointing wraps.
Weights are initialized by PyTorch's defaults: these models are measured, not trained.
"""
import math
from dataclasses import asdict, dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

Architecture = Literal["gpt", "llama"]


@dataclass(frozen=True)
class ArchitectureSpec:
    """A built-in model's shape."""
    architecture: Architecture = "gpt"
    layers: int = 12
    hidden: int = 768
    heads: int = 12
    vocab: int = 50304
    kv_heads: int | None = None   # Llama-style: key/value heads (GQA); None = heads (plain multi-head)
    ffn: int | None = None        # MLP width; None = 4h (GPT) or 8h/3 rounded up to 256 (Llama)
    max_seq: int = 2048           # GPT-style: rows of the learned position embedding

    def mlp_width(self) -> int:
        if self.ffn:
            return self.ffn
        if self.architecture == "gpt":
            return 4 * self.hidden
        return 256 * math.ceil(8 * self.hidden / 3 / 256)

    def to_dict(self) -> dict:
        return asdict(self)


class CausalSelfAttention(nn.Module):
    """Multi-head (or grouped-query) causal attention; RoPE on q and k when `rotary`."""

    def __init__(self, hidden: int, heads: int, kv_heads: int, bias: bool, rotary: bool) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.rotary = heads, kv_heads, hidden // heads, rotary
        self.qkv = nn.Linear(hidden, (heads + 2 * kv_heads) * self.head_dim, bias=bias)
        self.proj = nn.Linear(hidden, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        q, k, v = self.qkv(x).split([self.heads * self.head_dim, self.kv_heads * self.head_dim,
                                     self.kv_heads * self.head_dim], dim=-1)
        q = q.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)       # (batch, heads, seq, head_dim)
        k = k.view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)    # (batch, kv_heads, seq, head_dim)
        v = v.view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.rotary:
            q, k = rope(q), rope(k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads)
        return self.proj(y.transpose(1, 2).reshape(batch, seq, hidden))


def rope(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding (Su et al. 2021): rotate each pair of channels by position·θ_i."""
    seq, dim = x.shape[-2], x.shape[-1]
    inv_freq = base ** (-torch.arange(0, dim, 2, device=x.device, dtype=torch.float32) / dim)  # (dim/2,)
    angles = torch.outer(torch.arange(seq, device=x.device, dtype=torch.float32), inv_freq)   # (seq, dim/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class GPTBlock(nn.Module):
    def __init__(self, spec: ArchitectureSpec) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(spec.hidden)
        self.attention = CausalSelfAttention(spec.hidden, spec.heads, spec.heads, bias=True, rotary=False)
        self.norm2 = nn.LayerNorm(spec.hidden)
        self.up = nn.Linear(spec.hidden, spec.mlp_width())
        self.down = nn.Linear(spec.mlp_width(), spec.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class LlamaBlock(nn.Module):
    def __init__(self, spec: ArchitectureSpec) -> None:
        super().__init__()
        kv_heads = spec.kv_heads or spec.heads
        self.norm1 = nn.RMSNorm(spec.hidden)
        self.attention = CausalSelfAttention(spec.hidden, spec.heads, kv_heads, bias=False, rotary=True)
        self.norm2 = nn.RMSNorm(spec.hidden)
        self.gate_up = nn.Linear(spec.hidden, 2 * spec.mlp_width(), bias=False)  # SwiGLU's W and V in one matmul
        self.down = nn.Linear(spec.mlp_width(), spec.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class DecoderLM(nn.Module):
    """Embedding, `blocks`, a final norm and the vocabulary head: tokens (batch, seq) -> logits."""

    def __init__(self, spec: ArchitectureSpec) -> None:
        super().__init__()
        gpt = spec.architecture == "gpt"
        self.spec = spec
        self.embed = nn.Embedding(spec.vocab, spec.hidden)
        self.positions = nn.Embedding(spec.max_seq, spec.hidden) if gpt else None
        self.blocks = nn.ModuleList((GPTBlock if gpt else LlamaBlock)(spec) for _ in range(spec.layers))
        self.norm = nn.LayerNorm(spec.hidden) if gpt else nn.RMSNorm(spec.hidden)
        self.head = nn.Linear(spec.hidden, spec.vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)  # (batch, seq, hidden)
        if self.positions is not None:
            h = h + self.positions.weight[: tokens.shape[1]]
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))  # (batch, seq, vocab)


def check(spec: ArchitectureSpec) -> None:
    """ValueError naming the field when the shape cannot be built."""
    if spec.hidden % spec.heads:
        raise ValueError(f"hidden {spec.hidden} is not a multiple of heads {spec.heads}")
    kv_heads = spec.kv_heads or spec.heads
    if spec.architecture == "llama" and spec.heads % kv_heads:
        raise ValueError(f"heads {spec.heads} is not a multiple of kv_heads {kv_heads}")
    if spec.architecture == "llama" and (spec.hidden // spec.heads) % 2:
        raise ValueError(f"RoPE needs an even head size; hidden/heads = {spec.hidden // spec.heads}")


def build(spec: ArchitectureSpec) -> DecoderLM:
    check(spec)
    return DecoderLM(spec)


def n_params(spec: ArchitectureSpec) -> int:
    """Parameters of `build(spec)`, by formula (tests check it against the module)."""
    h, v, f = spec.hidden, spec.vocab, spec.mlp_width()
    if spec.architecture == "gpt":
        per_block = 4 * h + (3 * h * h + 3 * h) + (h * h + h) + (h * f + f) + (f * h + h)
        return v * h + spec.max_seq * h + spec.layers * per_block + 2 * h + h * v
    kv = (spec.kv_heads or spec.heads) * (h // spec.heads)
    per_block = 2 * h + h * (h + 2 * kv) + h * h + h * 2 * f + f * h
    return v * h + spec.layers * per_block + h + h * v


def gpt(layers: int = 12, hidden: int = 768, heads: int = 12, vocab: int = 50304, max_seq: int = 2048) -> DecoderLM:
    """A GPT-style model; an import-path factory too: `engines.distributed.fit_models:gpt`."""
    return build(ArchitectureSpec("gpt", layers, hidden, heads, vocab, max_seq=max_seq))


def llama(layers: int = 16, hidden: int = 2048, heads: int = 16, kv_heads: int = 4, vocab: int = 32000,
          ffn: int | None = None) -> DecoderLM:
    """A Llama-style model (SwiGLU, GQA, RoPE, RMSNorm)."""
    return build(ArchitectureSpec("llama", layers, hidden, heads, vocab, kv_heads=kv_heads, ffn=ffn))
