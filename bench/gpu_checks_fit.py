"""The fit prediction against a real GPU step: measured `torch.cuda.max_memory_allocated` vs predicted.

    python bench/gpu_checks_fit.py          # on one GPU: models of >= 1B parameters (< 3 minutes on an H200)
    python bench/gpu_checks_fit.py --cpu    # a smoke check here: small models, the real step's tracker

Only torch is needed (engines/distributed/ is pure torch). For each model, two measurements
of the same step at world 1 (one device, no wrapper, Adam with its multi-tensor path as on
any GPU):

- predicted: `engines.distributed.fit.measure` under FakeTensorMode with fake CUDA tensors
  (the tracker rounds each allocation up to the caching allocator's 512 bytes);
- measured: the model built on the GPU for real, one step to create Adam's state, then the
  peak statistics reset and one step measured: `torch.cuda.max_memory_allocated`.

Each line prints both, and the difference in % of the measured bytes (the brief: within 2%).
With --cpu there is no allocator to ask: "measured" is PyTorch's MemTracker on the same real loop.
Exit code 1 when a difference exceeds 2%.
"""
import argparse
import gc
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engines.distributed.fit import FitSpec, dtypes, measure  # noqa: E402
from engines.distributed.fit_inputs import cast, forward, guess_inputs, loss_of  # noqa: E402
from engines.distributed.fit_models import gpt  # noqa: E402

LIMIT_PERCENT = 2.0


def linear_stack(width: int, depth: int):
    """A stack of Linear layers with ReLU between: depth·(width² + width) parameters."""
    def build() -> nn.Module:
        layers: list[nn.Module] = []
        for index in range(depth):
            layers += [nn.Linear(width, width)] + ([nn.ReLU()] if index < depth - 1 else [])
        return nn.Sequential(*layers)
    return build


def real_peak_bytes(factory, spec: FitSpec, device: torch.device) -> tuple[float, int]:
    """The real step's peak after a first step made Adam's state, and the parameter count. On a GPU the
    allocator's `max_memory_allocated`; on the CPU (the smoke check) PyTorch's MemTracker, entered at
    the same moment the GPU's peak statistics are reset."""
    param_dtype, compute_dtype = dtypes(spec)
    with torch.device(device):
        model = cast(factory(), param_dtype)
    n_params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    batch = guess_inputs(model, spec.rank_batch, spec.seq, device)
    autocast = torch.autocast(device.type, dtype=compute_dtype, enabled=param_dtype != compute_dtype)
    tracker = None
    for measured in (False, True):
        if measured and device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        elif measured:
            from torch.distributed._tools.mem_tracker import MemTracker
            tracker = MemTracker()
            tracker.track_external(model, optimizer, *batch)
            tracker.__enter__()
        with autocast:
            loss = loss_of(forward(model, batch), batch)
        loss.backward()
        del loss
        optimizer.step()
        if not measured:
            optimizer.zero_grad(set_to_none=True)
    if tracker is not None:
        tracker.__exit__(None, None, None)
        return float(tracker.get_tracker_snapshot("peak")[device]["Total"]), n_params
    torch.cuda.synchronize(device)
    peak = float(torch.cuda.max_memory_allocated(device))
    del model, optimizer, batch
    gc.collect()
    torch.cuda.empty_cache()
    return peak, n_params


def check(name: str, factory, spec: FitSpec, cpu: bool) -> bool:
    started = time.perf_counter()
    predicted = measure(factory, spec, device="cpu" if cpu else "cuda")
    predicted_s = time.perf_counter() - started
    predicted_bytes = predicted["phases"]["peak"]["total"]
    device = torch.device("cpu") if cpu else torch.device("cuda", torch.cuda.current_device())
    measured, n_params = real_peak_bytes(factory, spec, device)
    percent = 100.0 * (predicted_bytes - measured) / measured
    print(f"{name:34s} {n_params / 1e9:6.3f}B  measured {measured / 2**30:8.3f} GiB  predicted "
          f"{predicted_bytes / 2**30:8.3f} GiB ({predicted_s:4.1f} s)  difference {percent:+6.2f}%", flush=True)
    return abs(percent) <= LIMIT_PERCENT


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="a smoke check without a GPU: small models")
    cpu = parser.parse_args().cpu
    if not cpu and not torch.cuda.is_available():
        print("no GPU here: run with --cpu for the smoke check")
        return 2
    torch.set_num_threads(1) if cpu else None
    where = "CPU (real step's tracker)" if cpu else torch.cuda.get_device_name()
    print(f"torch {torch.__version__}, {where}; one step at world 1, Adam (foreach)")
    if cpu:
        rows = [("Linear stack 8 x 512, fp32", linear_stack(512, 8), FitSpec("single", 1, 64, 1, "fp32", "adam")),
                ("GPT-style 4 x 128, bf16", lambda: gpt(4, 128, 4, 1000, 128),
                 FitSpec("single", 1, 4, 128, "bf16", "adamw"))]
    else:
        rows = [("Linear stack 16 x 8192, fp32", linear_stack(8192, 16), FitSpec("single", 1, 2048, 1, "fp32", "adam")),
                ("GPT-style 24 x 2048 (1.3B), bf16", lambda: gpt(24, 2048, 16, 50304, 1024),
                 FitSpec("single", 1, 8, 1024, "bf16", "adamw")),
                ("GPT-style 24 x 2048, bf16 compute", lambda: gpt(24, 2048, 16, 50304, 1024),
                 FitSpec("single", 1, 4, 1024, "bf16-mixed", "adamw"))]
    results = [check(name, factory, spec, cpu) for name, factory, spec in rows]
    print("all within 2%" if all(results) else "a difference exceeds 2%")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
