"""The analytic memory model: bytes per device for data-parallel training strategies.

Model states, after Rajbhandari et al., "ZeRO" (SC20): with Ψ parameters, N devices and
mixed-precision Adam, each device holds 2Ψ bytes of fp16/bf16 parameters, 2Ψ of
gradients and KΨ of optimizer state (K = 12: an fp32 master copy plus Adam's two moments):

    DDP      (2 + 2 + K)·Ψ                 stage 1  2Ψ + 2Ψ + K·Ψ/N
    stage 2  2Ψ + (2 + K)·Ψ/N              stage 3  (2 + 2 + K)·Ψ/N

In plain fp32 with Adam the three terms are 4 + 4 + 8 bytes per parameter. FSDP with
`reshard_after_forward=True` shards all three (≈ stage 3); with `False` it keeps the
unsharded parameters between forward and backward (≈ stage 2 at the peak). On top of the
shards, the peak holds gathered parameters (`transient_unsharded_bytes`): the root unit and
one block at a time with True, every unit with False.

Activations, after Korthikanti et al. 2022: one GPT layer stores s·b·h·(34 + 5·a·s/h)
bytes in 16-bit, for sequence length s, micro-batch b, hidden h and a attention heads.
The same bookkeeping for our smaller layer (no dropout, ReLU, fused attention, fp32) gives
4·(12·s·b·h + 2·a·s·b) bytes per layer (`encoder_activation_bytes`), which the small runs
measure exactly.
"""
from dataclasses import dataclass
from typing import Literal

Strategy = Literal["ddp", "zero1", "zero2", "zero3", "fsdp-zero3", "fsdp-zero2"]
GB = 1e9


@dataclass(frozen=True)
class ModelStates:
    """Bytes of each model-state term: per parameter (a precision) or per device (a result)."""
    params: float
    grads: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer


BytesPerParam = ModelStates  # the same three terms, counted per parameter

PRECISIONS: dict[str, BytesPerParam] = {
    "mixed (bf16 + fp32 Adam)": BytesPerParam(2, 2, 12),  # ZeRO's K = 12
    "fp32 Adam": BytesPerParam(4, 4, 8),
}


def model_states(n_params: float, world_size: int, strategy: Strategy, bpp: BytesPerParam) -> ModelStates:
    """Per-device model-state bytes for `strategy` (ZeRO's table; FSDP mapped onto its stages)."""
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    n = world_size
    p, g, o = bpp.params * n_params, bpp.grads * n_params, bpp.optimizer * n_params
    if strategy == "ddp":
        return ModelStates(p, g, o)
    if strategy == "zero1":
        return ModelStates(p, g, o / n)
    if strategy in ("zero2", "fsdp-zero2"):
        # Resident between steps, FSDP2 with reshard_after_forward=False shards all three;
        # the unsharded parameters live only from forward to backward (see `peak`).
        return ModelStates(p if strategy == "zero2" else p / n, g / n, o / n)
    if strategy in ("zero3", "fsdp-zero3"):
        return ModelStates(p / n, g / n, o / n)
    raise ValueError(f"unknown strategy {strategy!r}")


def transient_unsharded_bytes(strategy: str, unit_param_bytes: float, all_param_bytes: float,
                              root_param_bytes: float = 0.0) -> float:
    """Parameters all-gathered beyond the resident shards at the peak of a step.

    ZeRO-3-like FSDP holds the root's own parameters (FSDP2 keeps the root unit gathered
    from forward into backward) plus one block at a time (plus a prefetched next block on
    GPUs, which we leave out); ZeRO-2-like FSDP keeps every unit gathered from its forward
    to its backward."""
    if strategy.startswith("fsdp-zero3"):
        return root_param_bytes + unit_param_bytes
    if strategy.startswith("fsdp-zero2"):
        return all_param_bytes
    return 0.0


def encoder_activation_bytes(seq_len: int, batch: int, hidden: int, heads: int, layers: int, vocab: int,
                             bytes_per_value: float = 4.0) -> float:
    """What our small Transformer (embedding, pre-LN encoder blocks with a 4h ReLU MLP and no
    dropout, vocabulary head) keeps for backward at the end of its forward pass.

    Korthikanti et al.'s bookkeeping, applied to this layer: per token and hidden unit a block
    keeps 12 values — the first LayerNorm's output, q, k and v, the attention output, the
    residual sum, the second LayerNorm's output, the 4h ReLU output, and the block's output —
    plus 2 values per head and token that the fused attention kernel keeps instead of the
    s×s score matrix. The embedding output (h per token) and the logits (vocab per token) come
    on top. It matches the PyTorch tracker's "activations" byte for byte on CPU (tests)."""
    tokens = seq_len * batch
    per_layer = tokens * (12 * hidden + 2 * heads)
    return bytes_per_value * (tokens * hidden + layers * per_layer + tokens * vocab)


def transformer_activation_bytes(seq_len: int, batch: int, hidden: int, heads: int, layers: int,
                                 bytes_per_value: float = 2.0) -> float:
    """Korthikanti et al. 2022, Eq. 2 (no recomputation, no parallelism): per layer
    s·b·h·(34 + 5·a·s/h) bytes at 16 bits; scaled to `bytes_per_value`. A GPT layer with
    dropout and GeLU that materializes the attention scores: an upper bound for ours."""
    per_layer = seq_len * batch * hidden * (34 + 5 * heads * seq_len / hidden)
    return layers * per_layer * bytes_per_value / 2.0


def zero_paper_example() -> dict[str, float]:
    """ZeRO's Figure 1 example: Ψ = 7.5B, N = 64, K = 12 -> GB per device per stage."""
    bpp = PRECISIONS["mixed (bf16 + fp32 Adam)"]
    return {s: model_states(7.5e9, 64, s, bpp).total / GB for s in ("ddp", "zero1", "zero2", "zero3")}
