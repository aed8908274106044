"""DDP vs FSDP memory: how much memory does each rank need, and what does sharding buy?

DDP keeps a full copy of the parameters, gradients and optimizer state on every rank;
FSDP shards all three, so per-rank model state falls as 1/N. Here the memory is
*measured*: real `torch.distributed` process groups (gloo and one process per rank on
CPU, NCCL on GPUs) train the same seeded Transformer under each strategy, and PyTorch's
own memory trackers split each rank's bytes by category at every phase of a step. The
ZeRO paper's analytic model stands beside every measurement, and once it matches the
small runs it answers for sizes nobody here can run (the what-if panel, a view: it
redraws without training).

Look at the stacked bars (measured next to estimated), the per-rank model state against
world size (DDP flat, FSDP ~1/N), the timeline through one step (FSDP with
reshard_after_forward=False keeps every block gathered until its backward; True frees
each after its forward), the DTensor shards each rank keeps, the collectives of a step
(DDP's all-reduce, FSDP's all-gathers and reduce-scatters), the bytes per value of the
compute and of the master weights, and the loss curves of the strategies side by side.
"""
import os
from typing import Literal

import pandas as pd
from pydantic import Field

from engines.distributed.launch import COLLECTIVES
from engines.distributed.results import ResultDirError, read_result_dir
from scenarios.base import Arm, ConfigError, Estimate, Machine, Scenario, ScenarioConfig, shown_by, together, view_field
from scenarios.ddp_fsdp_memory import launch as launching
from scenarios.ddp_fsdp_memory.claims import explanation
from scenarios.ddp_fsdp_memory.figures import bars_figure, memory_timeline_figure, phases_figure, vs_world_figure, what_if_figure
from scenarios.ddp_fsdp_memory.sharding_figures import collectives_figure, dtensor_figure, precision_figure
from scenarios.ddp_fsdp_memory.summary import arm_values, summary
from scenarios.ddp_fsdp_memory.timeline import trace_figure, trace_of
from scenarios.explanation import Explanation
from scenarios.plotting import Figures, arm_colors, curves_figure
from scenarios.records import Records

STRATEGIES = ("ddp", "fsdp-zero3", "fsdp-zero2", "fsdp-zero3-bf16")
EVERY_STRATEGY = "ddp,fsdp-zero3,fsdp-zero2,fsdp-zero3-bf16"
SHARDED = {"world_size": 2, "sweep_world_size": True}  # the tiny model on worlds of 1 and 2 ranks
WORLD_MAX = 8


class Config(ScenarioConfig):
    strategies: Literal["ddp,fsdp-zero3,fsdp-zero2", "ddp,fsdp-zero3", "ddp,fsdp-zero3,fsdp-zero2,fsdp-zero3-bf16"] = Field(
        "ddp,fsdp-zero3,fsdp-zero2", description="Arms. fsdp-zero3: reshard_after_forward=True; fsdp-zero2: False; "
        "-bf16: MixedPrecisionPolicy with bf16 parameters in compute.")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="cuda: NCCL, one process per GPU; cpu: gloo processes on the CPU; auto: cuda where this "
        "machine has a GPU for every rank, else cpu.")
    world_size: int = Field(2, ge=1, le=WORLD_MAX, description="Ranks: processes on CPU (1–4), one per GPU on CUDA (up to "
                            "the GPU count).")
    sweep_world_size: bool = Field(True, description="Also measure every world size from 1 up, for the memory-vs-N plot.")
    layers: int = Field(2, ge=1, le=8, description="Transformer blocks (each one FSDP unit).")
    hidden: int = Field(64, ge=16, le=256, description="Hidden width; parameters grow as 12·layers·hidden².")
    batch: int = Field(8, ge=1, le=32, description="Sequences per rank per step (activations grow with it).")
    seq_len: int = Field(32, ge=8, le=256, description="Tokens per sequence (activations grow with it).")
    steps: int = Field(3, ge=2, le=20, description="Training steps per arm; memory is measured at step 1.")
    optimizer: Literal["adam", "adamw"] = Field("adam", description="Two fp32 moments per parameter either way.")
    whatif_params_billion: float = view_field(70.0, title="what-if: parameters (billions)", ge=0.1, le=1000.0, description="What-if: parameters, in billions.",
                                              json_schema_extra={"scale": "log"})
    whatif_devices: int = view_field(512, title="what-if: devices", ge=1, le=1024, description="What-if: devices.")
    whatif_precision: Literal["mixed (bf16 + fp32 Adam)", "fp32 Adam"] = view_field(
        "mixed (bf16 + fp32 Adam)", title="what-if: precision", description="What-if: bytes per parameter (2+2+12 or 4+4+8).")
    timeline: bool = Field(True, description="Record rank 0's memory at every block boundary of the measured step "
                           "(on CUDA also the allocator's event history; under torchrun --out, a snapshot file "
                           "for pytorch.org/memory_viz).")
    result_dir: str = Field("", title="torchrun result folder", max_length=500, description="A folder of rank_NN.jsonl written by a torchrun job "
                            "(see README). When set, its measurements are drawn instead of launching ranks here.")


class DdpFsdpMemory(Scenario):
    id = "ddp-fsdp-memory"
    title = "DDP vs FSDP memory"
    topic = "Distributed"
    question = "How much memory does each rank need, and what does sharding buy?"
    terms = {
        "DDP": shown_by("memory_vs_world_size", "rank_0/exact/parameters", "rank_0/exact/optimizer state", arm="ddp",
                        when=SHARDED, how="a full copy of parameters, gradients and Adam state on every rank: flat in N"),
        "FSDP": shown_by("memory_vs_world_size", "rank_0/exact/parameters", "rank_0/exact/optimizer state", arm="fsdp",
                         when=SHARDED, how="parameters, gradients and Adam state sharded over the ranks: about 1/N each"),
        "DTensor": shown_by("dtensor_shards", "rank_0/dtensor/", "rank_1/dtensor/", arm="fsdp-zero3 · N=2", when=SHARDED,
                            how="every FSDP2 parameter is a DTensor placed Shard(0): each rank keeps its rows"),
        "All-reduce": shown_by("collectives", "rank_0/collectives/all-reduce", arm="ddp · N=2", when=SHARDED,
                               how="DDP averages the gradients with an all-reduce per bucket, every step"),
        "All-gather": shown_by("collectives", "rank_0/collectives/all-gather", arm="fsdp-zero3 · N=2", when=SHARDED,
                               how="FSDP gathers each unit's shards before its forward (and its backward, resharded)"),
        "Mixed precision": shown_by("precision", "rank_0/precision/compute", arm="bf16", when={"strategies": EVERY_STRATEGY},
                                    how="the bf16 arm computes in 2 bytes per value; its parameters and Adam keep 4"),
        "Master weights": shown_by("precision", "rank_0/precision/master", arm="bf16", when={"strategies": EVERY_STRATEGY},
                                   how="the fp32 shards Adam updates, beside the bf16 copies the forward uses"),
    }
    methods = {"Distributed training": shown_by("memory_vs_world_size", "rank_0/exact/parameters", arm="fsdp", when=SHARDED,
                                                how="data-parallel ranks, replicated (DDP) or sharded (FSDP)")}
    formula = (r"\begin{aligned}\text{DDP: }&(2+2+K)\,\Psi \qquad \text{ZeRO-1: }2\Psi+2\Psi+\tfrac{K\Psi}{N}\\"
               r"\text{ZeRO-2: }&2\Psi+\tfrac{(2+K)\Psi}{N} \qquad \text{ZeRO-3 / FSDP: }\tfrac{(2+2+K)\Psi}{N}"
               r"\quad (K=12;\ \text{fp32 Adam: }4+4+8)\end{aligned}")
    Config = Config
    order = 80
    picture = "memory_by_category"
    # One rank: a tiny run must repeat exactly, and with two ranks a tracked byte count beside a
    # collective can differ by one buffer between identical runs (gloo frees it on its own thread).
    tiny = {"device": "cpu", "world_size": 1, "sweep_world_size": False, "layers": 1, "hidden": 16, "batch": 2,
            "seq_len": 8, "steps": 2, "strategies": "ddp,fsdp-zero3"}
    timed = (tiny, {"device": "cpu", "world_size": 2, "sweep_world_size": False, "strategies": "ddp,fsdp-zero3"},
             {"device": "cpu", "world_size": 1, "layers": 4, "hidden": 128, "batch": 16, "seq_len": 128, "steps": 4})
    tiny_space = {"device": ["cpu"], "world_size": [1, 2], "sweep_world_size": [False], "steps": [2],
                  "strategies": ["ddp,fsdp-zero3", "ddp,fsdp-zero3,fsdp-zero2"]}
    presets = {
        "two ranks, three strategies": {},
        "memory vs world size 1-4": {"world_size": 4, "strategies": "ddp,fsdp-zero3"},
        "ZeRO paper's example (what-if)": {"whatif_params_billion": 7.5, "whatif_devices": 64,
                                           "whatif_precision": "mixed (bf16 + fp32 Adam)"},
    }

    def phases(self, config: Config) -> list[list[Arm]]:
        """One arm: the rank processes (or a torchrun job's files), every record an item."""
        if config.result_dir:
            try:
                records = [launching.item_of(r.model_dump()) for r in read_result_dir(config.result_dir)]
            except ResultDirError as error:
                raise ConfigError(str(error)) from None
            return together(Arm("result_dir", iter(records), len(records)))
        machine = launching.machine_here(gpu_memory=config.device != "cpu")
        sentence = self.refusal(config, machine)
        if sentence is not None:
            raise ConfigError(sentence)
        job = launching.job_of(config, launching.device_of(config, machine), os.environ.get("EXPLORER_DIST_FAIL_RANK"))
        return together(Arm("ranks", launching.launched(job, config), launching.records_expected(config)))

    def arm_universe(self) -> list[str]:
        worlds = [2, 1, *range(3, WORLD_MAX + 1)]  # the default run's arms first
        return [f"{strategy} · N={world}" for world in worlds for strategy in STRATEGIES]

    def refusal(self, config: Config, machine: Machine) -> str | None:
        return launching.refusal(config, machine)

    def rank_processes(self, config: Config) -> int:
        return sum(launching.worlds_of(config))

    def estimate(self, config: Config) -> Estimate:
        return launching.estimate(config)

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        return dict(summary(Records(frame)))  # a copy: `run` adds the status to it

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        return explanation(Records(frame), tuple(COLLECTIVES))

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records = Records(frame)
        run = summary(records)
        colors = arm_colors(records.arms(), self.arm_universe())
        figures = {
            "memory_by_category": lambda: bars_figure(records, run),
            "memory_vs_world_size": lambda: vs_world_figure(run, colors),
            "memory_over_phases": lambda: phases_figure(records, run, colors),
            "memory_timeline": lambda: memory_timeline_figure(records, run),
            "loss": lambda: curves_figure(records, colors, "loss", title="Loss of every strategy (mean over ranks)",
                                          y_title="mean loss over ranks (nats)"),
            "dtensor_shards": lambda: dtensor_figure(records, run), "collectives": lambda: collectives_figure(records, run),
            "precision": lambda: precision_figure(records, run), "what_if": lambda: what_if_figure(config, run)}
        traces = {arm: trace_of(arm_values(records, arm)) for arm in run["arms"]}
        if any(traces.values()):  # CUDA only
            figures["allocator_trace"] = lambda: trace_figure({arm: t for arm, t in traces.items() if t}, colors)
        return Figures(figures)
