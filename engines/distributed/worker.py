"""One rank of a distributed memory measurement: `python -m engines.distributed.worker`.

(A job with `"kind": "collectives"` runs the collectives page's measurements instead:
engines/distributed/collectives.py. Everything below describes the default kind, the memory measurement.)

Started once per rank by `engines.distributed.launch.launch` (gloo on CPU, NCCL on CUDA, a
fresh port per run), or by `torchrun` on a real multi-GPU / multi-node job:

    torchrun --nproc_per_node=8 -m engines.distributed.worker --job '{"layers": 12, ...}' --out results/

(`--out` is made if it does not exist. `"device": "cpu"` in the job runs on the CPU with gloo,
FSDP's mesh included, whether or not the machine has a GPU.)

For each strategy (DDP, FSDP2 with `reshard_after_forward` True ≈ ZeRO-3 or False ≈ ZeRO-2,
optionally FSDP2 with bf16 parameters in compute) it builds the same seeded Transformer,
trains a few steps on the same data, and measures this rank's memory by category at three
phases of one step and at its peak (engines.distributed.memory_tracking), the exact bytes of its local
parameter, gradient and optimizer-state tensors, its DTensor shards, the dtypes the step
used and the collectives it issued (engines.distributed.shards).

This worker keeps its own training loop, not `engines.loop.training.train`: a step here is a
process group's step, with trackers entered around one of them and a loss all-reduced
over the ranks. It ends an arm through the shared rule, `engines.loop.records.divergence`, on
that all-reduced loss, so every rank stops the arm at the same step (and the collectives
stay matched). Every record is one JSON line on stdout (or in `--out`/rank_XX.jsonl
under torchrun): `{"arm", "rank", "step", "metrics"}` or, for a diverged arm,
`{"arm", "rank", "step", "diverged": message}`, each with `world_size` and `device`. The
measured step's memory goes out right after that step's loss (the page draws it while the
arm trains on); the collectives counted in the extra step follow the arm's last loss, as a
second record of the measured step.
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

from engines.distributed.memory_tracking import Phases, Timeline
from engines.distributed.shards import Collectives, local_bytes, optimizer_tensors, precision, shard_layout
from engines.loop.records import divergence
from engines.loop.runtime import configure

SHAPE_KEYS = ("layers", "hidden", "heads", "seq_len", "batch", "vocab")


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


def choose_device(job: dict, local_rank: int) -> torch.device:
    """The job's device: "cpu" means the CPU whatever this machine has; "cuda" and "auto" take
    GPU `local_rank` (modulo the count) where CUDA is available, else the CPU."""
    if job.get("device", "auto") != "cpu" and torch.cuda.is_available():
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def wrap(model: nn.Module, strategy: str, device: torch.device) -> nn.Module:
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    # The mesh on the job's device: fully_shard's default mesh is the machine's accelerator, which
    # on a GPU machine would put a CPU (gloo) job's shards on CUDA.
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    reshard = strategy in ("fsdp-zero3", "fsdp-zero3-bf16")
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if strategy.endswith("bf16") else MixedPrecisionPolicy()
    for block in model.blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    return model


def sizes_of(model: TinyTransformer) -> dict[str, float]:
    """Before wrapping: parameters, the largest block's bytes and the root's (embedding + head)."""
    block_bytes = (sum(p.numel() * p.element_size() for p in b.parameters()) for b in model.blocks)
    root = (p for m in (model.embed, model.head) for p in m.parameters())
    return {"n_params": float(sum(p.numel() for p in model.parameters())), "unit_param_bytes": float(max(block_bytes)),
            "root_param_bytes": float(sum(p.numel() * p.element_size() for p in root))}


def step_loss(model: nn.Module, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits, loss) of learning to copy the tokens; the loss in fp32 whatever the compute dtype."""
    logits = model(tokens)  # (batch, seq, vocab)
    return logits, nn.functional.cross_entropy(logits.flatten(0, 1).float(), tokens.flatten())


def measured_step(model: nn.Module, optimizer, tokens: torch.Tensor, strategy: str, device: torch.device,
                  timeline: bool) -> tuple[torch.Tensor, dict[str, float], Timeline | None]:
    """One step inside the trackers: its loss, and what it measured (memory by phase and at the
    peak, exact local bytes, DTensor shards, dtypes; rank 0's timeline)."""
    marks = None
    with contextlib.ExitStack() as measuring:
        phases = measuring.enter_context(Phases(model, optimizer, strategy, device))
        if timeline:
            marks = measuring.enter_context(Timeline(phases))
            marks.mark("step start")
        logits, loss = step_loss(model, tokens)
        phases.take("after forward")
        loss.backward()
        phases.take("after backward")
        if marks is not None:
            marks.mark("after backward")
        optimizer.step()
        phases.take("after optimizer step")
        phases.take("peak", "peak")
        metrics = {f"{phase}/{category}": value for phase, cats in phases.snapshots.items()
                   for category, value in cats.items()}
        metrics.update({"exact/parameters": local_bytes(model.parameters()),
                        "exact/gradients": local_bytes(p.grad for p in model.parameters()),
                        "exact/optimizer state": local_bytes(optimizer_tensors(optimizer))})
        metrics.update({**shard_layout(model), **precision(logits, optimizer)})
        if marks is not None:
            marks.mark("after optimizer step")
    return loss, metrics, marks


def counted_step(model: nn.Module, optimizer, tokens: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
    """One more step, after the arm's last, with its collectives counted by kind. Apart from the
    measured step (the counting mode changes what the memory tracker files under activations)
    and after the reported ones (under the mode the gloo steps round differently, by ~1e-7)."""
    with Collectives() as collectives:
        loss = step_loss(model, tokens)[1]
        loss.backward()
        optimizer.step()
    return loss, collectives.metrics()


def measurement(measured: dict[str, float], sizes: dict[str, float], timeline: Timeline | None, job: dict,
                strategy: str, rank: int, device: torch.device, snapshot_dir: str | None) -> dict[str, float]:
    """The measured step's record: its memory and tensors, the model's sizes and shape, rank 0's timeline
    (and, under torchrun --out on CUDA, the allocator snapshot written beside the rank files)."""
    metrics = {**measured, **sizes, "on_cuda": float(device.type == "cuda"),
               **{f"shape/{k}": float(job[k]) for k in SHAPE_KEYS}}
    if timeline is not None:
        metrics.update(timeline.metrics(job["layers"]))
        if timeline.snapshot is not None and snapshot_dir:  # for https://pytorch.org/memory_viz
            with open(os.path.join(snapshot_dir, f"rank_{rank:02d}_{strategy}_memory_snapshot.pickle"), "wb") as f:
                pickle.dump(timeline.snapshot, f)
    return metrics


def run_strategy(job: dict, strategy: str, rank: int, world: int, device: torch.device, emit,
                 snapshot_dir: str | None = None) -> None:
    """One arm: the same seeded model and data under `strategy`, step 1 measured (step 0 creates
    Adam's state lazily, and DDP's buckets are rebuilt just before it: a steady step is
    measured), until the steps end or the all-reduced loss is not finite; then one step more
    whose collectives are counted."""
    torch.manual_seed(job["seed"])  # the same initial weights on every rank and every strategy
    model = TinyTransformer(job["vocab"], job["hidden"], job["layers"], job["heads"]).to(device)
    sizes = sizes_of(model)
    model = wrap(model, strategy, device)
    opt_class = torch.optim.AdamW if job["optimizer"] == "adamw" else torch.optim.Adam
    optimizer = opt_class(model.parameters(), lr=job["lr"])
    data = torch.Generator().manual_seed(job["seed"] * 1000 + rank)  # each rank its own shard, the same for every strategy
    measure_step = min(1, job["steps"] - 1)
    measured, timeline, diverged = None, None, None
    for step in range(job["steps"]):
        tokens = torch.randint(job["vocab"], (job["batch"], job["seq_len"]), generator=data).to(device)
        if step == measure_step:
            if strategy == "ddp" and step > 0:
                # DDP rebuilds its gradient buckets in the second forward, in the order the first
                # backward's gradients arrived, and broadcasts the new layout. Done here, before the
                # trackers, so the measured step is a steady one: the trackers would file the new
                # buckets under activations, and the broadcast's index tensors too while gloo's
                # thread still held them (a race: now and then 4 bytes more after forward).
                model.reducer._rebuild_buckets()
            loss, measured, timeline = measured_step(model, optimizer, tokens, strategy, device,
                                                     bool(job.get("timeline")) and rank == 0)
        else:
            loss = step_loss(model, tokens)[1]
            loss.backward()
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        loss_value = float(mean_loss) / world
        diverged = divergence(step, {"loss": loss_value})  # the same value on every rank
        if diverged is not None:
            emit({"arm": strategy, "rank": rank, "step": step, "diverged": diverged.message})
        else:
            emit({"arm": strategy, "rank": rank, "step": step, "metrics": {"loss": loss_value}})
        if step == measure_step:  # sent now, not after the arm's last step: the page draws memory sooner
            emit({"arm": strategy, "rank": rank, "step": step,
                  "metrics": measurement(measured, sizes, timeline, job, strategy, rank, device, snapshot_dir)})
        if diverged is not None:
            break
    if measured is not None and diverged is None:
        tokens = torch.randint(job["vocab"], (job["batch"], job["seq_len"]), generator=data).to(device)
        emit({"arm": strategy, "rank": rank, "step": measure_step, "metrics": counted_step(model, optimizer, tokens)[1]})
        optimizer.zero_grad(set_to_none=True)
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
    configure(1)  # one intra-op thread per rank: the ranks share the cores
    warnings.filterwarnings("ignore")  # trackers and FSDP warn about internals; stderr is for errors
    timeout = datetime.timedelta(seconds=args.timeout_s)
    local_rank = int(os.environ.get("LOCAL_RANK", args.rank if args.rank is not None else 0))
    device = choose_device(job, local_rank)
    cuda = device.type == "cuda"
    backend = "nccl" if cuda else "gloo"
    if cuda:  # one GPU per process, chosen before the process group binds to it
        torch.cuda.set_device(device)
    bind = {"device_id": device} if cuda else {}
    if args.rank is None:  # torchrun sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
        dist.init_process_group(backend, timeout=timeout, **bind)
    else:
        host = os.environ.get("EXPLORER_MASTER_ADDR", "127.0.0.1")  # rank 0's node, when Ray placed the ranks
        dist.init_process_group(backend, init_method=f"tcp://{host}:{args.port}", rank=args.rank,
                                world_size=args.world_size, timeout=timeout, **bind)
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.out:  # torchrun's --out: a folder that need not exist yet (every rank may make it)
        os.makedirs(args.out, exist_ok=True)
    sink = open(os.path.join(args.out, f"rank_{rank:02d}.jsonl"), "w") if args.out else sys.stdout

    def emit(record: dict) -> None:
        sink.write(json.dumps({**record, "world_size": world, "device": device.type}) + "\n")
        sink.flush()

    try:
        if job.get("fail_rank") == rank:  # for tests: a rank that raises mid-run
            raise RuntimeError(f"injected failure on rank {rank}")
        if job.get("kind") == "collectives":  # the collectives page's job: engines/distributed/collectives.py
            from engines.distributed.collectives import run_job
            run_job(job, rank, world, emit)
        elif job.get("kind") == "fit":  # the fit tests' real ranks: engines/distributed/fit_report.py
            from engines.distributed.fit_report import run_job
            run_job(job, rank, world, emit)
        else:
            for strategy in job["strategies"]:
                run_strategy(job, strategy, rank, world, device, emit, args.out)
        # Every rank is done before any tears the group down: gloo aborted a rank whose peer had
        # left ("terminate called without an active exception"). A rank that raised skips it.
        dist.barrier()
    finally:
        dist.destroy_process_group()
        if sink is not sys.stdout:
            sink.close()
    return 0


if __name__ == "__main__":
    from engines.distributed.rank_process import run_as_process
    run_as_process(main)
