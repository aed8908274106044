"""One rank of the collectives page: what each collective computes, sends, receives and costs.

Run inside `engines.distributed.worker` (job kind "collectives", gloo on CPU, one process per rank,
started by `engines.distributed.launch.launch`). Every rank builds the same inputs from the seed —
integer-valued floats, so a sum is exact in any order — and so can compute every collective's
answer on its own (the single-process reference) and compare with what the process group
returned. Around each collective it reads

- what torch issued, counted by `CommDebugMode` (one collective per call; none for point-to-point);
- the bytes this rank's TCP sockets sent and received (the kernel's counters, `TCP_INFO`), to
  set against the ring algorithm's 2(N−1)/N·S for an all-reduce and (N−1)/N·S for an all-gather
  or a reduce-scatter of S bytes;
- the wall time of the call (median over repeats, after a barrier).

Besides gloo's own collectives it runs a ring all-reduce written out with `isend`/`recv`: N − 1
steps of reduce-scatter, then N − 1 of all-gather, S/N bytes a step — the formula, by hand.
Then a DTensor: `distribute_tensor(..., [Shard(0)])`, `redistribute` to `Replicate()`, back to
`Shard(0)` and on to `Shard(1)`, with each rank's local shard and what each redistribution issued;
and what DDP and FSDP2 issue in a training step (engines.distributed.shards counts them). Every rank emits
one record per (op, size), per DTensor transition and per training step.
"""
import os
import socket
import statistics
import struct
import time
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn

from engines.distributed.launch import COLLECTIVES
from engines.distributed.shards import Collectives

OPS = ("all-reduce", "all-gather", "reduce-scatter", "broadcast", "ring all-reduce (by hand)",
       "ring reduce-scatter (by hand)")
ELEMENT_BYTES = 4  # float32
_BYTES_RECEIVED, _NOTSENT_BYTES, _BYTES_SENT, _BYTES_RETRANS = 128, 144, 200, 208  # offsets in struct tcp_info
# The kinds counted here: the DDP page's four, and what a DTensor's redistributions may issue.
KINDS = {**COLLECTIVES, "scatter": ("scatter",), "all-to-all": ("alltoall", "all_to_all")}


def socket_bytes() -> tuple[float, float] | None:
    """(sent, received) bytes over this process's TCP sockets so far; None where the kernel does not say.
    Sent counts what TCP transmitted, less retransmissions (a loaded machine sees a few even on
    loopback), plus what still waits in the send queue: a collective can end on this rank while
    its last bytes are queued behind a full receive window."""
    sent = received = 0
    try:
        descriptors = os.listdir("/proc/self/fd")
    except OSError:
        return None
    for fd in descriptors:
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            sock = socket.socket(fileno=int(fd))
        except (OSError, ValueError):
            continue
        try:
            if sock.type == socket.SOCK_STREAM and sock.family in (socket.AF_INET, socket.AF_INET6):
                info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
                if len(info) < _BYTES_RETRANS + 8:
                    return None
                sent += (struct.unpack_from("Q", info, _BYTES_SENT)[0] - struct.unpack_from("Q", info, _BYTES_RETRANS)[0]
                         + struct.unpack_from("I", info, _NOTSENT_BYTES)[0])
                received += struct.unpack_from("Q", info, _BYTES_RECEIVED)[0]
        except OSError:
            pass
        finally:
            sock.detach()  # the descriptor stays gloo's
    return float(sent), float(received)


def ring_bytes(op: str, size_bytes: float, world: int) -> float | None:
    """Bytes each rank sends (and receives) under the ring algorithm; None for a broadcast."""
    if "all-reduce" in op:
        return 2 * (world - 1) / world * size_bytes
    return None if op == "broadcast" else (world - 1) / world * size_bytes


def inputs(seed: int, size: int, world: int) -> list[torch.Tensor]:
    """Every rank's tensor of `size` floats, integer-valued in [−8, 8]: exact sums in any order."""
    return [torch.randint(-8, 9, (size,), generator=torch.Generator().manual_seed(seed * 1000 + r)).float()
            for r in range(world)]


def ring_reduce_scatter(chunks: list[torch.Tensor], rank: int, world: int) -> None:
    """In place: after N − 1 steps (send one chunk right, receive one from the left and add it),
    chunks[rank] holds the sum over every rank."""
    right, left, incoming = (rank + 1) % world, (rank - 1) % world, torch.empty_like(chunks[0])
    for step in range(world - 1):
        sending, receiving = (rank - step - 1) % world, (rank - step - 2) % world
        request = dist.isend(chunks[sending], right)
        dist.recv(incoming, left)
        request.wait()
        chunks[receiving] += incoming


def ring_all_gather(chunks: list[torch.Tensor], rank: int, world: int) -> None:
    """In place: each rank starts with chunks[rank] complete; N − 1 steps pass every chunk around."""
    right, left = (rank + 1) % world, (rank - 1) % world
    for step in range(world - 1):
        sending, receiving = (rank - step) % world, (rank - step - 1) % world
        request = dist.isend(chunks[sending], right)
        dist.recv(chunks[receiving], left)
        request.wait()


def run_op(op: str, mine: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """This rank's result of `op` on its tensor of S values (for an all-gather it contributes its
    shard of S/N: its 1/N of the tensor every rank ends up with)."""
    x, shard = mine.clone(), mine.numel() // world
    if op == "all-reduce":
        dist.all_reduce(x)
        return x
    if op == "all-gather":
        out = torch.empty(shard * world)
        dist.all_gather_into_tensor(out, x[rank * shard:(rank + 1) * shard].contiguous())
        return out
    if op == "reduce-scatter":
        out = torch.empty(shard)
        dist.reduce_scatter_tensor(out, x)
        return out
    if op == "broadcast":
        dist.broadcast(x, 0)
        return x
    chunks = list(x.chunk(world))
    ring_reduce_scatter(chunks, rank, world)
    if op == "ring reduce-scatter (by hand)":
        return chunks[rank]
    ring_all_gather(chunks, rank, world)  # "ring all-reduce (by hand)"
    return torch.cat(chunks)


def single_process(op: str, tensors: list[torch.Tensor], rank: int) -> torch.Tensor:
    """What `op` gives rank `rank`, computed from every rank's tensor in this one process."""
    world, total = len(tensors), torch.stack(tensors).sum(0)
    shard = total.numel() // world
    if op == "all-gather":
        return torch.cat([t[r * shard:(r + 1) * shard] for r, t in enumerate(tensors)])
    if op == "broadcast":
        return tensors[0]
    return total[rank * shard:(rank + 1) * shard] if "reduce-scatter" in op else total


def measured(call: Callable[[], torch.Tensor], expected: torch.Tensor, repeats: int) -> dict[str, float]:
    """One counted call (collectives, socket bytes, error against the single-process answer), then
    `repeats` timed ones."""
    dist.barrier()
    before = socket_bytes()
    with Collectives(KINDS) as counted:
        result = call()
    after = socket_bytes()
    out = {"max_abs_error": float((result - expected).abs().max()), **counted.metrics()}
    if before is not None and after is not None:
        out.update(sent_bytes=after[0] - before[0], received_bytes=after[1] - before[1])
    times = []
    for _ in range(repeats):
        dist.barrier()
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return {**out, "seconds": statistics.median(times)}


def reported(arm: str, step: int, rank: int, values: dict[str, float], shared: dict[str, float]) -> dict:
    """This rank's record: its `values` as `rank_R/<name>`; rank 0 adds what every rank shares."""
    metrics = {**(shared if rank == 0 else {}), **{f"rank_{rank}/{name}": v for name, v in values.items()}}
    return {"arm": arm, "rank": rank, "step": step, "metrics": metrics}


def sweep(job: dict, rank: int, world: int, emit: Callable[[dict], None]) -> None:
    """Every op at every size: one record per (op, size index) from each rank."""
    for index, size in enumerate(job["sizes"]):
        tensors = inputs(job["seed"] + index, size, world)
        size_bytes = float(size * ELEMENT_BYTES)
        for op in job["ops"]:
            ring = ring_bytes(op, size_bytes, world)
            shared = {"size_bytes": size_bytes, **({} if ring is None else {"ring_bytes": ring})}
            values = measured(lambda: run_op(op, tensors[rank], rank, world), single_process(op, tensors, rank),
                              job["repeats"])
            emit(reported(op, index, rank, values, shared))


def run_job(job: dict, rank: int, world: int, emit: Callable[[dict], None]) -> None:
    """The whole page's measurements on this rank: the sweep, the DTensor, the training steps."""
    from engines.distributed.collective_steps import dtensor_transitions, training_steps
    dist.all_reduce(torch.zeros(1))  # the first collective pays for lazy setup: keep it out of the timings
    sweep(job, rank, world, emit)
    dtensor_transitions(job, rank, world, emit)
    training_steps(job, rank, world, emit)
