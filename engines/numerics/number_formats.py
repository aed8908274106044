"""What 16-bit floats can hold: underflow, rounded-away updates, and a long sum of tiny steps.

IEEE fp16 has 5 exponent bits and 10 mantissa bits: its smallest subnormal is 2⁻²⁴ ≈ 6e-8,
and values of magnitude ≤ 2⁻²⁵ round to 0 (2⁻²⁵ itself is a tie, rounded to the even 0;
values between 2⁻²⁵ and 2⁻²⁴ round up to 2⁻²⁴). bfloat16 keeps fp32's 8 exponent bits
(no underflow above ~1e-38) but only 7 mantissa bits.

Adding δ to w rounds back to w when |δ| is under half the spacing of representable numbers
at w: with p mantissa bits and 2^e ≤ |w| < 2^(e+1), half the spacing is 2^(e−p−1), which
lies between |w|·2^(−p−2) and |w|·2^(−p−1) — exactly |w|·2⁻¹¹ (fp16) or |w|·2⁻⁸ (bf16)
when w is a power of two, such as 1.0. So 1 + 1e-4 is 1 in fp16 (1e-4 < 2⁻¹¹ ≈ 4.9e-4):
10⁴ such updates leave an fp16 weight at 1.0, while an fp32 copy reaches 2.0.

Each generator yields one `StepRecord` per point of its sweep (step = the point's index).
"""
from collections.abc import Iterator

import torch

from engines.loop.records import StepRecord

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
MANTISSA_BITS = {"fp16": 10, "bf16": 7, "fp32": 23}
FP16_SMALLEST_SUBNORMAL = 2.0 ** -24
UNDERFLOW_EXPONENTS = [e / 4 for e in range(-34 * 4, -8 * 4)]   # bins of log2 x from -34 to -8
RATIO_EXPONENTS = [e / 8 for e in range(-15 * 8, -5 * 8 + 1)]       # log2 |δ|/|w| from -15 to -5
SAMPLED_WEIGHTS = 4096


def round_to(values: torch.Tensor, name: str) -> torch.Tensor:
    """`values` rounded to the format `name` (round to nearest, ties to even), back in float64."""
    return values.to(DTYPES[name]).double()


def underflow_sweep(seed: int, per_bin: int = 64) -> Iterator[StepRecord]:
    """Bins [2^e, 2^(e+¼)) from 2⁻³⁴ to 2⁻⁸, `per_bin` random x in each: per format the mean
    relative rounding error |round(x) − x|/x (about 2^−(p+2) for normal numbers, rising through
    the subnormals, 1 once x rounds to 0) and the share of the bin's x that became 0."""
    generator = torch.Generator().manual_seed(seed)
    for index, exponent in enumerate(UNDERFLOW_EXPONENTS):
        x = 2.0 ** (exponent + 0.25 * torch.rand(per_bin, generator=generator, dtype=torch.float64))
        metrics = {"log2_x": exponent}
        for name in ("fp16", "bf16"):
            rounded = round_to(x, name)
            metrics[f"rel_error/{name}"] = float(((rounded - x).abs() / x).mean())
            metrics[f"flushed/{name}"] = float((rounded == 0).double().mean())
        yield StepRecord(index, metrics)


def kept_fraction(ratio: float, name: str, weights: torch.Tensor) -> float:
    """Share of updates w ← w + δ, |δ| = ratio·|w| with alternating signs, that change w when w is
    held in format `name` and the exact sum is rounded to it once (as a 16-bit weight receiving an
    fp32 optimizer's step is)."""
    signs = torch.where(torch.arange(len(weights)) % 2 == 0, 1.0, -1.0).double()
    stored = weights.to(DTYPES[name]).double()
    return float(((stored + ratio * signs * stored).to(DTYPES[name]).double() != stored).double().mean())


def rounding_sweep(seed: int) -> Iterator[StepRecord]:
    """|δ|/|w| from 2⁻¹⁵ to 2⁻⁵: the share of updates kept in fp16 and bf16, over weights with
    random mantissas and exponents (|w| from 2⁻⁶ to 2⁶), and for w = 1 exactly."""
    generator = torch.Generator().manual_seed(seed)
    exponents = torch.randint(-6, 6, (SAMPLED_WEIGHTS,), generator=generator).double()
    weights = (1 + torch.rand(SAMPLED_WEIGHTS, generator=generator, dtype=torch.float64)) * 2 ** exponents
    ones = torch.ones(2, dtype=torch.float64)  # w = 1: one update up, one down
    for index, exponent in enumerate(RATIO_EXPONENTS):
        ratio = 2.0 ** exponent
        metrics = {"log2_ratio": exponent}
        for name in ("fp16", "bf16"):
            metrics[f"kept/{name}"] = kept_fraction(ratio, name, weights)
            metrics[f"kept_up_at_one/{name}"] = kept_fraction(ratio, name, ones[:1])
        yield StepRecord(index, metrics)


def accumulate(updates: int, delta: float, start: float = 1.0, every: int = 100) -> Iterator[StepRecord]:
    """`updates` additions of `delta` to a weight held in fp16, in bf16, and in fp32 (a master
    copy): the weights after every `every` updates (step = the record's index, `updates` = updates so far)."""
    weights = {name: torch.tensor(start, dtype=DTYPES[name]) for name in ("fp16", "bf16", "fp32")}
    steps = {name: torch.tensor(delta, dtype=DTYPES[name]) for name in weights}
    index = 0
    for done in range(updates + 1):
        if done % every == 0 or done == updates:
            yield StepRecord(index, {"updates": float(done), **{f"weight/{name}": float(w) for name, w in weights.items()}})
            index += 1
        if done < updates:
            for name in weights:
                weights[name] = weights[name] + steps[name]  # the add rounds to the weight's own format
