"""Quantization: round a trained network's numbers onto a grid of 2^b levels, and measure the damage.

A uniform quantizer with step Δ = `scale` maps x to q = clamp(round(x/Δ) + z, q_min, q_max)
and back to x̂ = (q − z)·Δ. The observers of `torch.ao.quantization` choose Δ and the
zero-point z from the range they saw:

    symmetric:   Δ = max|x| / ((q_max − q_min)/2),   z = 0         (int8: max|x|/127.5)
    affine:      Δ = (max − min) / (q_max − q_min),   z = q_min − round(min/Δ)

with the range first widened to include 0. For data spread over many bins the rounding
error is uniform on [−Δ/2, Δ/2], so MSE = Δ²/12. Δ ∝ 1/(2^b − 1), so each extra bit
(nearly) halves it: the signal-to-quantization-noise ratio grows 20·log10(2) ≈ 6.02 dB per
bit (6.3 from 4 to 5 bits, tending to 6.02).

`torch.fake_quantize_*` rounds with the straight-through estimator in its backward pass:
∂x̂/∂x = 1 where the code lands inside [q_min, q_max], 0 where it is clamped
(`clamp_mask` computes that mask by hand). The model, its task and the PTQ/QAT arms are
in `engines.numerics.quantized_mlp`.
"""
import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.ao.quantization import (MinMaxObserver, MovingAverageMinMaxObserver,
                                   MovingAveragePerChannelMinMaxObserver, PerChannelMinMaxObserver)


@dataclass(frozen=True)
class Scheme:
    """How one tensor is quantized: bit width, symmetric or affine, one scale or one per row."""

    bits: int
    symmetric: bool = True
    per_channel: bool = False

    @property
    def quant_range(self) -> tuple[int, int]:
        return quant_range(self.bits, self.symmetric)


def quant_range(bits: int, symmetric: bool) -> tuple[int, int]:
    """Signed codes [−2^(b−1), 2^(b−1)−1] for symmetric, unsigned [0, 2^b−1] for affine."""
    if not 2 <= bits <= 8:
        raise ValueError(f"bits must be from 2 to 8, got {bits}")
    return (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if symmetric else (0, 2 ** bits - 1)


def make_observer(scheme: Scheme, moving_average: bool = False) -> nn.Module:
    """The torch.ao observer for `scheme`, with quant_min/quant_max narrowed to its bit width."""
    q_min, q_max = scheme.quant_range
    dtype = torch.qint8 if scheme.symmetric else torch.quint8
    kwargs = dict(dtype=dtype, quant_min=q_min, quant_max=q_max)
    if moving_average:  # what torch's default QAT qconfig observes with: min/max tracked at rate 0.01
        kwargs["averaging_constant"] = 0.01
    if scheme.per_channel:
        qscheme = torch.per_channel_symmetric if scheme.symmetric else torch.per_channel_affine
        observer = MovingAveragePerChannelMinMaxObserver if moving_average else PerChannelMinMaxObserver
        return observer(ch_axis=0, qscheme=qscheme, **kwargs)
    qscheme = torch.per_tensor_symmetric if scheme.symmetric else torch.per_tensor_affine
    return (MovingAverageMinMaxObserver if moving_average else MinMaxObserver)(qscheme=qscheme, **kwargs)


def qparams(x: torch.Tensor, scheme: Scheme) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, zero_point) the observer picks for `x`: shape (1,) per-tensor, (rows,) per-channel."""
    observer = make_observer(scheme)
    observer(x.detach())
    scale, zero_point = observer.calculate_qparams()
    return scale, zero_point.to(torch.int32)


def qparams_by_formula(x_min: float, x_max: float, bits: int, symmetric: bool) -> tuple[float, int]:
    """The textbook formula the observer implements (checked against it by the tests)."""
    q_min, q_max = quant_range(bits, symmetric)
    x_min, x_max = min(x_min, 0.0), max(x_max, 0.0)  # the range always contains 0, so 0 is exact
    if symmetric:
        return max(-x_min, x_max) / ((q_max - q_min) / 2), 0
    scale = (x_max - x_min) / (q_max - q_min)
    return scale, int(min(q_max, max(q_min, q_min - round(x_min / scale))))


def fake_quantize(x: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor, scheme: Scheme) -> torch.Tensor:
    """x̂ = (clamp(round(x/Δ) + z) − z)·Δ with torch's kernels; backward is the clamp-masked STE."""
    q_min, q_max = scheme.quant_range
    if scheme.per_channel:
        return torch.fake_quantize_per_channel_affine(x, scale, zero_point, 0, q_min, q_max)
    return torch.fake_quantize_per_tensor_affine(x, scale, zero_point, q_min, q_max)


def fake_quantize_by_hand(x: torch.Tensor, scale: float, zero_point: int, q_min: int, q_max: int) -> torch.Tensor:
    """The same arithmetic spelled out. torch multiplies by 1/Δ (not x/Δ), and torch.round
    rounds half to even; only this exact order matches its kernel bit for bit."""
    scale = torch.as_tensor(scale, dtype=x.dtype)  # the kernel computes 1/Δ in float32, as here
    inv_scale = 1.0 / scale
    q = torch.clamp(torch.round(x * inv_scale) + zero_point, q_min, q_max)
    return (q - zero_point) * scale


def clamp_mask(x: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor, scheme: Scheme) -> torch.Tensor:
    """True where round(x/Δ) + z lands inside [q_min, q_max]: where the straight-through
    estimator passes the gradient (torch's kernel arithmetic: x·(1/Δ), half to even)."""
    q_min, q_max = scheme.quant_range
    if scheme.per_channel:
        scale, zero_point = scale[:, None], zero_point[:, None]  # (rows, 1): one Δ per output row
    codes = torch.round(x * (1.0 / scale)) + zero_point
    return (codes >= q_min) & (codes <= q_max)


def typical_qparams(x: torch.Tensor, scheme: Scheme) -> tuple[float, int]:
    """(scale, zero_point) of the tensor, or per channel of the channel with the median scale."""
    scale, zero_point = qparams(x, scheme)
    middle = int(scale.argsort()[len(scale) // 2])
    return float(scale[middle]), int(zero_point[middle])


def weight_error(weight: torch.Tensor, scheme: Scheme) -> dict[str, float]:
    """Measured MSE and SQNR of one weight matrix, beside the Δ²/12 theory."""
    with torch.no_grad():
        scale, zero_point = qparams(weight, scheme)
        noise = fake_quantize(weight, scale, zero_point, scheme) - weight
        theory = float((scale ** 2).mean()) / 12  # rows are equally long: mean over rows = mean over weights
        power, mse = float(weight.pow(2).mean()), float(noise.pow(2).mean())
    return {"mse": mse, "mse_theory": theory, "sqnr_db": 10 * math.log10(power / max(mse, 1e-30)),
            "sqnr_theory_db": 10 * math.log10(power / theory)}
