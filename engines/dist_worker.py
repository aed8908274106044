"""One rank of a distributed memory measurement: `python -m engines.dist_worker`.

Started once per rank by `engines.distributed.launch` (gloo on CPU, NCCL on CUDA, a
fresh port per run), or by `torchrun` on a real multi-GPU / multi-node job:

    torchrun --nproc_per_node=8 -m engines.dist_worker --job '{"layers": 12, ...}' --out results/

For each strategy (DDP, FSDP2 with `reshard_after_forward` True ≈ ZeRO-3 or False ≈ ZeRO-2,
optionally FSDP2 with bf16 parameters) it builds the same seeded Transformer, trains a few
steps on the same data, and measures this rank's memory by category at three phases of
one step (after forward, after backward, after the optimizer step) and at the step's
peak — with PyTorch's own trackers on CPU (`MemTracker`, `FSDPMemTracker`) and
`torch.cuda` statistics on GPU — plus exact byte counts of the local parameter, gradient
and optimizer-state tensors (`DTensor.to_local()` for shards). With `"timeline": true` in
the job, rank 0 also records its memory at every block boundary of that step (on CUDA also
the allocator's event history, and under `--out` a snapshot file for pytorch.org/memory_viz).
Every record is one JSON line on stdout (or in `--out`/rank_XX.jsonl under torchrun).
"""
import argparse
import contextlib
import datetime
import gc
import json
import os
import pickle
import sys
import warnings

import torch
import torch.distributed as dist
from torch import nn

from engines.distributed import BOUNDARIES, timeline_labels

CATEGORY = {  # tracker reference types -> our categories
    "PARAM": "parameters", "SHARDED_PARAM": "parameters", "BUFFER": "parameters",
    "GRAD": "gradients", "SHARDED_GRAD": "gradients", "UNSHARDED_GRAD": "gradients",
    "OPT": "optimizer state", "ACT": "activations", "INP": "activations",
    "UNSHARDED_PARAM": "unsharded parameters", "TEMP": "temporaries", "OTH": "temporaries",
    "ALL_GATHER": "communication buffers", "REDUCE_SCATTER": "communication buffers",
}


class TinyTransformer(nn.Module):
    """Embedding, `layers` pre-LN encoder blocks, a vocabulary head. Blocks are FSDP units."""

    def __init__(self, vocab: int, hidden: int, layers: int, heads: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, dropout=0.0, batch_first=True, norm_first=True)
            for _ in range(layers))
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)  # (batch, seq, hidden)
        for block in self.blocks:
            h = block(h)
        return self.head(h)  # (batch, seq, vocab)


def wrap(model: nn.Module, strategy: str, device: torch.device) -> nn.Module:
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    reshard = strategy in ("fsdp-zero3", "fsdp-zero3-bf16")
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if strategy.endswith("bf16") else MixedPrecisionPolicy()
    for block in model.blocks:
        fully_shard(block, reshard_after_forward=reshard, mp_policy=policy)
    fully_shard(model, reshard_after_forward=reshard, mp_policy=policy)
    return model


def local_bytes(tensors) -> int:
    """Exact bytes this rank holds for `tensors` (the local shard of a DTensor)."""
    total = 0
    for t in tensors:
        if t is None:
            continue
        t = t.to_local() if hasattr(t, "to_local") else t
        total += t.numel() * t.element_size()
    return total


def optimizer_tensors(optimizer: torch.optim.Optimizer):
    for state in optimizer.state.values():
        yield from (v for v in state.values() if torch.is_tensor(v))


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


def run_strategy(job: dict, strategy: str, rank: int, world: int, device: torch.device, emit,
                 snapshot_dir: str | None = None) -> None:
    torch.manual_seed(job["seed"])  # the same initial weights on every rank and every strategy
    model = TinyTransformer(job["vocab"], job["hidden"], job["layers"], job["heads"]).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    unit_bytes = max(sum(p.numel() * p.element_size() for p in b.parameters()) for b in model.blocks)
    root_bytes = sum(p.numel() * p.element_size() for m in (model.embed, model.head) for p in m.parameters())
    model = wrap(model, strategy, device)
    opt_class = torch.optim.AdamW if job["optimizer"] == "adamw" else torch.optim.Adam
    optimizer = opt_class(model.parameters(), lr=job["lr"])
    data = torch.Generator().manual_seed(job["seed"] * 1000 + rank)  # each rank its own shard, the same for every strategy
    measure_step = min(1, job["steps"] - 1)  # step 0 creates Adam's state lazily; measure a steady step
    phases = timeline = exact = None
    for step in range(job["steps"]):
        tokens = torch.randint(job["vocab"], (job["batch"], job["seq_len"]), generator=data).to(device)
        measured = step == measure_step
        with contextlib.ExitStack() as measuring:
            if measured:
                phases = measuring.enter_context(Phases(model, optimizer, strategy, device))
                if job.get("timeline") and rank == 0:
                    timeline = measuring.enter_context(Timeline(phases))
                    timeline.mark("step start")
            logits = model(tokens)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), tokens.flatten())  # learn to copy
            if measured:
                phases.take("after forward")
            loss.backward()
            if measured:
                phases.take("after backward")
                if timeline is not None:
                    timeline.mark("after backward")
            optimizer.step()
            if measured:
                phases.take("after optimizer step")
                phases.take("peak", "peak")
                exact = {"exact/parameters": local_bytes(model.parameters()),
                         "exact/gradients": local_bytes(p.grad for p in model.parameters()),
                         "exact/optimizer state": local_bytes(optimizer_tensors(optimizer))}
                if timeline is not None:
                    timeline.mark("after optimizer step")
        optimizer.zero_grad(set_to_none=True)
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        emit({"arm": strategy, "rank": rank, "step": step, "metrics": {"loss": float(mean_loss) / world}})
    metrics = {f"{phase}/{category}": value for phase, cats in phases.snapshots.items() for category, value in cats.items()}
    metrics.update(exact)
    metrics.update({"n_params": float(n_params), "unit_param_bytes": float(unit_bytes),
                    "root_param_bytes": float(root_bytes), "on_cuda": float(device.type == "cuda")})
    metrics.update({f"shape/{k}": float(job[k]) for k in ("layers", "hidden", "heads", "seq_len", "batch", "vocab")})
    if timeline is not None:
        metrics.update(timeline.metrics(job["layers"]))
        if timeline.snapshot is not None and snapshot_dir:  # for https://pytorch.org/memory_viz
            with open(os.path.join(snapshot_dir, f"rank_{rank:02d}_{strategy}_memory_snapshot.pickle"), "wb") as f:
                pickle.dump(timeline.snapshot, f)
    emit({"arm": strategy, "rank": rank, "step": measure_step, "metrics": metrics})
    del model, optimizer
    gc.collect()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job", required=True, help="JSON: strategies, seed, vocab, hidden, layers, heads, batch, seq_len, steps, lr, optimizer")
    parser.add_argument("--rank", type=int, default=None)
    parser.add_argument("--world-size", type=int, default=None)
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--timeout-s", type=float, default=60.0, help="limit on every collective")
    parser.add_argument("--out", help="under torchrun: a folder for rank_XX.jsonl instead of stdout")
    args = parser.parse_args(argv)
    job = json.loads(args.job)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")  # trackers and FSDP warn about internals; stderr is for errors
    cuda = torch.cuda.is_available() and job.get("device", "auto") != "cpu"
    backend = "nccl" if cuda else "gloo"
    timeout = datetime.timedelta(seconds=args.timeout_s)
    local_rank = int(os.environ.get("LOCAL_RANK", args.rank if args.rank is not None else 0))
    device = torch.device("cuda", local_rank % torch.cuda.device_count()) if cuda else torch.device("cpu")
    if cuda:  # one GPU per process, chosen before the process group binds to it
        torch.cuda.set_device(device)
    bind = {"device_id": device} if cuda else {}
    if args.rank is None:  # torchrun sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
        dist.init_process_group(backend, timeout=timeout, **bind)
    else:
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{args.port}", rank=args.rank,
                                world_size=args.world_size, timeout=timeout, **bind)
    rank, world = dist.get_rank(), dist.get_world_size()
    sink = open(os.path.join(args.out, f"rank_{rank:02d}.jsonl"), "w") if args.out else sys.stdout

    def emit(record: dict) -> None:
        sink.write(json.dumps({**record, "world_size": world, "device": device.type}) + "\n")
        sink.flush()

    try:
        if job.get("fail_rank") == rank:  # for tests: a rank that raises mid-run
            raise RuntimeError(f"injected failure on rank {rank}")
        for strategy in job["strategies"]:
            run_strategy(job, strategy, rank, world, device, emit, args.out)
    finally:
        dist.destroy_process_group()
        if sink is not sys.stdout:
            sink.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
