"""FlashAttention on a GPU, checked in one short run (issue 37, item 3): `python bench/gpu_checks_flash.py`.

1. The tiled PyTorch attention (engines/sequence/flash_attention.py) against `scaled_dot_product_attention`
   on CUDA, float64, with and without a causal mask, forward and backward: largest |difference|
   (must be < 1e-10; on the CPU the tests hold 1e-12).
2. SDPA's flash, memory-efficient and math kernels (torch.nn.attention.sdpa_kernel), fp16, batch 8 ×
   16 heads, d = 64, forward + backward at N = 512 … 8192: median time of 5 (CUDA events, after a
   warm-up) and the peak of `torch.cuda.max_memory_allocated` above the inputs. The math kernel writes
   the N × N scores: its memory grows ~N², the others' ~N. A kernel that cannot run (out of memory, or
   not built for this GPU) is written "n/a" with its reason.

Prints markdown tables; exits 1 if check 1 fails. Only torch is needed (no plotly, pydantic or pandas).
Without CUDA it prints one line and exits 0. Expected time on one H200: under a minute.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from engines.sequence.flash_attention import flash_attention  # noqa: E402 - after the path
from engines.sequence.flash_measure import timed_kernel  # noqa: E402

LENGTHS = (512, 1024, 2048, 4096, 8192)
BATCH, HEADS, HEAD_DIM = 8, 16, 64
REPEATS = 5  # the timed runs of flash_measure.timed_kernel, after one untimed


def exactness() -> list[tuple[str, float]]:
    """(what, largest |tiled − SDPA|) in float64 on CUDA."""
    generator = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for causal in (False, True):
        q, k, v, grad_out = (torch.randn(2, 4, 300, 64, device="cuda", dtype=torch.float64, generator=generator)
                             for _ in range(4))
        tiled_in = [t.clone().requires_grad_() for t in (q, k, v)]
        sdpa_in = [t.clone().requires_grad_() for t in (q, k, v)]
        tiled = flash_attention(*tiled_in, 64, 48, causal)
        sdpa = torch.nn.functional.scaled_dot_product_attention(*sdpa_in, is_causal=causal)
        grads = zip(torch.autograd.grad(tiled, tiled_in, grad_out), torch.autograd.grad(sdpa, sdpa_in, grad_out))
        mask = "causal" if causal else "no mask"
        rows.append((f"O, {mask}", float((tiled - sdpa).abs().max())))
        rows += [(f"d{name}, {mask}", float((a - b).abs().max())) for name, (a, b) in zip("QKV", grads)]
    return rows


def timed(backend, length: int) -> tuple[float, float] | str:
    """(median ms, peak bytes above the inputs) of SDPA forward + backward under one kernel, or why not."""
    q, k, v = (torch.randn(BATCH, HEADS, length, HEAD_DIM, device="cuda", dtype=torch.float16, requires_grad=True)
               for _ in range(3))
    try:
        measured = timed_kernel("kernel", backend, q, k, v)  # the page's own timing (engines/sequence/flash_measure.py)
        return measured["cuda_ms/kernel"], measured["cuda_peak_bytes/kernel"]
    except (RuntimeError, torch.cuda.OutOfMemoryError) as error:
        return str(error).splitlines()[0][:60]
    finally:
        del q, k, v
        torch.cuda.empty_cache()


def main() -> int:
    if not torch.cuda.is_available():
        print("gpu_checks_flash: no CUDA device here; nothing to check (the CPU identities are tests/test_flash_attention.py)")
        return 0
    from torch.nn.attention import SDPBackend
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}\n")
    rows = exactness()
    print("| tiled vs SDPA, float64 | largest abs difference |\n|---|---|")
    for what, error in rows:
        print(f"| {what} | {error:.2e} |")
    failed = [what for what, error in rows if not error < 1e-10]
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "memory-efficient": SDPBackend.EFFICIENT_ATTENTION,
                "math": SDPBackend.MATH}
    print(f"\nSDPA fp16, forward + backward, batch {BATCH} × {HEADS} heads, d = {HEAD_DIM}: median of {REPEATS}")
    print("| N | " + " | ".join(f"{name} ms | {name} peak MiB" for name in backends) + " |")
    print("|---|" + "---|---|" * len(backends))
    for length in LENGTHS:
        cells = []
        for backend in backends.values():
            result = timed(backend, length)
            cells += [f"{result[0]:.3f}", f"{result[1] / 2 ** 20:,.0f}"] if isinstance(result, tuple) else ["n/a", result]
        print(f"| {length} | " + " | ".join(cells) + " |")
    if failed:
        print(f"\nFAILED: tiled and SDPA differ by 1e-10 or more at {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
