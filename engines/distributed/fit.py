"""Will my model fit? One training step's memory per rank, measured without allocating it.

PyTorch's own trackers (`MemTracker`; `FSDPMemTracker` for FSDP2, torch.distributed._tools)
file every live tensor of a step under a category: parameters, gradients, optimizer state,
activations (what forward keeps for backward), temporaries, unsharded (all-gathered)
parameters and communication buffers. Under `FakeTensorMode` every tensor is a shape, a
dtype and a device with no storage behind it, so the same step of a 7B-parameter model
runs in seconds in a few hundred MB, and the trackers count the bytes the real step would
hold. A fake process group (`init_process_group("fake")`, torch's `FakeProcessGroup`)
stands in for the other ranks: collectives return at once, and FSDP2 shards every
parameter over `world` ranks as it would on a real mesh; we are rank 0, which holds the
largest shard (dim 0 is cut in `torch.chunk` pieces, padded to equal size).

How the model is made: the factory runs on the meta device (no memory, no init), the
floating parameters are cast, blocks are wrapped for activation checkpointing and sharded
(`fully_shard` per unit, then the root), and only then `to_empty` makes fake tensors of
the local shards. Sharding meta tensors costs milliseconds; sharding fake tensors goes
through the fake dispatcher once per chunk (≈ 8 s for a 7B model at 64 ranks).

One trap, found here: counting an FSDP optimizer state's bytes with `numel()` reads the
DTensor's *global* size — 64× too much at 64 ranks (9.1 GB for ZeRO's 0.14 GB). The
trackers count storages, which hold the local shard; `to_local()` gives the same.

DDP is measured on the model as each rank holds it (DDP shards nothing; the C++ reducer
cannot take fake tensors), plus its gradient buckets: with `gradient_as_bucket_view=False`
(the default) DDP allocates flat buckets the size of all gradients when it wraps the model
(tests check this against a real reducer's `bucket_sizes`).

The optimizer's lazily created state is made before the measured step by one step on zero
gradients, so the step measured is a steady one. Adam runs `foreach=True`, as it does by
default on a GPU (its temporaries span every tensor at once).
"""
import contextlib
import json
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from engines.distributed.fit_inputs import (FitError, build_model, call_inputs, cast, checkpoint_units, forward,
                                            guess_inputs, loss_of, units)
from engines.distributed.memory_tracking import CATEGORY

STRATEGIES = ("ddp", "fsdp-zero2", "fsdp-zero3")
DTYPES = ("fp32", "bf16", "bf16-mixed")   # bf16-mixed: fp32 parameters and optimizer, bf16 compute
OPTIMIZERS = ("adamw", "adam", "sgd")     # sgd with momentum: one state tensor per parameter
CATEGORIES = ("parameters", "gradients", "optimizer_state", "activations", "unsharded", "temporaries",
              "communication")
PHASES = ("after forward", "after backward", "after optimizer step", "peak")
OUR_NAME = {"parameters": "parameters", "gradients": "gradients", "optimizer state": "optimizer_state",
            "activations": "activations", "unsharded parameters": "unsharded", "temporaries": "temporaries",
            "communication buffers": "communication"}


@dataclass(frozen=True)
class FitSpec:
    """One training step to measure: how it is parallelized, fed and stored."""
    strategy: str = "fsdp-zero3"
    world: int = 8              # ranks (data-parallel degree)
    batch: int = 8              # global batch: each rank takes batch / world
    seq: int = 1024             # tokens per sequence (ignored by a model fed (batch, in_features))
    dtype: str = "bf16"
    optimizer: str = "adamw"
    checkpointing: bool = False
    foreach: bool | None = True  # Adam's multi-tensor path, the default on GPUs; None: torch's default here

    def check(self) -> None:
        for field, value, allowed in (("strategy", self.strategy, STRATEGIES), ("dtype", self.dtype, DTYPES),
                                      ("optimizer", self.optimizer, OPTIMIZERS)):
            if value not in allowed:
                raise FitError(f"{field} {value!r} is not one of {', '.join(allowed)}")
        for field, value in (("world", self.world), ("batch", self.batch), ("seq", self.seq)):
            if value < 1:
                raise FitError(f"{field} must be at least 1, got {value}")
        if self.world > 1024:
            raise FitError(f"world {self.world} is more than 1024 ranks")
        if self.batch % self.world:
            raise FitError(f"world {self.world} does not divide batch {self.batch}: --batch is the global batch, "
                           f"split evenly over the ranks (e.g. --batch {self.world * max(1, self.batch // self.world)})")

    @property
    def rank_batch(self) -> int:
        return self.batch // self.world


def dtypes(spec: FitSpec) -> tuple[torch.dtype, torch.dtype]:
    """(parameter dtype, compute dtype)."""
    if spec.dtype == "fp32":
        return torch.float32, torch.float32
    return (torch.float32 if spec.dtype == "bf16-mixed" else torch.bfloat16), torch.bfloat16


def parameter_sizes(model: nn.Module, compute_bytes: int) -> dict[str, float]:
    """Before wrapping: parameter count, and bytes in the compute dtype of the largest unit,
    of the root's own parameters (outside every unit) and of all of them."""
    unique = {id(p): p for p in model.parameters()}
    in_units = {id(p) for _, _, unit in units(model) for p in unit.parameters()}
    unit_counts = [sum(p.numel() for p in unit.parameters()) for _, _, unit in units(model)]
    n = sum(p.numel() for p in unique.values())
    # DDP's buckets: one flat copy of every gradient, in the parameters' dtype
    grad_bytes = sum(p.numel() * p.element_size() for p in unique.values() if p.requires_grad)
    return {"n_params": float(n), "n_tensors": float(len(unique)), "grad_bytes": float(grad_bytes),
            "unit_param_bytes": float(max(unit_counts, default=n) * compute_bytes),
            "root_param_bytes": float(sum(p.numel() for i, p in unique.items() if i not in in_units) * compute_bytes),
            "all_param_bytes": float(n * compute_bytes), "n_units": float(len(unit_counts))}


def wrap(model: nn.Module, spec: FitSpec, fake: bool, device: torch.device) -> nn.Module:
    """FSDP2 per unit and at the root; real DDP only for a real run (fake DDP is the bare model)."""
    param_dtype, compute_dtype = dtypes(spec)
    if spec.strategy == "ddp":
        if fake:
            return model
        from torch.nn.parallel import DistributedDataParallel
        return DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    policy = MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32) \
        if compute_dtype != param_dtype else MixedPrecisionPolicy()
    reshard = spec.strategy == "fsdp-zero3"
    for _, _, unit in units(model):
        fully_shard(unit, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    return model


def make_optimizer(model: nn.Module, spec: FitSpec) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if spec.optimizer == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=spec.foreach)
    cls = torch.optim.AdamW if spec.optimizer == "adamw" else torch.optim.Adam
    return cls(params, lr=1e-3, foreach=spec.foreach)


def create_state(optimizer: torch.optim.Optimizer) -> None:
    """The optimizer's lazy state, made by one step on zero gradients (no forward, no backward)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            p.grad = torch.zeros_like(p)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def read(tracker, kind: str = "current") -> dict[str, float]:
    """The tracker's bytes by our category (every device it saw, summed)."""
    out = dict.fromkeys(CATEGORIES, 0.0)
    for by_reference in tracker.get_tracker_snapshot(kind).values():
        for reference, nbytes in by_reference.items():
            if reference != "Total":
                out[OUR_NAME[CATEGORY.get(getattr(reference, "name", str(reference)), "temporaries")]] += nbytes
    return out


def tracked_step(model: nn.Module, optimizer, inputs: tuple, spec: FitSpec, device: torch.device,
                 buckets: list[torch.Tensor], bucket_bytes: float) -> dict[str, dict[str, float]]:
    """One steady step inside the tracker: bytes by category after forward, backward, the
    optimizer step, and at the peak. DDP's buckets (`bucket_bytes`) are filed under
    communication: a real DDP's bucket tensors are given to the tracker (it would call them
    temporaries), a fake DDP has none and their bytes are added."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.mem_tracker import MemTracker
    tensors = [t for t in inputs if torch.is_tensor(t)]
    if spec.strategy == "ddp":
        tracker = MemTracker()
        tracker.track_external(model, optimizer, *tensors, *buckets)
    else:
        tracker = FSDPMemTracker(model, optimizer)
        tracker.track_inputs(tuple(tensors))
    param_dtype, compute_dtype = dtypes(spec)
    autocast = torch.autocast(device.type, dtype=compute_dtype) \
        if spec.strategy == "ddp" and param_dtype != compute_dtype else contextlib.nullcontext()
    phases: dict[str, dict[str, float]] = {}
    with tracker:
        with autocast:
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


def measure(factory: Callable[[], Any], spec: FitSpec, inputs: Callable[[int, int], Any] | None = None, *,
            fake: bool = True, name: str = "the model factory", device: str = "cpu") -> dict[str, Any]:
    """Per-rank bytes by category at each phase of one training step of `factory()` under `spec`.

    `fake=False` runs the same step for real (in the process group already set up, or a
    1-rank gloo group): the tests hold the two equal. Returns plain numbers: "phases"
    (phase -> category -> bytes), "sizes" (n_params, unit bytes, ...), "seconds"."""
    spec.check()
    started = time.perf_counter()
    target = torch.device(device)
    owned = not dist.is_initialized()
    if owned:
        from torch.testing._internal.distributed.fake_pg import FakeStore
        store = FakeStore() if fake else dist.HashStore()
        if not fake and spec.world != 1:
            raise FitError("a real measurement at world > 1 runs on real ranks (engines.distributed.fit_rank)")
        dist.init_process_group("fake" if fake else "gloo", rank=0, world_size=spec.world, store=store)
    elif dist.get_world_size() != spec.world:
        raise FitError(f"a process group of {dist.get_world_size()} ranks is already set up; world is {spec.world}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # FSDP and the trackers warn about their internals
            phases, sizes = _measure(factory, spec, inputs, fake, name, target)
            return {"phases": phases, "sizes": sizes, "spec": asdict(spec), "device": device, "fake": fake, "rank": dist.get_rank(),
                    "seconds": time.perf_counter() - started}
    finally:
        if owned:
            dist.destroy_process_group()


def _measure(factory, spec: FitSpec, inputs, fake: bool, name: str, device: torch.device) -> tuple[dict, dict]:
    param_dtype, compute_dtype = dtypes(spec)
    with torch.device("meta") if fake else contextlib.nullcontext():
        model = cast(build_model(factory, name), param_dtype)
    sizes = parameter_sizes(model, torch.finfo(compute_dtype).bits // 8)
    if spec.checkpointing:
        checkpoint_units(model)
    model = wrap(model, spec, fake, device)
    mode = contextlib.nullcontext()
    if fake:
        from torch._subclasses.fake_tensor import FakeTensorMode
        mode = FakeTensorMode(allow_non_fake_inputs=True)  # the meta tensors become fake ones in to_empty
    with mode:
        if fake:
            model.to_empty(device=device)
        elif device.type != "cpu":
            model.to(device)
        optimizer = make_optimizer(model, spec)
        batch = call_inputs(inputs, spec.rank_batch, spec.seq, name) if inputs is not None \
            else guess_inputs(model, spec.rank_batch, spec.seq, device)
        buckets = real_ddp_warm_up(model, optimizer, batch) if spec.strategy == "ddp" and not fake else []
        create_state(optimizer)
        bucket_bytes = 0.0
        if spec.strategy == "ddp":  # fake: one flat copy of every gradient; real: the reducer's own buckets
            bucket_bytes = sum(b.numel() * b.element_size() for b in buckets) if buckets else sizes["grad_bytes"]
        try:
            return tracked_step(model, optimizer, batch, spec, device, buckets, float(bucket_bytes)), sizes
        except RuntimeError as error:
            if "dtype" in str(error).lower() or "expected scalar type" in str(error).lower():
                raise FitError(f"the model cannot run in {spec.dtype}: {str(error).splitlines()[0]}") from None
            raise


def main(argv: list[str] | None = None) -> int:
    """`python -m engines.distributed.fit --job '{...}'`: one measurement, as a JSON line on stdout
    (the page runs this in a subprocess: it holds no torch). Bad input: {"error": ...}, exit 2."""
    import argparse
    from engines.distributed.fit_report import report
    from engines.loop.runtime import configure
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job", required=True, help="JSON: {model | architecture, inputs, spec}")
    job = json.loads(parser.parse_args(argv).job)
    configure(1)
    try:
        print(json.dumps(report(job)))
    except FitError as error:
        print(json.dumps({"error": str(error)}))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
