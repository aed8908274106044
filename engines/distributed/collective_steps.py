"""The collectives page's two other measurements, per rank: a DTensor's placements and
redistributions, and the collectives one DDP or FSDP2 training step issues.

DTensor: one (rows × cols) tensor, `distribute_tensor` to `Shard(0)` (rank 0's copy scattered:
each rank keeps its `torch.chunk` piece of the rows), `redistribute` to `Replicate()` (an
all-gather), back to `Shard(0)` (each rank keeps its piece: no communication) and to `Shard(1)`
(the columns: an all-to-all). Each transition records each rank's local shape, whether its
local piece is the slice of the full tensor it should be, what the transition issued
(`CommDebugMode`) and its socket bytes.

Training steps: the same seeded stack of Linear layers under DDP (one all-reduce of the
gradient bucket per step, the model being far below DDP's first bucket cap) and under FSDP2
with every layer its own unit and `reshard_after_forward=True` (an all-gather of each unit
before its forward and again before its backward, and a reduce-scatter of each unit's
gradients), counted by engines.distributed.shards for the forward and for backward + optimizer step.
Like every loop here, a step whose loss (all-reduced over the ranks, outside the counted calls) is
not finite ends that strategy's arm with a `diverged` record (`engines.loop.records.divergence`).
"""
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn

from engines.distributed.collectives import KINDS, reported, socket_bytes
from engines.distributed.shards import Collectives
from engines.loop.records import divergence

TRANSITIONS = ("distribute_tensor → Shard(0)", "Shard(0) → Replicate()", "Replicate() → Shard(0)",
               "Shard(0) → Shard(1)")
STRATEGIES = ("DDP", "FSDP")


def expected_piece(full: torch.Tensor, dim: int | None, rank: int, world: int) -> torch.Tensor:
    """What rank `rank` should hold: all of `full` (replicated) or its `torch.chunk` piece along `dim`."""
    if dim is None:
        return full
    pieces = full.chunk(world, dim=dim)
    if rank < len(pieces):
        return pieces[rank]
    empty = list(full.shape)
    empty[dim] = 0
    return full.new_empty(empty)


def dtensor_transitions(job: dict, rank: int, world: int, emit: Callable[[dict], None]) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (world,))
    rows, cols = job["dtensor_shape"]
    full = torch.arange(rows * cols, dtype=torch.float32).view(rows, cols)  # the same on every rank
    moves = [lambda _: distribute_tensor(full, mesh, [Shard(0)]), lambda d: d.redistribute(mesh, [Replicate()]),
             lambda d: d.redistribute(mesh, [Shard(0)]), lambda d: d.redistribute(mesh, [Shard(1)])]
    current = None
    for index, move in enumerate(moves):
        dist.barrier()
        before = socket_bytes()
        with Collectives(KINDS) as counted:
            current = move(current)
        after = socket_bytes()
        placement = current.placements[0]
        dim = placement.dim if placement.is_shard() else None
        local = current.to_local()
        expected = expected_piece(full, dim, rank, world)
        values = {"local_rows": float(local.shape[0]), "local_cols": float(local.shape[1]),
                  "exact": float(local.shape == expected.shape and torch.equal(local, expected)), **counted.metrics()}
        if before is not None and after is not None:
            values.update(sent_bytes=after[0] - before[0], received_bytes=after[1] - before[1])
        shared = {"shard_dim": float(-1 if dim is None else dim), "rows": float(rows), "cols": float(cols),
                  "full_tensor_exact": float(torch.equal(current.full_tensor(), full))}
        emit(reported("DTensor", index, rank, values, shared))


def wrapped(strategy: str, layers: int, hidden: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)  # the same weights on every rank
    model = nn.Sequential(*(nn.Linear(hidden, hidden) for _ in range(layers)))
    if strategy == "DDP":
        from torch.nn.parallel import DistributedDataParallel
        return DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))  # gloo on CPU, whatever accelerator the machine has
    for layer in model:
        fully_shard(layer, mesh=mesh, reshard_after_forward=True)
    return fully_shard(model, mesh=mesh)  # the root owns no parameters of its own


def training_steps(job: dict, rank: int, world: int, emit: Callable[[dict], None]) -> None:
    layers, hidden = job["layers"], job["hidden"]
    for strategy in STRATEGIES:
        model = wrapped(strategy, layers, hidden, job["seed"])
        optimizer = torch.optim.SGD(model.parameters(), lr=job.get("train_lr", 0.01))
        data = torch.Generator().manual_seed(job["seed"] * 1000 + rank)  # each rank its own batch
        for step in range(job["train_steps"]):
            batch = torch.randn(8, hidden, generator=data)
            with Collectives() as forward:
                loss = model(batch).square().mean()
            with Collectives() as backward:
                loss.backward()
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            mean_loss = loss.detach().clone()
            dist.all_reduce(mean_loss)  # outside the counted steps: every rank judges the same number
            diverged = divergence(step, {"loss": float(mean_loss) / world})
            if diverged is not None:  # every rank ends the arm at this step, so the collectives stay matched
                emit({"arm": strategy, "rank": rank, "step": step, "diverged": diverged.message})
                break
            values = {**{f"forward/{k}": v for k, v in forward.metrics().items()},
                      **{f"backward/{k}": v for k, v in backward.metrics().items()}, "loss": float(loss)}
            shared = {"units": float(layers), "parameters": float(sum(p.numel() for p in model.parameters()))}
            emit(reported(strategy, step, rank, values, shared))
        del model, optimizer
