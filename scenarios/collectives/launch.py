"""Collectives, run: what a config asks of the machine, and the ranks' records as arm items.

Torch-free at import. The rank processes are the DDP page's (`engines.distributed.launch.launch`
starting `engines.distributed.worker`) with a job of kind "collectives" (engines/distributed/collectives.py);
every rank reports its own numbers (`rank_R/...`; rank 0 adds the shared ones) per (op,
size), per DTensor transition and per training step. Starting a rank — importing torch, its distributed package, DTensor and FSDP —
costs about 4 s of CPU here, far more than the measurements themselves.
"""
import os
from collections.abc import Callable, Iterator

from engines.distributed.launch import launched as launch_items, timeout_for
from engines.loop.records import Diverged, StepRecord
from scenarios.base import Estimate, Machine, host_memory
from scenarios.words import UNITS, byte_size

OPS = ("all-reduce", "all-gather", "reduce-scatter", "broadcast", "ring all-reduce (by hand)",
       "ring reduce-scatter (by hand)")  # engines.distributed.collectives.OPS, named here without importing torch
TRANSITIONS = ("distribute_tensor → Shard(0)", "Shard(0) → Replicate()", "Replicate() → Shard(0)",
               "Shard(0) → Shard(1)")  # engines.distributed.collective_steps.TRANSITIONS
STRATEGIES = ("DDP", "FSDP")
UNIVERSE = [*OPS, "DTensor", *STRATEGIES]  # every arm a run reports, most common first
TRAIN_STEPS = 3       # step 1 is DDP's bucket rebuild; step 2 is a steady one
DTENSOR_SHAPE = (10, 6)
HIDDEN = 32
SIZE_STEP = 4         # the sweep's sizes are ×4 apart
CPU_WORLD_MIN = 4     # rank processes allowed on any machine; more need as many cores
HOST_FILL = 0.5       # of the host's memory (Machine.memory_limit_bytes) a run may plan to use
# Calibrated on this project's 2-core machine (torch 2.13, gloo), see `estimate`:
PROCESS_BYTES = 360e6  # peak RSS of a rank: Python, torch, gloo, DTensor and FSDP imported
START_S = 4.0          # CPU seconds to start a rank
FIXED_S = 1.0          # CPU seconds per rank for the DTensor transitions and the training steps
CALL_S = 1.5e-3        # seconds per collective call (a barrier before it)
BYTE_S = 2.0e-9        # seconds per byte of S per call, summed over the ops, per rank beyond one core
CORES = 2


def sizes_of(config) -> list[int]:
    """Element counts of the sweep: `sizes` sizes ×4 apart ending at `largest_kib`, each a multiple of
    the world size (every rank gets an equal shard), at least 1 KiB."""
    world, largest = config.world_size, config.largest_kib * 1024 // 4
    counts = [max(256 // world * world, round(largest / SIZE_STEP ** k / world) * world) for k in range(config.sizes)]
    return sorted(set(counts))


def sweep_words(config) -> str:
    """'64 KiB to 4 MiB': the smallest and the largest S the sweep measures (float32), as a preset names them."""
    def size(count: int) -> str:
        exact = [(name, scale) for name, scale in UNITS if 4 * count % scale == 0 and 4 * count >= scale]
        return f"{4 * count // exact[-1][1]:,} {exact[-1][0]}" if exact[-1][1] > 1 else byte_size(4 * count)
    sizes = sizes_of(config)
    return size(sizes[-1]) if len(sizes) == 1 else f"{size(sizes[0])} to {size(sizes[-1])}"


def job_of(config) -> dict:
    return {"kind": "collectives", "seed": config.seed, "sizes": sizes_of(config), "ops": list(OPS),
            "repeats": config.repeats, "dtensor_shape": list(DTENSOR_SHAPE), "layers": config.layers,
            "hidden": HIDDEN, "train_steps": TRAIN_STEPS, "device": "cpu"}


def records_expected(config) -> int:
    """Every rank reports each (op, size), each DTensor transition and each training step."""
    return config.world_size * (len(sizes_of(config)) * len(OPS) + len(TRANSITIONS) + len(STRATEGIES) * TRAIN_STEPS)


def process_bytes(config) -> float:
    """One rank's peak: the process, every rank's input (each rank builds them all) and a few results."""
    return PROCESS_BYTES + (config.world_size + 6) * 4.0 * max(sizes_of(config))


def allowed_ranks(machine: Machine) -> int:
    return max(CPU_WORLD_MIN, machine.cpus)


def refusal(config, machine: Machine) -> str | None:
    world = config.world_size
    if world > allowed_ranks(machine):
        return (f"world_size={world}: at most {allowed_ranks(machine)} rank processes here (one per core, at least "
                f"{CPU_WORLD_MIN}; this machine has {machine.cpus} cores); lower the world size")
    need, limit = process_bytes(config) * world, HOST_FILL * machine.memory_limit_bytes
    if limit and need > limit:
        return (f"world_size={world} with tensors up to {config.largest_kib:,} KiB needs about {need / 1e9:.2f} GB "
                f"({world} rank processes of {process_bytes(config) / 1e9:.2f} GB), more than "
                f"{machine.memory_basis(HOST_FILL)}; lower the largest size or the world size")
    return None


def machine_here() -> Machine:
    """This process's machine (the CPU facts the refusal needs; `EXPLORER_MEMORY_LIMIT_BYTES` stands in
    for its memory)."""
    return Machine(cpus=os.cpu_count() or 1, **host_memory())


def estimate(config) -> Estimate:
    """Wall seconds and host bytes on a quiet 2-core machine: each rank's start and fixed work share
    the cores; the sweep's calls run in step on every rank,
    (repeats + 1) · Σ_sizes Σ_ops (CALL_S + BYTE_S · S · max(1, N / CORES))."""
    world = config.world_size
    share = world / min(world, CORES)
    calls = (config.repeats + 1) * sum(len(OPS) * (CALL_S + BYTE_S * 4 * n * share) for n in sizes_of(config))
    return Estimate(0.5 + (START_S + FIXED_S) * share + calls, process_bytes(config) * world)


SENT_OVER_RING = "bytes_sent_over_ring"  # first in a sorted list of the metrics: the page's default to compare


def items_of(world: int) -> Callable[[dict], tuple | None]:
    """Each rank's record as a driver item: `(arm, StepRecord)`, or `(arm, Diverged)` from rank 0 (every
    rank ends a diverged arm at the same step; the others' word is skipped). The record that completes an
    (op, size) also carries `SENT_OVER_RING`: the bytes sent per rank (mean over the ranks) ÷ the ring
    formula's (`ring_bytes`; broadcast has none), the number the page's first sentence states."""
    sent: dict[tuple[str, int], dict[int, float]] = {}
    rings: dict[tuple[str, int], float] = {}

    def item_of(record: dict) -> tuple | None:
        arm, step, rank = record["arm"], record["step"], record["rank"]
        if "diverged" in record:
            return (arm, Diverged(step, record["diverged"])) if rank == 0 else None
        metrics = {k: float(v) for k, v in record["metrics"].items()}
        key = (arm, step)
        if arm in OPS and f"rank_{rank}/sent_bytes" in metrics:  # the DTensor's and the steps' bytes have no formula
            sent.setdefault(key, {})[rank] = metrics[f"rank_{rank}/sent_bytes"]
        if "ring_bytes" in metrics:
            rings[key] = metrics["ring_bytes"]
        if len(sent.get(key, ())) == world and rings.get(key):
            metrics[SENT_OVER_RING] = sum(sent.pop(key).values()) / world / rings.pop(key)
        return arm, StepRecord(step, metrics)
    return item_of


def launched(config) -> Iterator:
    """The ranks' records as items, with notes while they start and between records; the launch's limit
    follows the estimate (`timeout_for`)."""
    world = config.world_size
    return launch_items(job_of(config), world, items_of(world), timeout_s=timeout_for(estimate(config).seconds),
                        starting=f"starting {world} rank processes",
                        still_starting=f"starting {world} rank processes: about 4 s of CPU each (importing torch, "
                                       "gloo, DTensor and FSDP), longer than every measurement after it",
                        running=f"{world} rank processes measuring")
