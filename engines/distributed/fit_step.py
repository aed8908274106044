"""The measured step of a fit (engines/distributed/fit.py): one steady training step inside
PyTorch's memory tracker, read by category after forward, backward and the optimizer step,
and at the peak. A real DDP is first brought to its steady state (`real_ddp_warm_up`).
"""
import contextlib

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from engines.distributed.fit_inputs import forward, loss_of
from engines.distributed.memory_tracking import CATEGORY

CATEGORIES = ("parameters", "gradients", "optimizer_state", "activations", "unsharded", "temporaries",
              "communication")
OUR_NAME = {"parameters": "parameters", "gradients": "gradients", "optimizer state": "optimizer_state",
            "activations": "activations", "unsharded parameters": "unsharded", "temporaries": "temporaries",
            "communication buffers": "communication"}


class SameDtypeOperands(TorchDispatchMode):
    """Fake tensors' shape functions let a matmul take an fp32 and a bf16 operand; the CPU and CUDA
    kernels refuse. Checked here, in fake runs, so a model that cannot run in a dtype says so."""

    CHECKED = ("mm", "bmm", "addmm", "baddbmm", "addbmm", "convolution", "linear")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ in self.CHECKED:
            floating = {str(a.dtype).removeprefix("torch.") for a in args
                        if torch.is_tensor(a) and a.is_floating_point()}
            if len(floating) > 1:
                raise RuntimeError(f"{func.overloadpacket.__name__} expected operands of one dtype, got "
                                   f"{' and '.join(sorted(floating))}")
        return func(*args, **(kwargs or {}))


def read(tracker, kind: str = "current") -> dict[str, float]:
    """The tracker's bytes by our category (every device it saw, summed)."""
    out = dict.fromkeys(CATEGORIES, 0.0)
    for by_reference in tracker.get_tracker_snapshot(kind).values():
        for reference, nbytes in by_reference.items():
            if reference != "Total":
                out[OUR_NAME[CATEGORY.get(getattr(reference, "name", str(reference)), "temporaries")]] += nbytes
    return out


class GlobalPeak:
    """Mixed into a tracker: the step's peak without each module's own. The trackers also keep a
    peak per module, walking every module at every op (30% of a 7B step's CPU time); this is
    their global part alone, so the figures are the same (tests run real and fake through it)."""

    def _update_peak_stats(self, peak_state) -> None:
        for device, snapshot in self._curr_mem_snap.items():
            if self._peak_mem.get(device, 0) < snapshot["Total"]:
                self._peak_mem[device] = snapshot["Total"]
                self._peak_mem_snap[device] = dict(snapshot)


def tracked_step(model: nn.Module, optimizer, inputs: tuple, replicated: bool, autocast_dtype: torch.dtype | None,
                 device: torch.device, buckets: list[torch.Tensor], bucket_bytes: float,
                 check_dtypes: bool = False) -> dict[str, dict[str, float]]:
    """One steady step inside the tracker: bytes by category after forward, backward, the
    optimizer step, and at the peak. DDP's buckets (`bucket_bytes`) are filed under
    communication: a real DDP's bucket tensors are given to the tracker (it would call them
    temporaries), a fake DDP has none and their bytes are added."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.mem_tracker import MemTracker
    tensors = [t for t in inputs if torch.is_tensor(t)]
    if replicated:  # not FSDP
        tracker = type("Tracker", (GlobalPeak, MemTracker), {})()
        tracker.track_external(model, optimizer, *tensors, *buckets)
    else:
        tracker = type("Tracker", (GlobalPeak, FSDPMemTracker), {})(model, optimizer)
        tracker.track_inputs(tuple(tensors))
    autocast = torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext()
    phases: dict[str, dict[str, float]] = {}
    with tracker:
        with autocast, SameDtypeOperands() if check_dtypes else contextlib.nullcontext():
            loss = loss_of(forward(model, inputs), inputs)
        phases["after forward"] = read(tracker)
        loss.backward()
        del loss
        phases["after backward"] = read(tracker)
        optimizer.step()
        phases["after optimizer step"] = read(tracker)
        phases["peak"] = read(tracker, "peak")
    for snapshot in phases.values():
        snapshot["temporaries"] -= bucket_bytes if buckets else 0.0
        snapshot["communication"] += bucket_bytes
        snapshot["total"] = sum(snapshot[c] for c in CATEGORIES)
    return phases


def real_ddp_warm_up(model: nn.Module, optimizer, batch: tuple) -> list[torch.Tensor]:
    """A real DDP to its steady state, untracked: a first step (DDP learns the order gradients
    come in), its buckets rebuilt in that order (as its second forward would), a second step.
    Returns the bucket tensors, caught by a communication hook that all-reduces as DDP does."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    buffers: dict[int, torch.Tensor] = {}

    def catching(process_group, bucket):
        buffers[bucket.index()] = bucket.buffer()
        return allreduce_hook(process_group, bucket)

    model.register_comm_hook(None, catching)
    for step in range(2):
        loss_of(forward(model, batch), batch).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step == 0:
            buffers.clear()
            model.reducer._rebuild_buckets()
    return list(buffers.values())
