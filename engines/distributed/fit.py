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
through the fake dispatcher once per `torch.chunk` piece (seconds for a 7B model at 64 ranks).

One trap: counting an FSDP optimizer state's bytes with `numel()` reads the DTensor's
*global* size, exactly world × the shard (64×: 9.1 GB where ZeRO has 0.14 GB, as an earlier
reading here had it). The trackers count storages, which hold the local shard, as does
`to_local()`.

DDP is measured on the model as each rank holds it (DDP shards nothing; the C++ reducer
cannot take fake tensors), plus its gradient buckets: with `gradient_as_bucket_view=False`
(the default) DDP allocates flat buckets the size of all gradients when it wraps the model
(tests compare a real reducer's bucket tensors, caught by a communication hook).

The optimizer's lazily created state is made before the measured step by one step on zero
gradients, so the step measured is a steady one. Adam runs `foreach=True`, as it does by
default on a GPU (its temporaries span every tensor at once).
"""
import contextlib
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from engines.distributed.fit_analytic import ceil_rows
from engines.distributed.fit_inputs import (FitError, build_model, call_inputs, cast, checkpoint_units, guess_inputs,
                                            units)
from engines.distributed.fit_step import real_ddp_warm_up, tracked_step

STRATEGIES = ("single", "ddp", "fsdp-zero2", "fsdp-zero3")  # single: one device, no wrapper
DTYPES = ("fp32", "bf16", "bf16-mixed")   # bf16-mixed: fp32 parameters and optimizer, bf16 compute
OPTIMIZERS = ("adamw", "adam", "sgd")     # sgd with momentum: one state tensor per parameter
PHASES = ("after forward", "after backward", "after optimizer step", "peak")


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
        if self.strategy == "single" and self.world != 1:
            raise FitError(f"strategy single is one device: world must be 1, got {self.world}")
        if self.world > 1024:
            raise FitError(f"world {self.world} is more than 1024 ranks")
        if self.batch % self.world:
            example = self.world * max(1, self.batch // self.world)
            raise FitError(f"world {self.world} does not divide batch {self.batch}: --batch is the global batch, "
                           f"split evenly over the ranks (e.g. --batch {example})")

    @property
    def rank_batch(self) -> int:
        return self.batch // self.world


def dtypes(spec: FitSpec) -> tuple[torch.dtype, torch.dtype]:
    """(parameter dtype, compute dtype)."""
    if spec.dtype == "fp32":
        return torch.float32, torch.float32
    return (torch.float32 if spec.dtype == "bf16-mixed" else torch.bfloat16), torch.bfloat16


def parameter_sizes(model: nn.Module, compute_bytes: int, world: int) -> dict[str, float]:
    """Before wrapping: parameter count and tensors, bytes in the compute dtype of the largest
    unit, of the root's own parameters (outside every unit) and of all of them; the gradients'
    bytes; the elements of rank 0's padded FSDP shards."""
    unique = {id(p): p for p in model.parameters()}
    in_units = {id(p) for _, _, unit in units(model) for p in unit.parameters()}
    unit_counts = [sum(p.numel() for p in unit.parameters()) for _, _, unit in units(model)]
    n = sum(p.numel() for p in unique.values())
    # DDP's buckets: one flat copy of every gradient, in the parameters' dtype
    grad_bytes = sum(p.numel() * p.element_size() for p in unique.values() if p.requires_grad)
    return {"n_params": float(n), "n_tensors": float(len(unique)), "grad_bytes": float(grad_bytes),
            "unit_param_bytes": float(max(unit_counts, default=n) * compute_bytes),
            "root_param_bytes": float(sum(p.numel() for i, p in unique.items() if i not in in_units) * compute_bytes),
            "all_param_bytes": float(n * compute_bytes), "n_units": float(len(unit_counts)),
            "padded_elements": float(sum(ceil_rows(p.numel(), p.shape[0], world) if p.dim() else 1
                                         for p in unique.values()))}


def wrap(model: nn.Module, spec: FitSpec, fake: bool, device: torch.device) -> nn.Module:
    """FSDP2 per unit and at the root; real DDP only for a real run (fake DDP is the bare model)."""
    param_dtype, compute_dtype = dtypes(spec)
    if spec.strategy in ("single", "ddp"):
        if fake or spec.strategy == "single":
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


def make_optimizer(model: nn.Module, spec: FitSpec, on_local_shards: bool) -> torch.optim.Optimizer:
    """The optimizer over the model's parameters or, `on_local_shards`, over each FSDP parameter's
    local shard, handed the local shard of its gradient before every step.

    Why the second: a foreach op on DTensors propagates shardings over all its tensors at once,
    quadratic in their number on the first call (uncached): tens of seconds of CPU for a 7B
    GPT's 389 tensors. Elementwise, the DTensor step is the local step, tensor for tensor: the
    fake step on local shards files the bytes of the real step on DTensors (tests). Under
    FakeTensorMode the DTensor step itself does not always: for SGD it files a second copy of
    the momentum at the peak, which the real step never holds (measured at world 1)."""
    from torch.distributed.tensor import DTensor
    pairs = [(p, p._local_tensor if on_local_shards and isinstance(p, DTensor) else p)
             for p in model.parameters() if p.requires_grad]
    params = [local for _, local in pairs]
    if spec.optimizer == "sgd":
        optimizer = torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=spec.foreach)
    else:
        cls = torch.optim.AdamW if spec.optimizer == "adamw" else torch.optim.Adam
        optimizer = cls(params, lr=1e-3, foreach=spec.foreach)
    if any(p is not local for p, local in pairs):
        def hand_over(*_) -> None:  # the same storage under a second name: no bytes move
            for p, local in pairs:
                if p is not local and p.grad is not None:
                    local.grad = p.grad._local_tensor
        optimizer.register_step_pre_hook(hand_over)
    return optimizer


def create_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """The optimizer's lazy state, made by one step on zero gradients (no forward, no backward)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            p.grad = torch.zeros_like(p)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    model.zero_grad(set_to_none=True)


def measure(factory: Callable[[], Any], spec: FitSpec, inputs: Callable[[int, int], Any] | None = None, *,
            fake: bool = True, name: str = "the model factory", device: str = "cpu",
            local_optimizer: bool = True) -> dict[str, Any]:
    """Per-rank bytes by category at each phase of one training step of `factory()` under `spec`.

    `fake=False` runs the same step for real (in the process group already set up, or a
    1-rank gloo group): the tests hold the two equal. Returns plain numbers: "phases"
    (phase -> category -> bytes), "sizes" (n_params, unit bytes, ...), "seconds"."""
    spec.check()
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise FitError("device cuda needs a GPU on this machine (fake CUDA tensors still ask the CUDA runtime); "
                       "use device cpu")
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
            phases, sizes = _measure(factory, spec, inputs, fake, name, target, local_optimizer)
            return {"phases": phases, "sizes": sizes, "spec": asdict(spec), "device": device, "fake": fake,
                    "rank": dist.get_rank(),
                    "seconds": time.perf_counter() - started}
    finally:
        if owned:
            dist.destroy_process_group()


def _measure(factory, spec: FitSpec, inputs, fake: bool, name: str, device: torch.device,
             local_optimizer: bool) -> tuple[dict, dict]:
    param_dtype, compute_dtype = dtypes(spec)
    with torch.device("meta") if fake else contextlib.nullcontext():
        model = cast(build_model(factory, name), param_dtype)
    class_name = type(model).__name__
    sizes = parameter_sizes(model, torch.finfo(compute_dtype).bits // 8, spec.world)
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
        optimizer = make_optimizer(model, spec, on_local_shards=fake and local_optimizer)
        batch = call_inputs(inputs, spec.rank_batch, spec.seq, getattr(inputs, "__qualname__", "inputs")) \
            if inputs is not None \
            else guess_inputs(model, spec.rank_batch, spec.seq, device)
        buckets = real_ddp_warm_up(model, optimizer, batch) if spec.strategy == "ddp" and not fake else []
        create_state(model, optimizer)
        bucket_bytes = 0.0
        if spec.strategy == "ddp":  # fake: one flat copy of every gradient; real: the reducer's own buckets
            bucket_bytes = sum(b.numel() * b.element_size() for b in buckets) if buckets else sizes["grad_bytes"]
        replicated = spec.strategy in ("single", "ddp")  # every rank holds the whole model
        autocast = compute_dtype if replicated and param_dtype != compute_dtype else None
        try:
            phases = tracked_step(model, optimizer, batch, replicated, autocast, device, buckets,
                                  float(bucket_bytes), check_dtypes=fake)
        except TypeError as error:
            if inputs is None and "argument" in str(error):  # forward wants more than the guessed inputs
                raise FitError(f"cannot guess the inputs of {class_name}.forward ({error}): pass --inputs "
                               f"MODULE:FUNCTION, a function (batch, seq) -> example inputs") from None
            raise
        except RuntimeError as error:
            if "dtype" in str(error).lower() or "expected scalar type" in str(error).lower():
                raise FitError(f"the model cannot run in {spec.dtype}: {str(error).splitlines()[0]}") from None
            raise
        return phases, sizes
