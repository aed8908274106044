"""A rank's memory through one measured step: by category at named phases, and mark by mark.

`Phases` reads PyTorch's own trackers (`MemTracker` for DDP, `FSDPMemTracker` for FSDP2, from
torch.distributed._tools), which file every live tensor under a category (parameters,
gradients, optimizer state, activations, unsharded parameters, ...), on CPU and on CUDA alike;
on CUDA the tracker rounds each allocation up to the caching allocator's 512-byte blocks, and
the allocator's own totals ("allocated", "reserved") are read beside the categories.
`Timeline` takes the same measurement at every forward/backward boundary of the model, its
embedding, each block and its head, marked by `ModTracker`, and on CUDA also records the
allocator's event history. Both are entered for the measured step only
(engines.distributed.worker).
"""
from collections.abc import Mapping

import torch
from torch import nn

from engines.distributed.launch import BOUNDARIES, timeline_labels

CATEGORY = {  # tracker reference types -> our categories
    "PARAM": "parameters", "SHARDED_PARAM": "parameters", "BUFFER": "parameters",
    "GRAD": "gradients", "SHARDED_GRAD": "gradients", "UNSHARDED_GRAD": "gradients",
    "OPT": "optimizer state", "ACT": "activations", "INP": "activations",
    "UNSHARDED_PARAM": "unsharded parameters", "TEMP": "temporaries", "OTH": "temporaries",
    "ALL_GATHER": "communication buffers", "REDUCE_SCATTER": "communication buffers",
}
ALLOCATOR = ("allocated", "reserved")  # CUDA's caching allocator: totals, not categories (reserved ⊇ allocated)


def allocator_reading(stats: Mapping[str, int], kind: str = "current") -> dict[str, float]:
    """`torch.cuda.memory_stats()` -> the allocator's allocated and reserved bytes, now or at the peak."""
    key = "peak" if kind == "peak" else "current"
    return {name: float(stats[f"{name}_bytes.all.{key}"]) for name in ALLOCATOR}


class CudaAllocator:
    """One GPU's caching-allocator totals; the peak counted from `reset_peak()` on."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def reset_peak(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def read(self, kind: str = "current") -> dict[str, float]:
        return allocator_reading(torch.cuda.memory_stats(self.device), kind)


class Phases:
    """Memory by category at named moments of the measured step, from a tracker, on any device
    (and, on CUDA, the allocator's totals beside them).

    Entered for that one step only: the steps before it run untracked, so a rank's first loss
    is on its way before the trackers are even imported (~1 s: they pull in torch._inductor).
    The tracker then meets the parameters, the optimizer's state and the data as they stand.
    `allocator`: where the totals come from (default: the CUDA allocator on a GPU, none on CPU)."""

    def __init__(self, model: nn.Module, optimizer, strategy: str, device: torch.device,
                 allocator: CudaAllocator | None = None) -> None:
        self.device = device
        self.snapshots: dict[str, dict[str, float]] = {}
        self.allocator = allocator if allocator is not None else CudaAllocator(device) if device.type == "cuda" else None
        if strategy == "ddp":
            from torch.distributed._tools.mem_tracker import MemTracker
            self.tracker = MemTracker()
            self.tracker.track_external(model, optimizer)
        else:
            from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
            self.tracker = FSDPMemTracker(model, optimizer)

    def __enter__(self) -> "Phases":
        self.tracker.__enter__()
        if self.allocator is not None:  # the peak from here on is this step's
            self.allocator.reset_peak()
        return self

    def __exit__(self, *exc) -> None:
        self.tracker.__exit__(*exc)

    def measure(self, kind: str = "current") -> dict[str, float]:
        """This rank's bytes now (or at the peak so far) by category, and the allocator's totals on CUDA."""
        raw = self.tracker.get_tracker_snapshot(kind).get(self.device, {})
        by_category: dict[str, float] = {}
        for ref, nbytes in raw.items():
            if ref == "Total":
                continue
            name = CATEGORY.get(getattr(ref, "name", str(ref)), "temporaries")
            by_category[name] = by_category.get(name, 0.0) + float(nbytes)
        if self.allocator is not None:
            by_category.update(self.allocator.read(kind))
        return by_category

    def take(self, phase: str, kind: str = "current") -> None:
        self.snapshots[phase] = self.measure(kind)


def part_of(fqn: str) -> str | None:
    """The timeline's unit for a module name from ModTracker ("…blocks.3.linear1" -> "blocks.3")."""
    parts = fqn.split(".")
    if len(parts) == 1 or parts[-1] == "module":  # the root (under DDP: the wrapper and its module)
        return "model"
    tail = parts[1:] if parts[1] != "module" else parts[2:]
    if tail and tail[0] in ("embed", "head") and len(tail) == 1:
        return tail[0]
    if len(tail) == 2 and tail[0] == "blocks":
        return f"blocks.{tail[1]}"
    return None


class Timeline:
    """Memory at every unit's boundaries through one step, in call order.

    `ModTracker` (torch.distributed._tools) marks each module's forward and backward
    start and end; at each mark of the model, its embedding, its blocks and its head we
    take `Phases.measure()` — the tracker's categories (and, on CUDA, the allocator's totals).
    On CUDA the allocator's own event history is recorded too (`_record_memory_history`),
    and `trace()` turns it into allocated bytes after every allocation and free.
    """

    def __init__(self, phases: "Phases") -> None:
        self.phases = phases
        self.points: list[tuple[str, dict[str, float]]] = []
        self.snapshot: dict | None = None

    def mark(self, label: str) -> None:
        if self.points and self.points[-1][0] == label:  # DDP's wrapper and its module are both "model"
            return
        self.points.append((label, self.phases.measure()))

    def _hook(self, boundary: str):
        def hook(module, *_):
            fqn = self.tracker.get_known_fqn(module) if module is not None else None
            unit = part_of(fqn) if fqn else None
            if unit is not None:
                self.mark(f"{unit} {boundary}")
        return hook

    def __enter__(self) -> "Timeline":
        from torch.distributed._tools.mod_tracker import ModTracker
        self.tracker = ModTracker()
        self.tracker.register_user_hooks(*(self._hook(b) for b in BOUNDARIES))
        self.tracker.__enter__()
        if self.phases.device.type == "cuda":
            self.baseline = torch.cuda.memory_allocated(self.phases.device)
            torch.cuda.memory._record_memory_history(stacks="python", max_entries=200_000)
        return self

    def __exit__(self, *exc) -> None:
        self.tracker.__exit__(*exc)
        if self.phases.device.type == "cuda":
            self.snapshot = torch.cuda.memory._snapshot()
            torch.cuda.memory._record_memory_history(enabled=None)

    def metrics(self, layers: int) -> dict[str, float]:
        """`timeline/<i>/<category>` and `timeline/<i>/where` (the mark's index in
        `timeline_labels(layers)`) for every mark, `trace/<i>` for the CUDA history."""
        labels, out = timeline_labels(layers), {}
        for i, (label, cats) in enumerate(self.points):
            out[f"timeline/{i:03d}/where"] = float(labels.index(label))
            out.update({f"timeline/{i:03d}/{category}": value for category, value in cats.items()})
        out.update({f"trace/{i:03d}": value for i, value in enumerate(self.trace())})
        return out

    def trace(self, max_points: int = 200) -> list[float]:
        """CUDA: allocated bytes after each allocator event of the step (thinned to `max_points`)."""
        if self.snapshot is None:
            return []
        level, levels = float(self.baseline), []
        for event in self.snapshot["device_traces"][self.phases.device.index]:
            if event["action"] == "alloc":
                level += event["size"]
            elif event["action"] == "free_completed":
                level -= event["size"]
            else:
                continue
            levels.append(level)
        stride = max(1, -(-len(levels) // max_points))
        thinned = levels[::stride]
        return thinned + levels[-1:] if (len(levels) - 1) % stride else thinned


