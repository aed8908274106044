"""What the FlashAttention page says, each number a claim its records prove (re-derived when checked)."""
from collections.abc import Callable

from scenarios.claims import Computed, fmt
from scenarios.explanation import Sentence, say
from scenarios.flash_attention.figures import BACKENDS, CUDA, DTYPES, ERRORS, EXACT, IO, STANDARD, TILED
from scenarios.records import Records
from scenarios.words import byte_size, count

Compute = Callable[[Records], float | None]


def claim(records: Records, text: str, compute: Compute, shown: Callable[[float], str] = fmt) -> Computed | None:
    value = compute(records)
    return None if value is None else Computed(text, value, compute, shown=shown(value))


def io_at(line: str, kib: int) -> Compute:
    return lambda r: r.at(IO, f"hbm_bytes/{line}", kib)


def io_ratio(line: str, kib: int) -> Compute:
    def compute(records: Records) -> float | None:
        standard, tiled = io_at(line, kib)(records), io_at("tiled", kib)(records)
        return None if standard is None or not tiled else standard / tiled
    return compute


def io_sentence(records: Records, sram_kib: int) -> Sentence | None:
    """The IO model at the config's SRAM, and the ratio at the grid's ends."""
    kibs = list(records.series(IO, "hbm_bytes/tiled").index)
    if sram_kib not in kibs:
        return None
    times = lambda v: f"{v:.3g}×"  # noqa: E731 - a format
    parts = [claim(records, "{}", lambda r: r.at(IO, "block_cols", sram_kib), lambda v: f"{v:.0f}"),
             claim(records, "{}", lambda r: r.at(IO, "key_blocks", sram_kib), lambda v: count(v, "block")),
             claim(records, "{}", io_at("standard", sram_kib), byte_size),
             claim(records, "{}", io_at("tiled", sram_kib), byte_size),
             claim(records, "{}", io_ratio("standard", sram_kib), times),
             claim(records, "{}", io_ratio("standard_mask_dropout", sram_kib), times),
             claim(records, "{}", io_ratio("standard", kibs[0]), times),
             claim(records, "{}", io_ratio("standard", kibs[-1]), times)]
    return say(f"IO model, one head, forward + backward, fp16: with M = {sram_kib} KiB of SRAM the modelled GPU kernel "
               f"takes B_c = {{}} keys a block ({{}} of keys; not the block size setting, which tiles the PyTorch "
               f"implementation run here); HBM traffic is {{}} for standard attention and {{}} tiled, a ratio "
               f"standard ÷ tiled of {{}} ({{}} against the baseline that also masks and drops out); the ratio is {{}} "
               f"at M = {kibs[0]} KiB and {{}} at {kibs[-1]} KiB.", *parts)


def peak_at(arm: str, n: int) -> Compute:
    return lambda r: r.at(arm, "peak_bytes", n)


def peak_growth(arm: str, low: int, high: int) -> Compute:
    def compute(records: Records) -> float | None:
        a, b = peak_at(arm, low)(records), peak_at(arm, high)(records)
        return None if a is None or b is None or a <= 0 else b / a
    return compute


def memory_sentence(records: Records) -> Sentence | None:
    lengths = sorted(set(records.series(STANDARD, "peak_bytes").index) & set(records.series(TILED, "peak_bytes").index))
    if len(lengths) < 2:
        return None
    low, high = lengths[0], lengths[-1]
    parts = []
    for arm in (STANDARD, TILED):
        parts += [claim(records, "{}", peak_at(arm, low), byte_size), claim(records, "{}", peak_at(arm, high), byte_size),
                  claim(records, "{}", peak_growth(arm, low, high), lambda v: f"{v:.3g}×")]
    if None in parts:
        return None
    return say(f"Measured peak memory of forward + backward above the inputs, N = {low} → {high} ({high / low:.3g}× "
               f"longer, {(high / low) ** 2:.3g}× the N² entries): standard {{}} → {{}} ({{}}), tiled {{}} → {{}} ({{}}).",
               *parts)


def largest_error(keys: tuple[str, ...]) -> Compute:
    def compute(records: Records) -> float | None:
        values = [records.at(EXACT, f"err/{key}", step) for key in keys for step in (0, 1)]
        return None if None in values else max(values)
    return compute


def exactness_sentence(records: Records) -> Sentence | None:
    explicit = claim(records, "{}", largest_error(tuple(k for k in ERRORS if k != "out_vs_sdpa")))  # fmt: 8.9×10⁻¹⁵
    sdpa = claim(records, "{}", largest_error(("out_vs_sdpa",)))
    if explicit is None or sdpa is None:
        return None
    return say("In float64, with and without a causal mask, the tiled O, L, dQ, dK and dV differ from the explicit "
               "softmax(QKᵀ/√d)V and its autograd by at most {}, and O from scaled_dot_product_attention by at most {}.",
               explicit, sdpa)


def overflow_sentence(records: Records) -> Sentence | None:
    found = [dtype for dtype in DTYPES if records.last(dtype, "first_nan/naive_softmax") is not None]
    if not found:
        return None
    parts = []
    for dtype in found:
        parts += [claim(records, f"{{}} in {dtype}", lambda r, d=dtype: r.last(d, "first_nan/naive_softmax"), lambda v: f"{v:.6g}"),
                  claim(records, "{}", lambda r, d=dtype: r.last(d, "ln_max"), lambda v: f"{v:.5g}")]
    failures = claim(records, "{}", lambda r: sum(r.series(d, "bad/shifted").sum() + (r.last(d, "bad/shifted_at_max") or 0)
                                                  for d in found), lambda v: f"{v:.0f}")
    text = ", ".join(["{} (ln max {})"] * len(found))
    return say("The naive softmax of [x, 0] first gives NaN at x = " + text + "; the max-shifted softmax and "
               "logsumexp gave {} non-finite values over the same logits and at each format's largest number.",
               *parts, failures)


def cuda_sentence(records: Records) -> Sentence | None:
    n = records.last_step(CUDA, "cuda_ms/flash")
    if n is None:
        return None
    parts = [claim(records, f"{name} {{}} ms", lambda r, b=name: r.at(CUDA, f"cuda_ms/{b}", n)) for name in BACKENDS]
    peaks = [claim(records, f"{name} {{}}", lambda r, b=name: r.at(CUDA, f"cuda_peak_bytes/{b}", n), byte_size)
             for name in BACKENDS]
    if None in parts or None in peaks:
        return None
    return say(f"On CUDA at N = {n}: " + ", ".join(["{}"] * 3) + "; peak " + ", ".join(["{}"] * 3) + ".", *parts, *peaks)
