"""A rank's memory through one measured step: by category at named phases, and mark by mark.

`Phases` reads PyTorch's own trackers on CPU (`MemTracker` for DDP, `FSDPMemTracker` for
FSDP2, from torch.distributed._tools), which file every live tensor under a category
(parameters, gradients, optimizer state, activations, unsharded parameters, ...), or the
CUDA allocator's statistics on a GPU. `Timeline` takes the same measurement at every
forward/backward boundary of the model, its embedding, each block and its head, marked by
`ModTracker`, and on CUDA also records the allocator's event history. Both are entered for
the measured step only (engines.distributed.worker).
"""
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


class Phases:
    """Memory by category at named moments of the measured step, from a tracker (CPU) or CUDA stats.

    Entered for that one step only: the steps before it run untracked, so a rank's first loss
    is on its way before the trackers are even imported (~1 s: they pull in torch._inductor).
    The tracker then meets the parameters, the optimizer's state and the data as they stand."""

    def __init__(self, model: nn.Module, optimizer, strategy: str, device: torch.device) -> None:
        self.device = device
        self.snapshots: dict[str, dict[str, float]] = {}
        if device.type == "cuda":
            self.tracker = None
            return
        if strategy == "ddp":
            from torch.distributed._tools.mem_tracker import MemTracker
            self.tracker = MemTracker()
            self.tracker.track_external(model, optimizer)
        else:
            from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
            self.tracker = FSDPMemTracker(model, optimizer)

    def __enter__(self) -> "Phases":
        if self.tracker is not None:
            self.tracker.__enter__()
        else:  # CUDA: the peak from here on is this step's
            torch.cuda.reset_peak_memory_stats(self.device)
        return self

    def __exit__(self, *exc) -> None:
        if self.tracker is not None:
            self.tracker.__exit__(*exc)

    def measure(self, kind: str = "current") -> dict[str, float]:
        """This rank's bytes now (or at the peak so far), by category on CPU, allocated vs reserved on CUDA."""
        if self.tracker is None:  # CUDA: the allocator's own view
            stats = torch.cuda.memory_stats(self.device)
            key = "peak" if kind == "peak" else "current"
            return {"allocated": float(stats[f"allocated_bytes.all.{key}"]),
                    "reserved": float(stats[f"reserved_bytes.all.{key}"])}
        raw = self.tracker.get_tracker_snapshot(kind)[self.device]
        by_category: dict[str, float] = {}
        for ref, nbytes in raw.items():
            if ref == "Total":
                continue
            name = CATEGORY.get(getattr(ref, "name", str(ref)), "temporaries")
            by_category[name] = by_category.get(name, 0.0) + float(nbytes)
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
    take `Phases.measure()` — the tracker's categories on CPU, the allocator on CUDA.
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


