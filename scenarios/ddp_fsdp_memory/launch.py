"""DDP vs FSDP memory, run: what a config asks of the machine, and the ranks' records as arm items.

Torch-free at import. `refusal` decides from a config and the machine's facts alone (the
page asks before Run, with facts a worker reports); `machine_here` gathers those facts in
the process about to launch (it imports torch to count the GPUs). `launched` starts the
rank processes (`engines.distributed.launch.launch`) and turns their JSON records into the
driver's items: one per record, the loss under rank 0's name only (every rank reports the
same all-reduced loss), a `Note` while the processes start or between records, so the
driver hears Stop at least every 0.1 s and closing the stream reaps every rank.
"""
import os
from collections.abc import Iterator

from engines.distributed.launch import launched as launch_items, timeout_for
from engines.distributed.memory_model import GB, PRECISIONS, encoder_activation_bytes, transformer_activation_bytes
from engines.loop.records import Diverged, StepRecord, divergence
from scenarios.base import Estimate, Machine, host_memory

VOCAB = 64
CPU_WORLD_MAX = 4        # rank processes of one world on a CPU machine
GPU_FILL = 0.9           # of a GPU's memory a run may plan to use
HOST_FILL = 0.5          # of the host's memory (Machine.memory_limit_bytes) a run may plan to use
# Calibrated on this project's 2-core CPU machine (torch 2.13, gloo), see `estimate`:
PROCESS_BYTES = 340e6    # peak RSS of a rank process of the tiny model: Python, torch, gloo, the trackers
TENSOR_FACTOR = 3.0      # peak RSS beyond that, over (fp32 Adam model state + this layer's activations)
START_S = 4.2            # CPU seconds to start a rank: import torch, FSDP and the trackers, a process group
ARM_S = 0.4              # CPU seconds per strategy: build, wrap, the tracked step's fixed cost, the timeline
WORK_S = 1.3e-9          # CPU seconds per unit of `work` per step (the tracked step counts as three)
PARENT_S = 0.5           # the launching process: spawning, reading the records
CORES = 2


def heads_for(hidden: int) -> int:
    return next(h for h in (4, 2, 1) if hidden % h == 0)


def n_params_of(config) -> int:
    """Parameters of engines.distributed.worker.TinyTransformer (embedding, blocks, head), from the config
    alone: the page says it before any rank starts, and holds no torch. A test builds the real model on the
    meta device at every slider setting and finds this count."""
    h = config.hidden
    block = 4 * h * h + 4 * h + 2 * (4 * h * h) + 4 * h + h + 4 * h  # attention in/out, FFN, 2 LayerNorms
    return VOCAB * h + config.layers * block + h * VOCAB + VOCAB


def worlds_of(config) -> list[int]:
    """The process groups one run starts side by side: every size from 1 up, or just the one."""
    return list(range(1, config.world_size + 1)) if config.sweep_world_size else [config.world_size]


def rank_bytes(config) -> float:
    """One rank's tensors by the DDP estimate (the largest): fp32 Adam model state + activations."""
    return PRECISIONS["fp32 Adam"].total * n_params_of(config) + transformer_activation_bytes(
        config.seq_len, config.batch, config.hidden, heads_for(config.hidden), config.layers, 4.0)


def device_of(config, machine: Machine) -> str:
    """cuda when asked, or (auto) when there is a GPU for every rank; else cpu."""
    if config.device == "auto":
        return "cuda" if machine.gpus >= config.world_size else "cpu"
    return config.device


def refusal(config, machine: Machine) -> str | None:
    """Why this machine cannot run `config`, as a sentence; None when it can (or reads a result_dir)."""
    if config.result_dir:
        return None
    world, worlds = config.world_size, worlds_of(config)
    if config.device == "cuda" and world > machine.gpus:
        return (f"device=cuda with world_size={world}: NCCL needs one GPU per rank and this machine has "
                f"{machine.gpus}; lower the world size or choose device=cpu")
    where = f"world_size={world} with {n_params_of(config):,} parameters"
    per_rank = rank_bytes(config)
    if device_of(config, machine) == "cuda":
        need = per_rank * len(worlds)  # every world side by side puts one rank on GPU 0
        if machine.gpu_memory_bytes and need > GPU_FILL * machine.gpu_memory_bytes:
            return (f"{where} needs about {need / GB:.2f} GB on GPU 0 ({len(worlds)} rank(s) of {per_rank / GB:.2f} GB, "
                    f"DDP estimate of state and activations), more than the {machine.gpu_memory_bytes / GB:.2f} GB "
                    "a GPU has here; shrink the model or turn off the sweep")
        return None
    if world > CPU_WORLD_MAX:
        return (f"world_size={world} on the CPU: at most {CPU_WORLD_MAX} rank processes (this machine has "
                f"{machine.cpus} cores and {machine.gpus} GPUs); larger worlds need a GPU per rank")
    processes = sum(worlds)
    need, limit = process_bytes(config) * processes, HOST_FILL * machine.memory_limit_bytes
    if limit and need > limit:
        return (f"{where} needs about {need / GB:.2f} GB ({processes} rank processes of about "
                f"{process_bytes(config) / GB:.2f} GB each: Python, torch and the trackers, plus {TENSOR_FACTOR:g}× the "
                f"model state and activations, as measured here), more than {machine.memory_basis(HOST_FILL)}; "
                "shrink the model, the world or turn off the sweep")
    return None


def machine_here(gpu_memory: bool = True) -> Machine:
    """This process's machine. `EXPLORER_MEMORY_LIMIT_BYTES` stands in for its host memory
    and its GPUs' size (tests; a shared server that wants runs smaller). The GPUs' size, not
    their free memory (asking for that would open a CUDA context here), and only when asked
    for (reading it initializes CUDA in this process)."""
    import torch  # only to ask which devices exist
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    limit = float(os.environ.get("EXPLORER_MEMORY_LIMIT_BYTES", 0))
    gpu_bytes = min((torch.cuda.get_device_properties(i).total_memory for i in range(gpus)), default=0) \
        if gpu_memory else 0
    return Machine(cpus=os.cpu_count() or 1, gpus=gpus, gpu_memory_bytes=int(limit or gpu_bytes), **host_memory())


def process_bytes(config) -> float:
    """Peak resident bytes of one rank process (CPU), by the calibration in `estimate`."""
    state = PRECISIONS["fp32 Adam"].total * n_params_of(config)
    activations = encoder_activation_bytes(config.seq_len, config.batch, config.hidden, heads_for(config.hidden),
                                           config.layers, VOCAB)
    return PROCESS_BYTES + TENSOR_FACTOR * (state + activations)


def estimate(config) -> Estimate:
    """Wall seconds and host bytes of a launch on a quiet 2-core CPU machine.

    CPU seconds per rank process = START_S + strategies · (ARM_S + (steps + 2) · WORK_S · work),
    work = layers · batch · seq_len · hidden · (hidden + seq_len / 6) (∝ a step's matmul FLOPs);
    the processes share CORES; PARENT_S is the launcher's. Bytes = processes · process_bytes.
    Fitted to six runs (the ranks' CPU seconds from getrusage, their peak RSS), measured / model:

        ranks arms  model            CPU s        peak RSS per rank
          1    2    1×16, b2 s8      4.7 / 5.0    330 / 340 MB
          3    3    default          18.7 / 16.3  343 / 350 MB
          2    3    8×256, b8 s128   33.2 / 33.5  934 / 952 MB
          1    3    4×128, b16 s256  12.6 / 12.4  692 / 692 MB
         10    2    default, N≤4     51.7 / 50.3  340 / 350 MB
          1    3    default, 20 steps 5.6 / 5.6   343 / 350 MB

    (Wall time on the shared machine, load 4–6, ran up to 1.9× the estimate for several ranks.)"""
    processes = sum(worlds_of(config))
    strategies = len(config.strategies.split(","))
    work = config.layers * config.batch * config.seq_len * config.hidden * (config.hidden + config.seq_len / 6)
    per_process = START_S + strategies * (ARM_S + (config.steps + 2) * WORK_S * work)
    seconds = PARENT_S + per_process * processes / min(processes, CORES)
    return Estimate(seconds, process_bytes(config) * processes)


def job_of(config, device: str, fail_rank: str | None = None) -> dict:
    """What every rank process is told to do (the worker's `--job`)."""
    job = {"strategies": config.strategies.split(","), "seed": config.seed, "vocab": VOCAB, "hidden": config.hidden,
           "layers": config.layers, "heads": heads_for(config.hidden), "batch": config.batch,
           "seq_len": config.seq_len, "steps": config.steps, "lr": 1e-3, "optimizer": config.optimizer,
           "timeline": config.timeline, "device": device}
    if fail_rank:  # for tests: this rank raises mid-run
        job["fail_rank"] = int(fail_rank)
    return job


def records_expected(config) -> int:
    """Records a launch streams: per rank and strategy one loss per step, the measured step's memory and
    its collectives (counted in one step more)."""
    return len(config.strategies.split(",")) * (config.steps + 2) * sum(worlds_of(config))


def item_of(record: dict):
    """One rank's record as a driver item: `(arm, StepRecord | Diverged)`, or None (a step of
    another rank that rank 0 already reports)."""
    arm, rank, step = f"{record['arm']} · N={record['world_size']}", record["rank"], record["step"]
    metrics = record.get("metrics")
    if metrics is None or "loss" in metrics:
        diverged = Diverged(step, record["diverged"]) if metrics is None else divergence(step, metrics)
        if rank != 0:
            return None
        return (arm, diverged) if diverged is not None else (arm, StepRecord(step, dict(metrics)))
    metrics = {**metrics, "world_size": record["world_size"]}  # the rank's own word, not the arm's label
    return arm, StepRecord(step, {f"rank_{rank}/{key}": float(value) for key, value in metrics.items()})


def launched(job: dict, config) -> Iterator:
    """The ranks' records as items, with notes while they start and between records; the launch's limit
    follows the estimate (`timeout_for`), so an accepted run is never cut short for being slow."""
    worlds = worlds_of(config)
    starting = f"starting {sum(worlds)} rank processes"
    return launch_items(job, worlds, item_of, starting=starting, still_starting=starting,
                        running=f"{sum(worlds)} rank processes running", timeout_s=timeout_for(estimate(config).seconds))
