"""FlashAttention measured: exactness in float64, HBM traffic by the paper's IO model, peak memory by
PyTorch's own tracker, and (on CUDA) SDPA's kernels timed.

The IO model counts, per attention head, the elements read from and written to HBM (the GPU's main
memory) in one forward and one backward, as Dao et al. 2022 count them. Standard attention
(their Algorithm 0 and its backward) writes and reads the N × N matrices S, P, dP, dS:

    forward  4Nd + 4N²,   backward 8Nd + 7N²          (Θ(Nd + N²))

and the paper's PyTorch baseline also runs a mask and a dropout over them, one more read and write
of an N × N matrix each, forward and backward: + 8N². The tiled kernel (their Algorithms 1 and 4)
reads K and V once and the Q, O, dO, dQ blocks and the row statistics once per block of keys:

    forward  2Nd + T_c (3Nd + 4N),   backward 4Nd + T_c (5Nd + 2N),   T_c = ⌈N / B_c⌉   (Θ(N²d²/M))

with B_c = ⌈M/4d⌉ columns and B_r = min(B_c, d) rows per block, M the SRAM in elements. Here M is
given in KiB of SRAM and the elements are fp16 (2 bytes), so M_elements = 512 · KiB.
"""
import math
from collections.abc import Iterator

import torch

from engines.loop.records import StepRecord
from engines.sequence.flash_attention import explicit_attention, flash_attention, tiled_forward

ELEMENT_BYTES = 2          # fp16, as the paper's kernels read and write
PAPER_HEADS = 64 * 16      # GPT-2 medium in the paper's Fig. 2: batch 64 × 16 heads
SRAM_KIB_GRID = (16, 32, 64, 128, 256, 512, 1024)


def block_sizes(head_dim: int, sram_kib: float) -> tuple[int, int]:
    """(B_c, B_r) from the SRAM: B_c = ⌈M/4d⌉, B_r = min(B_c, d), M in elements."""
    elements = sram_kib * 1024 / ELEMENT_BYTES
    cols = math.ceil(elements / (4 * head_dim))
    return cols, min(cols, head_dim)


def standard_io(n: int, d: int, extra_passes: int = 0) -> int:
    """HBM elements of standard attention, forward + backward; each extra elementwise pass (mask,
    dropout) reads and writes an N × N matrix forward and again backward."""
    return (4 * n * d + 4 * n * n) + (8 * n * d + 7 * n * n) + extra_passes * 4 * n * n


def tiled_io(n: int, d: int, sram_kib: float) -> int:
    """HBM elements of the tiled kernel, forward + backward."""
    t_c = math.ceil(n / block_sizes(d, sram_kib)[0])
    return (2 * n * d + t_c * (3 * n * d + 4 * n)) + (4 * n * d + t_c * (5 * n * d + 2 * n))


def io_records(n: int, d: int, sram_kib: int) -> Iterator[StepRecord]:
    """One record per SRAM size (step = KiB) of the grid and the config's: bytes per head, both ways."""
    for kib in sorted({*SRAM_KIB_GRID, sram_kib}):
        cols, rows = block_sizes(d, kib)
        yield StepRecord(kib, {"hbm_bytes/standard": standard_io(n, d) * ELEMENT_BYTES,
                               "hbm_bytes/standard_mask_dropout": standard_io(n, d, 2) * ELEMENT_BYTES,
                               "hbm_bytes/tiled": tiled_io(n, d, kib) * ELEMENT_BYTES, "block_cols": cols,
                               "block_rows": rows, "key_blocks": math.ceil(n / cols), "heads": PAPER_HEADS})


def exactness_records(n: int, d: int, block: int, seed: int) -> Iterator[StepRecord]:
    """Step 0 without a mask, step 1 causal: the tiled forward and backward in float64 against the
    explicit softmax(QKᵀ/√d)V, against `scaled_dot_product_attention`, and L against torch.logsumexp."""
    generator = torch.Generator().manual_seed(seed)
    q, k, v, grad_out = (torch.randn(1, 2, n, d, generator=generator, dtype=torch.float64) for _ in range(4))
    for step, causal in enumerate((False, True)):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        tiled = flash_attention(*leaves, block, block, causal)
        tiled_grads = torch.autograd.grad(tiled, leaves, grad_out)
        plain = [t.clone().requires_grad_() for t in (q, k, v)]
        explicit = explicit_attention(*plain, causal)
        explicit_grads = torch.autograd.grad(explicit, plain, grad_out)
        sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        scores = q @ k.transpose(-1, -2) * d ** -0.5  # (1, 2, N, N)
        if causal:
            scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        lse = tiled_forward(q, k, v, block, block, causal)[1]
        metrics = {"err/out_vs_explicit": largest(tiled - explicit), "err/out_vs_sdpa": largest(tiled - sdpa),
                   "err/lse": largest(lse - torch.logsumexp(scores, dim=-1)), "causal": float(causal)}
        metrics.update({f"err/grad_{name}": largest(a - b) for name, a, b in zip("qkv", tiled_grads, explicit_grads)})
        yield StepRecord(step, metrics)


def largest(difference: torch.Tensor) -> float:
    return float(difference.detach().abs().max())


def lengths(n: int) -> list[int]:
    """The memory sweep's sequence lengths: 128, 256, … doubling while below n, then n."""
    return [*(128 * 2 ** p for p in range(12) if 128 * 2 ** p < n), n]


def memory_records(kind: str, n: int, d: int, block: int, seed: int) -> Iterator[StepRecord]:
    """Per length (step = N): the peak bytes one forward + backward adds to its inputs (Q, K, V and dO,
    float32, one head), by torch.distributed._tools' MemTracker, which files every live tensor."""
    from torch.distributed._tools.mem_tracker import MemTracker
    from engines.distributed.fit_step import GlobalPeak
    tracker_type = type("Tracker", (GlobalPeak, MemTracker), {})
    generator = torch.Generator().manual_seed(seed)
    for length in lengths(n):
        q, k, v, grad_out = (torch.randn(1, length, d, generator=generator) for _ in range(4))
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        tracker = tracker_type()
        tracker.track_external(q, k, v, grad_out)
        with tracker:
            out = explicit_attention(q, k, v) if kind == "standard" else flash_attention(q, k, v, block, block)
            out.backward(grad_out)
            del out
        inputs = 4 * length * d * 4
        peak = sum(snapshot["Total"] for snapshot in tracker.get_tracker_snapshot("peak").values())
        yield StepRecord(length, {"peak_bytes": float(peak - inputs), "score_bytes": float(length * length * 4)})


def cuda_records(n: int, d: int) -> Iterator[StepRecord]:
    """On CUDA only: SDPA's flash, memory-efficient and math kernels, fp16, forward + backward, 8 × 16
    heads, timed (median of 5) with their peak allocated bytes, per length (step = N)."""
    if not torch.cuda.is_available():
        return
    from torch.nn.attention import SDPBackend
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "memory_efficient": SDPBackend.EFFICIENT_ATTENTION,
                "math": SDPBackend.MATH}
    for length in lengths(max(n, 4096)):
        q, k, v = (torch.randn(8, 16, length, d, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(3))
        metrics = {}
        for name, backend in backends.items():
            try:
                metrics.update(timed_kernel(name, backend, q, k, v))
            except RuntimeError:  # a kernel this GPU or shape lacks, or out of memory: no record, not a failed run
                torch.cuda.empty_cache()
        yield StepRecord(length, metrics)


def timed_kernel(name: str, backend, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> dict[str, float]:
    from torch.nn.attention import sdpa_kernel
    times = []
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    for _ in range(6):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        with sdpa_kernel(backend):
            torch.nn.functional.scaled_dot_product_attention(q, k, v).sum().backward()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
        q.grad = k.grad = v.grad = None
    return {f"cuda_ms/{name}": sorted(times[1:])[2], f"cuda_peak_bytes/{name}": float(torch.cuda.max_memory_allocated() - base)}
