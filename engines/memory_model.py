"""The analytic memory model: bytes per device for data-parallel training strategies.

Model states, after Rajbhandari et al., "ZeRO" (SC20): with Ψ parameters, N devices and
mixed-precision Adam, each device holds 2Ψ bytes of fp16/bf16 parameters, 2Ψ of
gradients and KΨ of optimizer state (K = 12: an fp32 master copy plus Adam's two moments):

    DDP      (2 + 2 + K)·Ψ                 stage 1  2Ψ + 2Ψ + K·Ψ/N
    stage 2  2Ψ + (2 + K)·Ψ/N              stage 3  (2 + 2 + K)·Ψ/N

In plain fp32 with Adam the three terms are 4 + 4 + 8 bytes per parameter. FSDP with
`reshard_after_forward=True` shards all three (≈ stage 3); with `False` it keeps the
unsharded parameters between forward and backward (≈ stage 2 at the peak). Either way the
peak also holds one unsharded unit (the largest FSDP-wrapped block) while it computes.

Activations, after Korthikanti et al. 2022: one Transformer layer stores
s·b·h·(34 + 5·a·s/h) bytes in 16-bit, for sequence length s, micro-batch b, hidden h and
a attention heads; our small runs also measure a per-token figure to compare with.
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


def transient_unsharded_bytes(strategy: Strategy, unit_param_bytes: float, all_param_bytes: float) -> float:
    """Parameters all-gathered beyond the resident shards at the peak of a step.

    ZeRO-3-like FSDP holds one unit (plus the prefetched next one, which we leave out);
    ZeRO-2-like FSDP keeps every unit unsharded from its forward to its backward."""
    if strategy == "fsdp-zero3":
        return unit_param_bytes
    if strategy == "fsdp-zero2":
        return all_param_bytes
    return 0.0


def transformer_activation_bytes(seq_len: int, batch: int, hidden: int, heads: int, layers: int,
                                 bytes_per_value: float = 2.0) -> float:
    """Korthikanti et al. 2022, Eq. 2 (no recomputation, no parallelism): per layer
    s·b·h·(34 + 5·a·s/h) bytes at 16 bits; scaled to `bytes_per_value`."""
    per_layer = seq_len * batch * hidden * (34 + 5 * heads * seq_len / hidden)
    return layers * per_layer * bytes_per_value / 2.0


def zero_paper_example() -> dict[str, float]:
    """ZeRO's Figure 1 example: Ψ = 7.5B, N = 64, K = 12 -> GB per device per stage."""
    bpp = PRECISIONS["mixed (bf16 + fp32 Adam)"]
    return {s: model_states(7.5e9, 64, s, bpp).total / GB for s in ("ddp", "zero1", "zero2", "zero3")}
