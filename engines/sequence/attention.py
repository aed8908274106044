"""Scaled dot-product attention, written out and from torch, with the position signals it needs.

Attention mixes values by weights it computes itself:

    Attention(Q, K, V) = softmax(QKᵀ/√d_k) V

`SelfAttention` runs it through `torch.nn.functional.scaled_dot_product_attention` (SDPA)
and can redo the same computation written out (`written_attention`), which also hands
back the weights SDPA never shows: the scenarios draw those and record the largest
difference between the two outputs.

For unit-variance q and k of dimension d_k, q·k is a sum of d_k unit-variance products:
Var(q·k) = d_k. Unscaled, the scores' spread grows as √d_k, the softmax saturates (one
weight → 1, entropy → 0) and its Jacobian diag(p) − ppᵀ, so the gradient to the scores,
vanishes. Dividing by √d_k keeps Var = 1 at any d_k (`score_sweep` measures all of it).

Without any position signal self-attention is permutation-equivariant: permuting the
tokens permutes the outputs. Two ways to break it are here: add a vector per position to
the tokens (`sinusoidal`, or a learned table), or rotate q and k by angles that grow with
the position (RoPE, Su et al. 2021): pairs (x_{2i}, x_{2i+1}) turn by m·θ_i with
θ_i = base^(−2i/d), so ⟨R_m q, R_n k⟩ depends on m − n only and norms are kept.
"""
import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from engines.loop.records import StepRecord
from engines.supervised.models import init_linear

ROPE_BASE = 10000.0
SDPA_CHECKS = 64  # queries of the sweep on which SDPA is checked against the written formula  # Su et al. 2021, as the sinusoidal encoding of Vaswani et al. 2017


# --- the attention computation ----------------------------------------------------------------
def written_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      scale: float | None = None, causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ · scale) v and the weights; scale defaults to 1/√d_k, as SDPA's does. `causal`:
    query i sees keys j ≤ i only (scores above the diagonal are −∞ before the softmax)."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale  # (..., queries, keys)
    if causal:
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def rope_theta(dim: int, base: float = ROPE_BASE, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """θ_i = base^(−2i/d) for i = 0 … d/2 − 1: one angle per pair of dimensions."""
    return base ** (-torch.arange(0, dim, 2, dtype=dtype) / dim)


def rotate(x: torch.Tensor, positions: torch.Tensor, base: float = ROPE_BASE) -> torch.Tensor:
    """R_m x: each pair (x_{2i}, x_{2i+1}) of x (..., seq, d) turned by positions[m]·θ_i."""
    angles = positions.to(torch.float64)[:, None] * rope_theta(x.shape[-1], base)  # (seq, d/2), float64 angles
    return rotate_with(x, angles.cos().to(x.dtype), angles.sin().to(x.dtype))


def rotate_with(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """[x_{2i}, x_{2i+1}] ← [x_{2i} cos − x_{2i+1} sin, x_{2i} sin + x_{2i+1} cos], per position."""
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def sinusoidal(length: int, dim: int) -> torch.Tensor:
    """PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(…) (Vaswani et al. 2017): (length, dim)."""
    angles = torch.arange(length, dtype=torch.float64)[:, None] * rope_theta(dim, 10000.0)  # (length, d/2)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2).float()


class SelfAttention(nn.Module):
    """Multi-head self-attention through SDPA: W_Q, W_K, W_V in one Linear, W_O after.

    `rope_base` rotates q and k (RoPE); `uniform` freezes every score at 0 (SDPA's scale 0),
    so each position takes the plain mean of the values: the same weights, no attention.
    `causal`: each position attends to itself and earlier positions only (a decoder)."""

    def __init__(self, d_model: int, heads: int, *, rope_base: float | None = None, uniform: bool = False,
                 causal: bool = False) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
        self.heads, self.rope_base, self.uniform, self.causal = heads, rope_base, uniform, causal
        self._rotations: dict[int, torch.Tensor] = {}  # length -> positions, made once per length
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v per head: (batch, heads, seq, d_head) each; q and k rotated under RoPE."""
        batch, length, d_model = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, d_model // self.heads).permute(2, 0, 3, 1, 4)
        if self.rope_base is not None:
            cos, sin = self.rotation(length, q.shape[-1], q.dtype)
            q, k = rotate_with(q, cos, sin), rotate_with(k, cos, sin)
        return q, k, v

    def rotation(self, length: int, dim: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of m·θ_i for m < length, (length, d/2) each: the angles in float64, once."""
        if length not in self._rotations:
            angles = torch.arange(length, dtype=torch.float64)[:, None] * rope_theta(dim, self.rope_base)
            self._rotations[length] = torch.stack([angles.cos(), angles.sin()]).to(dtype)
        return self._rotations[length][0], self._rotations[length][1]

    def forward(self, x: torch.Tensor, written: bool = False) -> torch.Tensor:
        q, k, v = self.project(x)
        scale = 0.0 if self.uniform else None
        mixed = (written_attention(q, k, v, scale, self.causal)[0] if written else
                 F.scaled_dot_product_attention(q, k, v, scale=scale, is_causal=self.causal))
        return self.out(mixed.transpose(1, 2).flatten(2))  # (batch, seq, d_model)

    def weights(self, x: torch.Tensor) -> torch.Tensor:
        """The attention weights SDPA applies, written out: (batch, heads, queries, keys)."""
        q, k, v = self.project(x)
        return written_attention(q, k, v, 0.0 if self.uniform else None, self.causal)[1]


def residual_stack(layers: nn.ModuleList, x: torch.Tensor, written: bool = False) -> tuple[torch.Tensor, list]:
    """x ← x + attention(x) per layer; also each layer's input (to read its weights from)."""
    inputs = []
    for layer in layers:
        inputs.append(x)
        x = x + layer(x, written)
    return x, inputs


def sdpa_gap(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None) -> dict[str, torch.Tensor]:
    """max |SDPA − written-out softmax(QKᵀ·scale)V| on the same q, k, v: in float64 (the formula:
    rounding only, ~1e-16) and in their own float32 (SDPA's CPU kernel sums in another order)."""
    def gap(dtype: torch.dtype) -> torch.Tensor:
        q_, k_, v_ = (t.to(dtype) for t in (q, k, v))
        return (F.scaled_dot_product_attention(q_, k_, v_, scale=scale) - written_attention(q_, k_, v_, scale)[0]).abs().max()
    return {"sdpa_max_abs_diff": gap(torch.float64), "sdpa_max_abs_diff_fp32": gap(torch.float32)}


def stack_sdpa_gap(layers: nn.ModuleList, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """`sdpa_gap` of every layer's q, k, v in the residual stack, the largest of each."""
    _, inputs = residual_stack(layers, x)
    gaps = [sdpa_gap(*layer.project(h), 0.0 if layer.uniform else None) for layer, h in zip(layers, inputs)]
    return {name: torch.stack([g[name] for g in gaps]).max() for name in gaps[0]}


def init_seeded(model: nn.Module, seed: int) -> nn.Module:
    """Every parameter drawn from `generator` with PyTorch's own default rules (never the global RNG)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                init_linear(module, "pytorch-default", generator)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, generator=generator)  # nn.Embedding: N(0, 1)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
    return model


# --- why √d_k: random unit-variance q and k -----------------------------------------------------
def softmax_probe(scores: torch.Tensor, upstream: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per row of scores (queries, keys): the softmax's entropy (nats) and largest weight, and
    ‖∂L/∂scores‖ for L = Σ_j p_j g_j (g: an upstream gradient), taken by autograd."""
    scores = scores.detach().requires_grad_()
    with torch.enable_grad():
        p = torch.softmax(scores, dim=-1)
        (grad,) = torch.autograd.grad((p * upstream).sum(), scores)
    p = p.detach()
    entropy = -(p * torch.log(p.clamp_min(1e-45))).sum(-1)
    return {"entropy": entropy.mean(), "max_weight": p.max(-1).values.mean(), "grad_scores": grad.norm(dim=-1).mean()}


def score_sweep(dims: list[int], keys: int, queries: int, seed: int) -> Iterator[StepRecord]:
    """One record per d_k (its step is d_k): Var(q·k) unscaled and scaled, the softmax's entropy,
    largest weight and score gradient both ways, SDPA against the written formula, and the
    sorted weights of query 0 (the example drawn)."""
    for d_k in dims:
        generator = torch.Generator().manual_seed(seed * 1009 + d_k)
        q = torch.randn(queries, 1, d_k, generator=generator)  # unit-variance entries
        k = torch.randn(queries, keys, d_k, generator=generator)
        v = torch.randn(SDPA_CHECKS, keys, d_k, generator=generator)  # values only for the SDPA check
        upstream = torch.randn(queries, keys, generator=generator)
        raw = (q @ k.transpose(-2, -1)).squeeze(1)  # (queries, keys)
        pairs = max(8192, 2 ** 19 // d_k)  # independent (q, k) pairs for the variance: ≤ 1.6% noise at any d_k
        products = (torch.randn(pairs, d_k, generator=generator) * torch.randn(pairs, d_k, generator=generator)).sum(1)
        metrics = {"var_qk": products.var(), "var_qk_scaled": (products / math.sqrt(d_k)).var()}
        for name, scores in (("unscaled", raw), ("scaled", raw / math.sqrt(d_k))):
            probe = softmax_probe(scores, upstream)
            metrics.update({f"{what}/{name}": value for what, value in probe.items()})
            ordered = torch.softmax(scores[0], -1).sort(descending=True).values
            metrics.update({f"example_weight/{name}/rank_{i:02d}": w for i, w in enumerate(ordered)})
        metrics.update(sdpa_gap(q[:SDPA_CHECKS], k[:SDPA_CHECKS], v))
        names = list(metrics)
        values = torch.stack([metrics[n].double() for n in names]).tolist()  # one sync per d_k
        yield StepRecord(d_k, dict(zip(names, values)))
