"""Where a softmax overflows: naive e^x / Σe^x against the max-shifted form, in four float formats.

e^x overflows to inf once x passes ln(max) of the format: float16 ≈ 11.09, bfloat16 and float32 ≈ 88.72,
float64 ≈ 709.78. The naive softmax of [x, 0] then divides inf by inf: NaN; the naive logsumexp
ln(e^x + 1) is inf. Shifting by the row maximum m, softmax = e^{x − m}/Σe^{x − m} and
logsumexp = m + ln Σe^{x − m}, exponentiates nothing above 0, so nothing overflows (Blanchard,
Higham & Higham 2021), and it is as accurate. FlashAttention's running maximum is this shift, kept
block by block.

Records, one per logit x of a log-spaced grid (step = its index): `logit`, the relative error of each
logsumexp of [x, 0] against float64's exact x + ln(1 + e^{−x}) (`rel_err/naive_lse`,
`rel_err/shifted_lse`, only where finite), `nan/naive_softmax` (1 where the naive softmax gave NaN),
`inf/naive_lse` (1 where the naive logsumexp gave inf), `bad/shifted` (1 where either shifted one was
not finite);
on the last record the exact first logit (in that format) where the naive softmax gives NaN and the
naive logsumexp inf (`first_nan/naive_softmax`, `first_inf/naive_lse`), and `ln_max`.
"""
import math
from collections.abc import Iterator

import torch

from engines.loop.records import StepRecord

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}
GRID = (0.5, 1000.0, 121)  # logits from, to, points (log-spaced): past float64's 709.78


def naive_softmax(x: torch.Tensor) -> torch.Tensor:
    e = torch.exp(x)
    return e / e.sum(dim=-1, keepdim=True)


def shifted_softmax(x: torch.Tensor) -> torch.Tensor:
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))  # every exponent ≤ 0: e ≤ 1
    return e / e.sum(dim=-1, keepdim=True)


def naive_logsumexp(x: torch.Tensor) -> torch.Tensor:
    return torch.log(torch.exp(x).sum(dim=-1))


def shifted_logsumexp(x: torch.Tensor) -> torch.Tensor:
    m = x.amax(dim=-1)
    return m + torch.log(torch.exp(x - m[..., None]).sum(dim=-1))


def pair(x: float, dtype: torch.dtype) -> torch.Tensor:
    """The logits [x, 0] in `dtype` (x rounded to it)."""
    return torch.tensor([x, 0.0], dtype=torch.float64).to(dtype)


BITS = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def from_bits(bits: int, dtype: torch.dtype) -> float:
    """The non-negative number of `dtype` whose bit pattern is `bits` (patterns and values rise together)."""
    return float(torch.tensor([bits], dtype=BITS[torch.finfo(dtype).bits // 8]).view(dtype)[0])


def first_failure(dtype: torch.dtype, fails) -> float:
    """The smallest logit x, a number of `dtype`, at which `fails(pair(x))` holds: bisection over the
    format's own numbers from 0 to its largest finite value (failure is monotone in x)."""
    integer = BITS[torch.finfo(dtype).bits // 8]
    low = 0
    high = int(torch.tensor([torch.finfo(dtype).max], dtype=dtype).view(integer)[0])
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if fails(pair(from_bits(mid, dtype), dtype)) else (mid, high)
    return from_bits(high, dtype)


def overflow_records(dtype_name: str) -> Iterator[StepRecord]:
    dtype = DTYPES[dtype_name]
    start, stop, points = GRID
    logits = torch.logspace(math.log10(start), math.log10(stop), points, dtype=torch.float64)
    for i, x in enumerate(logits.tolist()):
        logits_pair = pair(x, dtype)
        rounded = float(logits_pair[0])
        exact = rounded + math.log1p(math.exp(-rounded))  # ln(e^x + 1), in float64
        shifted_bad = not (torch.isfinite(shifted_softmax(logits_pair)).all() and torch.isfinite(shifted_logsumexp(logits_pair)))
        metrics = {"logit": rounded, "nan/naive_softmax": float(torch.isnan(naive_softmax(logits_pair)).any()),
                   "inf/naive_lse": float(torch.isinf(naive_logsumexp(logits_pair))), "bad/shifted": float(shifted_bad)}
        for name, fn in (("naive_lse", naive_logsumexp), ("shifted_lse", shifted_logsumexp)):
            value = float(fn(logits_pair))
            if math.isfinite(value):
                metrics[f"rel_err/{name}"] = abs(value - exact) / exact
        if i == points - 1:
            metrics.update({
                "first_nan/naive_softmax": first_failure(dtype, lambda p: bool(torch.isnan(naive_softmax(p)).any())),
                "first_inf/naive_lse": first_failure(dtype, lambda p: bool(torch.isinf(naive_logsumexp(p)))),
                "ln_max": math.log(torch.finfo(dtype).max),
                "bad/shifted_at_max": float(shifted_failures(dtype))})
        yield StepRecord(i, metrics)


def shifted_failures(dtype: torch.dtype) -> bool:
    """Whether the shifted softmax or logsumexp of [max, 0] (the format's largest finite logit) is not finite."""
    top = pair(float(torch.finfo(dtype).max), dtype)
    return not (torch.isfinite(shifted_softmax(top)).all() and torch.isfinite(shifted_logsumexp(top)))
