"""4-bit NormalFloat (NF4), blockwise absmax and double quantization, as QLoRA defines them (Dettmers et al. 2023).

**The code.** Trained weights are close to N(0, σ²) within a block. A 4-bit code for such data
spends its 16 values where the data is: at quantiles of N(0, 1). With Q = the inverse CDF
(`torch.distributions.Normal(0, 1).icdf`) and probabilities spaced evenly from ½ to 1 − δ:

    positive:  Q(p) for 8 values of p = linspace(1 − δ, ½, 9)[:-1]      (8 values, largest first)
    negative: −Q(p) for 7 values of p = linspace(1 − δ, ½, 8)[:-1]      (7 values)
    plus an exact 0, all divided by the largest, Q(1 − δ), so the code spans [−1, 1].

δ = ½(1/32 + 1/30) keeps Q finite at the ends: half of a 16-way and of a 15-way step in
probability. The split is asymmetric (8 positive, 7 negative, one zero) so that 0 is exact: a
symmetric 16-value code has no zero, and padding and zero weights would be rounded away. The 16
values equal bitsandbytes' NF4 table to ~2e-7 (tests/test_qlora.py checks both).

**Blockwise absmax.** The weights are cut into blocks of B (64); each block keeps c = max|w| in
float32 and each weight the index of the code value nearest w/c: 4 bits per weight plus 32/B
bits (0.5 at B = 64). Dequantized: ŵ = c · code[index]. One outlier only spoils its own block.

**Double quantization.** The constants themselves are quantized: their mean is taken off (they
are all positive) and the rest is stored as 8-bit codes in blocks of B₂ = 256 with one float32
scale each, 8/B + 32/(B·B₂) bits per weight (0.127 at 64, 256): a saving of 0.373 bits per
weight. The paper stores the second level as 8-bit floats; here it is a linear int8 code
(absmax/127), the same bit count.

**int4 absmax** at the same bits and block: Δ = c/7 and q = round(w/Δ) ∈ [−7, 7], through
`engines.numerics.quantization.fake_quantize_by_hand`: evenly spaced levels, right for
uniform data, wasteful for the normal bell.

`QuantizedWeight` is a `torch.nn.utils.parametrize` parametrization: the layer's stored state
is the packed codes (two per byte) and the constants, and `layer.weight` is dequantized from
them at every access, as bitsandbytes' Linear4bit does in its forward pass.
"""
import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.distributions import Normal

from engines.numerics.quantization import fake_quantize_by_hand

DELTA = 0.5 * (1 / 32 + 1 / 30)  # 1 − δ = 0.9677083, the largest probability quantized
INT4_LEVELS = 7                  # int4 absmax: q ∈ [−7, 7]
CONSTANT_BITS, SECOND_BITS = 32, 8


def nf4_code(dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The 16 NF4 values, sorted, in [−1, 1] with an exact 0 (8 positive, 7 negative)."""
    normal = Normal(torch.tensor(0.0, dtype=dtype), torch.tensor(1.0, dtype=dtype))
    positive = normal.icdf(torch.linspace(1 - DELTA, 0.5, 9, dtype=dtype)[:-1])    # 8 values > 0
    negative = -normal.icdf(torch.linspace(1 - DELTA, 0.5, 8, dtype=dtype)[:-1])   # 7 values < 0
    values = torch.cat([negative, torch.zeros(1, dtype=dtype), positive]).sort().values
    return values / values.max()


def blocks_of(flat: torch.Tensor, block: int) -> torch.Tensor:
    """(n,) → (⌈n/block⌉, block), the last block padded with zeros (0 is exact in every code here)."""
    pad = (-flat.numel()) % block
    return torch.cat([flat, flat.new_zeros(pad)]).view(-1, block)


def nearest(x: torch.Tensor, code: torch.Tensor) -> torch.Tensor:
    """Index of the code value nearest each x (code sorted): the midpoints between values are the boundaries."""
    midpoints = (code[1:] + code[:-1]) / 2
    return torch.bucketize(x, midpoints.to(x.dtype)).to(torch.uint8)


def pack(indices: torch.Tensor) -> torch.Tensor:
    """Two 4-bit indices per byte: (n,) uint8 with n even → (n/2,) uint8."""
    return (indices[0::2] << 4) | indices[1::2]


def unpack(packed: torch.Tensor) -> torch.Tensor:
    return torch.stack([packed >> 4, packed & 15], dim=1).flatten()


def nf4_blockwise(weight: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(packed codes, float32 absmax per block) of a weight tensor."""
    blocks = blocks_of(weight.detach().float().flatten(), block)  # (n_blocks, block)
    absmax = blocks.abs().amax(1).clamp_min(1e-12)                 # (n_blocks,) float32
    indices = nearest(blocks / absmax[:, None], nf4_code(torch.float32))
    return pack(indices.flatten()), absmax


def nf4_dequantize(packed: torch.Tensor, absmax: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    code = nf4_code(torch.float32)
    values = code[unpack(packed).long()].view(len(absmax), -1) * absmax[:, None]  # ŵ = c · code[index]
    return values.flatten()[: math.prod(shape)].view(shape)


@dataclass(frozen=True)
class DoubleQuantized:
    """The absmax constants, quantized: int8 codes, one float32 scale per B₂ constants, the mean taken off."""
    codes: torch.Tensor    # (n_blocks,) int8
    scales: torch.Tensor   # (⌈n_blocks/B₂⌉,) float32
    offset: torch.Tensor   # () float32


def double_quantize(absmax: torch.Tensor, block: int) -> DoubleQuantized:
    offset = absmax.mean()
    blocks = blocks_of(absmax - offset, block)                             # (n2, B₂)
    scales = blocks.abs().amax(1).clamp_min(1e-12) / 127                   # Δ₂ = max|c − mean| / 127
    codes = torch.round(blocks / scales[:, None]).clamp(-127, 127).to(torch.int8)
    return DoubleQuantized(codes.flatten()[: len(absmax)], scales, offset)


def double_dequantize(dq: DoubleQuantized, block: int) -> torch.Tensor:
    blocks = blocks_of(dq.codes.float(), block) * dq.scales[:, None]
    return blocks.flatten()[: len(dq.codes)] + dq.offset


def int4_absmax(weight: torch.Tensor, block: int) -> torch.Tensor:
    """Blockwise int4 absmax, dequantized: Δ = max|w|/7 per block, q = round(w/Δ) ∈ [−7, 7]."""
    blocks = blocks_of(weight.detach().float().flatten(), block)
    scale = blocks.abs().amax(1, keepdim=True).clamp_min(1e-12) / INT4_LEVELS  # (n_blocks, 1)
    values = fake_quantize_by_hand(blocks, scale, 0, -INT4_LEVELS, INT4_LEVELS)
    return values.flatten()[: weight.numel()].view(weight.shape)


def nf4_roundtrip(weight: torch.Tensor, block: int) -> torch.Tensor:
    packed, absmax = nf4_blockwise(weight, block)
    return nf4_dequantize(packed, absmax, weight.shape)


def relative_error(weight: torch.Tensor, approx: torch.Tensor) -> float:
    """‖ŵ − w‖² / ‖w‖²: the share of the weights' energy the rounding changed."""
    return float((approx - weight).pow(2).sum() / weight.pow(2).sum().clamp_min(1e-30))


def constant_bits(block: int, second_block: int | None) -> float:
    """Bits per weight of the constants: 32/B, or 8/B + 32/(B·B₂) with double quantization."""
    if second_block is None:
        return CONSTANT_BITS / block
    return SECOND_BITS / block + CONSTANT_BITS / (block * second_block)


class QuantizedWeight(nn.Module):
    """A parametrization: the layer stores packed NF4 codes and double-quantized constants; `weight`
    is dequantized from them at every access (no float copy kept). Register with `unsafe=True`."""

    def __init__(self, shape: torch.Size, block: int, second_block: int) -> None:
        super().__init__()
        self.shape, self.block, self.second_block = shape, block, second_block
        self.absmax_bytes = 0  # what the float32 absmax would have taken without double quantization

    def right_inverse(self, weight: torch.Tensor) -> tuple[torch.Tensor, ...]:
        packed, absmax = nf4_blockwise(weight, self.block)
        self.absmax_bytes = absmax.numel() * absmax.element_size()
        dq = double_quantize(absmax, self.second_block)
        return packed, dq.codes, dq.scales, dq.offset

    def forward(self, packed: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor,
                offset: torch.Tensor) -> torch.Tensor:
        absmax = double_dequantize(DoubleQuantized(codes, scales, offset), self.second_block)
        return nf4_dequantize(packed, absmax, self.shape)


def quantize_linear(layer: nn.Linear, block: int, second_block: int) -> QuantizedWeight:
    """Replace a frozen Linear's weight by its NF4 state (packed codes, constants); returns the parametrization."""
    from torch.nn.utils import parametrize
    layer.weight.requires_grad_(False)
    quantizer = QuantizedWeight(layer.weight.shape, block, second_block)
    parametrize.register_parametrization(layer, "weight", quantizer, unsafe=True)
    return quantizer
