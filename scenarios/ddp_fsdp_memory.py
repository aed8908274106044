"""DDP vs FSDP memory: how much memory does each rank need, and what does sharding buy?

DDP keeps a full copy of the parameters, gradients and optimizer state on every rank;
FSDP shards all three, so per-rank model state falls as 1/N. Here the memory is
*measured*: real `torch.distributed` process groups (gloo and one process per rank on
CPU, NCCL on GPUs) train the same seeded Transformer under each strategy, and PyTorch's
own memory trackers split each rank's bytes by category at every phase of a step. The
ZeRO paper's analytic model stands beside every measurement, and once it matches the
small runs it answers for sizes nobody here can run (the what-if panel).

Look at the stacked bars (measured next to estimated), the per-rank model state against
world size (DDP flat, FSDP ~1/N), the timeline through one step (FSDP with
reshard_after_forward=False keeps every block gathered until its backward; True frees
each after its forward), and the loss curves: identical across strategies — memory
differs, the math does not.
"""
import json
import os
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from pydantic import Field

from engines.distributed import launch
from engines.memory_model import GB, transformer_activation_bytes
from scenarios._ddp_fsdp_figures import (bars_figure, loss_figure, memory_timeline_figure, phases_figure,
                                         values_of, vs_world_figure, what_if_figure)
from scenarios._memory_summary import FP32_ADAM, activation_lines, arm_summary, gathered_line, state_line
from scenarios._memory_timeline import trace_figure, trace_of
from scenarios.base import ConfigError, Run, Scenario, ScenarioConfig
from scenarios.plotting import arms_in_order, metric_series

VOCAB = 64
CPU_WORLD_MAX = 4  # rank processes on a CPU machine


class Config(ScenarioConfig):
    strategies: Literal["ddp,fsdp-zero3,fsdp-zero2", "ddp,fsdp-zero3", "ddp,fsdp-zero3,fsdp-zero2,fsdp-zero3-bf16"] = Field(
        "ddp,fsdp-zero3,fsdp-zero2", description="Arms. fsdp-zero3: reshard_after_forward=True; fsdp-zero2: False; "
        "-bf16: MixedPrecisionPolicy with bf16 parameters in compute.")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="cuda: NCCL, one process per GPU; cpu: gloo processes on the CPU; auto: cuda where this "
        "machine has a GPU for every rank, else cpu.")
    world_size: int = Field(2, ge=1, le=8, description="Ranks: processes on CPU (1–4), one per GPU on CUDA (up to "
                            "the GPU count).")
    sweep_world_size: bool = Field(True, description="Also measure every world size from 1 up, for the memory-vs-N plot.")
    layers: int = Field(2, ge=1, le=8, description="Transformer blocks (each one FSDP unit).")
    hidden: int = Field(64, ge=16, le=256, description="Hidden width; parameters grow as 12·layers·hidden².")
    batch: int = Field(8, ge=1, le=32, description="Sequences per rank per step (activations grow with it).")
    seq_len: int = Field(32, ge=8, le=256, description="Tokens per sequence (activations grow with it).")
    steps: int = Field(3, ge=2, le=20, description="Training steps per arm; memory is measured at step 1.")
    optimizer: Literal["adam", "adamw"] = Field("adam", description="Two fp32 moments per parameter either way.")
    whatif_params_billion: float = Field(70.0, ge=0.1, le=1000.0, description="What-if: parameters, in billions.",
                                         json_schema_extra={"scale": "log"})
    whatif_devices: int = Field(512, ge=1, le=1024, description="What-if: devices.")
    whatif_precision: Literal["mixed (bf16 + fp32 Adam)", "fp32 Adam"] = Field(
        "mixed (bf16 + fp32 Adam)", description="What-if: bytes per parameter (2+2+12 or 4+4+8).")
    timeline: bool = Field(True, description="Record rank 0's memory at every block boundary of the measured step "
                           "(on CUDA also the allocator's event history; under torchrun --out, a snapshot file "
                           "for pytorch.org/memory_viz).")
    result_dir: str = Field("", max_length=500, description="A folder of rank_XX.jsonl written by a torchrun job "
                            "(see README). When set, its measurements are drawn instead of launching ranks here.")


def read_result_dir(folder: str) -> list[dict]:
    """Records from `torchrun ... -m engines.dist_worker --out FOLDER` (JSON lines only; nothing is executed)."""
    path = Path(folder).expanduser()
    files = sorted(path.glob("rank_*.jsonl")) if path.is_dir() else []
    if not files:
        raise ConfigError(f"result_dir={folder} is not a folder with rank_XX.jsonl files from engines.dist_worker")
    return [json.loads(line) for file in files for line in file.read_text().splitlines() if line.strip()]


def heads_for(hidden: int) -> int:
    return next(h for h in (4, 2, 1) if hidden % h == 0)


def n_params_of(config: Config) -> int:
    """Parameters of engines.dist_worker.TinyTransformer (embedding, blocks, head)."""
    h = config.hidden
    block = 4 * h * h + 4 * h + 2 * (4 * h * h) + 4 * h + h + 4 * h  # attention in/out, FFN, 2 LayerNorms
    return VOCAB * h + config.layers * block + h * VOCAB + VOCAB


def device_for(config: Config) -> str:
    """Where the ranks run: "cuda" (one GPU per rank) or "cpu"; an impossible choice is refused."""
    import torch  # only to ask which devices exist
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if config.device == "cuda" and config.world_size > gpus:
        raise ConfigError(f"device=cuda with world_size={config.world_size}: NCCL needs one GPU per rank and this "
                          f"machine has {gpus}; lower the world size or choose device=cpu")
    device = ("cuda" if gpus >= config.world_size else "cpu") if config.device == "auto" else config.device
    if device == "cpu" and config.world_size > CPU_WORLD_MAX:
        raise ConfigError(f"world_size={config.world_size} on the CPU: at most {CPU_WORLD_MAX} rank processes "
                          f"(this machine has {os.cpu_count()} cores and {gpus} GPUs); larger worlds need a GPU "
                          "per rank")
    return device


def worlds_of(config: Config) -> list[int]:
    """The process groups one run starts side by side: every size from 1 up, or just the one."""
    return list(range(1, config.world_size + 1)) if config.sweep_world_size else [config.world_size]


def refuse_if_too_big(config: Config, device: str) -> None:
    """Estimate before launching: every rank's model state and activations against memory — host
    memory for all the processes together on CPU; on CUDA the first GPU, which every world
    side by side puts one rank on."""
    per_rank = FP32_ADAM.total * n_params_of(config) + transformer_activation_bytes(
        config.seq_len, config.batch, config.hidden, heads_for(config.hidden), config.layers, 4.0)
    worlds = worlds_of(config)
    where = f"world_size={config.world_size} with {n_params_of(config):,} parameters"
    if device == "cuda":
        import torch
        # The GPUs' size, not their free memory: asking for that would open a CUDA context in this process.
        size = float(os.environ.get("EXPLORER_MEMORY_LIMIT_BYTES", 0)) or \
            min(torch.cuda.get_device_properties(i).total_memory for i in range(config.world_size))
        if per_rank * len(worlds) > 0.9 * size:
            raise ConfigError(f"{where} needs about {per_rank * len(worlds) / GB:.2f} GB on GPU 0 ({len(worlds)} "
                              f"rank(s) of {per_rank / GB:.2f} GB, DDP estimate of state and activations), more than "
                              f"the {size / GB:.2f} GB a GPU has here; shrink the model or turn off the sweep")
        return
    limit = float(os.environ.get("EXPLORER_MEMORY_LIMIT_BYTES", 0)) or \
        0.5 * os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    processes = sum(worlds)
    need = (per_rank + 400e6) * processes  # + ~400 MB of Python and torch per process
    if need > limit:
        raise ConfigError(f"{where} needs about {need / GB:.2f} GB ({processes} rank processes, each {per_rank / 1e6:.0f} "
                          f"MB of state and activations by the DDP estimate + ~0.4 GB of Python and torch), more than "
                          f"the {limit / GB:.2f} GB allowed here; shrink the model, the world or turn off the sweep")


class DdpFsdpMemory(Scenario):
    id = "ddp-fsdp-memory"
    title = "DDP vs FSDP memory"
    question = "How much memory does each rank need, and what does sharding buy?"
    terms = ("DDP", "FSDP", "DTensor", "All-reduce", "All-gather", "Mixed precision", "Master weights")
    formula = (r"\begin{aligned}\text{DDP: }&(2+2+K)\,\Psi \qquad \text{ZeRO-1: }2\Psi+2\Psi+\tfrac{K\Psi}{N}\\"
               r"\text{ZeRO-2: }&2\Psi+\tfrac{(2+K)\Psi}{N} \qquad \text{ZeRO-3 / FSDP: }\tfrac{(2+2+K)\Psi}{N}"
               r"\quad (K=12;\ \text{fp32 Adam: }4+4+8)\end{aligned}")
    Config = Config
    order = 80
    tiny = {"device": "cpu", "world_size": 2, "sweep_world_size": False, "layers": 1, "hidden": 16, "batch": 2, "seq_len": 8,
            "steps": 2, "strategies": "ddp,fsdp-zero3"}
    presets = {
        "two ranks, three strategies": {},
        "memory vs world size 1-4": {"world_size": 4, "strategies": "ddp,fsdp-zero3"},
        "ZeRO paper's example (what-if)": {"whatif_params_billion": 7.5, "whatif_devices": 64,
                                           "whatif_precision": "mixed (bf16 + fp32 Adam)"},
    }

    def execute(self, config: Config, run: Run) -> None:
        if config.result_dir:
            for record in read_result_dir(config.result_dir):
                self._ingest(run, record, record["world_size"])
            return
        device = device_for(config)
        refuse_if_too_big(config, device)
        job = {"strategies": config.strategies.split(","), "seed": config.seed, "vocab": VOCAB,
               "hidden": config.hidden, "layers": config.layers, "heads": heads_for(config.hidden),
               "batch": config.batch, "seq_len": config.seq_len, "steps": config.steps, "lr": 1e-3,
               "optimizer": config.optimizer, "timeline": config.timeline,
               "device": device}
        if os.environ.get("EXPLORER_DIST_FAIL_RANK"):  # for tests: this rank raises mid-run
            job["fail_rank"] = int(os.environ["EXPLORER_DIST_FAIL_RANK"])
        worlds = worlds_of(config)
        # All world sizes side by side: each process tracks only its own memory, and the
        # process start (importing torch) is most of the wait.
        expected = len(job["strategies"]) * (config.steps + 1) * sum(worlds)
        for done, record in enumerate(launch(job, worlds, should_stop=run.should_stop), start=1):
            self._ingest(run, record, record["world_size"])
            run.progress(min(1.0, done / expected))

    @staticmethod
    def _ingest(run: Run, record: dict, world: int) -> None:
        arm = f"{record['arm']} · N={world}"
        rank, metrics = record["rank"], record["metrics"]
        if "loss" in metrics:
            if rank == 0:  # every rank reports the same all-reduced loss
                run.add(arm, record["step"], metrics)
        else:
            run.add(arm, record["step"], {f"rank_{rank}/{key}": float(v) for key, v in metrics.items()})

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        arms = {}
        for arm in arms_in_order(frame):
            rows = frame[frame["arm"] == arm]
            values = dict(zip(rows["metric"], rows["value"]))
            if "rank_0/n_params" not in values:
                continue
            strategy, world = arm.split(" · N=")
            arms[arm] = {**arm_summary(values, strategy, int(world)),
                         "losses": metric_series(rows, "loss")["value"].tolist()}
        loss_gap, bf16_gap = {}, {}  # fp32 strategies against each other; bf16 compute against them
        for world in sorted({a["world_size"] for a in arms.values()}):
            fp32 = [a["losses"] for a in arms.values() if a["world_size"] == world and a["losses"]
                    and not a["strategy"].endswith("-bf16")]
            if len(fp32) > 1 and all(len(c) == len(fp32[0]) for c in fp32):
                loss_gap[world] = float(np.max(np.ptp(np.array(fp32), axis=0)))
            bf16 = [a["losses"] for a in arms.values() if a["world_size"] == world and a["strategy"].endswith("-bf16")]
            if fp32 and bf16 and len(bf16[0]) == len(fp32[0]):
                bf16_gap[world] = float(np.max(np.abs(np.array(bf16[0]) - np.array(fp32[0]))))
        errors = [abs(a["state_error"]) for a in arms.values()]
        # activations: the FSDP arms (DDP's also hold its gradient buckets, shown apart)
        act_errors = [abs(a["measured_activation_bytes"] / a["estimated_activation_bytes"] - 1) for a in arms.values()
                      if a["strategy"] != "ddp" and a["measured_activation_bytes"] and a["estimated_activation_bytes"]]
        return {"arms": arms, "loss_gap": loss_gap, "bf16_loss_gap": bf16_gap,
                "max_state_error": max(errors) if errors else None,
                "max_activation_error": max(act_errors) if act_errors else None}

    def explain(self, summary: dict, config: Config) -> str:
        arms = summary["arms"]
        if not arms:
            return "Run to launch the process groups (starting the ranks takes a few seconds)."
        top = max(a["world_size"] for a in arms.values())
        shown = [(arm, a) for arm, a in arms.items() if a["world_size"] == top]
        where = ("GPUs: NCCL, one process per GPU, the CUDA allocator's statistics"
                 if any(a["on_cuda"] for a in arms.values()) else
                 "the CPU: gloo, one process per rank, PyTorch's memory trackers")
        lines = [f"- Measured on {where}."]
        lines += [state_line(arm, a) for arm, a in shown]
        lines += [gathered_line(arm, a) for arm, a in shown if a["max_unsharded_bytes"] and a["unit_param_bytes"]]
        lines += activation_lines([a for _, a in shown])
        lines += [f"- At N={world} the strategies' loss curves differ by at most {gap:.1e}: the same training."
                  for world, gap in summary["loss_gap"].items()]
        lines += [f"- At N={world} bf16 compute moves the loss by at most {gap:.1e}: the same model, computed "
                  "with bf16's 8 significant bits." for world, gap in summary.get("bf16_loss_gap", {}).items()]
        if summary["max_state_error"] is not None:
            lines.append(f"- Largest model-state error against the ZeRO model: {summary['max_state_error']:.1%} "
                         "(optimizer step counters and `torch.chunk` shard sizes account for it).")
        return "\n".join(lines)

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> dict[str, go.Figure]:
        summary = self.summarize(frame, config)
        figures = {"memory_by_category": bars_figure(frame, summary), "memory_vs_world_size": vs_world_figure(summary),
                   "memory_over_phases": phases_figure(frame, summary), "memory_timeline": memory_timeline_figure(frame, summary),
                   "loss": loss_figure(frame), "what_if": what_if_figure(config, summary)}
        traces = {arm: trace_of(values_of(frame, arm)) for arm in summary["arms"]}
        if any(traces.values()):  # CUDA only
            figures["allocator_trace"] = trace_figure({arm: t for arm, t in traces.items() if t})
        return figures
