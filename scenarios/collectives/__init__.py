"""Collectives and DTensor: what does an all-reduce send, and what do DDP and FSDP issue per step?

Real gloo process groups of 2–4 ranks (one process each, started like the DDP page's) run
torch.distributed's all-reduce, all-gather, reduce-scatter and broadcast on tensors of a range
of sizes S. Every rank can rebuild every rank's input from the seed, so each result is checked
against the single-process computation; the inputs are integer-valued, so the sums are exact
in any order. Each rank reads its own TCP sockets' byte counters around each call — real bytes
on the wire — to set against the ring algorithm: an all-reduce is a reduce-scatter then an
all-gather, N − 1 steps each, S/N bytes a step, 2(N−1)/N·S per rank in all; an all-gather or a
reduce-scatter alone (N−1)/N·S. A ring all-reduce written out with isend/recv sends exactly
that; gloo's own reduce-scatter sends what its all-reduce sends. Each call is timed and
t = α + S/B fitted: a latency and a bandwidth (here loopback TCP on a shared machine: shown,
not asserted).

Then a DTensor: a tensor placed Shard(0) over the ranks (each keeps its torch.chunk of the
rows), redistributed to Replicate() (an all-gather), back to Shard(0) (no communication) and to
Shard(1); and the collectives one training step issues, counted by torch's CommDebugMode: DDP
one all-reduce of its gradient bucket (and once, in the second step's forward, two broadcasts:
after the first backward DDP rebuilds its buckets in the order the gradients arrived and syncs
the new layout); FSDP2 an all-gather of each unit before its forward and again before its
backward, and a reduce-scatter of each unit's gradients. Starting the rank processes dominates
the run (about 4 s of CPU each).
"""
import pandas as pd
from pydantic import Field

from scenarios.base import Arm, ConfigError, Estimate, Machine, Scenario, ScenarioConfig, shown_by, together
from scenarios.collectives import figures as look
from scenarios.collectives import launch as running
from scenarios.collectives.claims import explanation, headline
from scenarios.explanation import Explanation
from scenarios.plotting import Figures
from scenarios.records import Records

WORLD_MAX = 8


class Config(ScenarioConfig):
    world_size: int = Field(2, ge=2, le=WORLD_MAX, description="Ranks: gloo processes on this machine's CPU (up to 4, "
                            "or one per core). Each costs about 4 s of CPU to start.")
    largest_kib: int = Field(4096, title="largest tensor (KiB)", ge=16, le=16384, description="The largest tensor S, in KiB (float32).",
                             json_schema_extra={"scale": "log"})
    sizes: int = Field(4, ge=1, le=8, description="Sizes in the sweep, ×4 apart, ending at the largest.")
    repeats: int = Field(3, ge=1, le=20, description="Timed calls per op and size (the slowest rank's median is drawn).")
    layers: int = Field(2, ge=1, le=8, description="Linear layers (32 wide) of the DDP/FSDP model; each layer is one "
                        "FSDP unit.")


class CollectivesAndDTensor(Scenario):
    id = "collectives"
    title = "Collectives and DTensor"
    order = 90
    counted = ()  # it measures collectives; the DDP/FSDP arms' few steps are traced, not a training to count
    topic = "Distributed"
    question = "What does an all-reduce send over the wire, and which collectives do DDP and FSDP issue per step?"
    terms = {
        "All-reduce": shown_by("bytes", "rank_0/sent_bytes", "ring_bytes", arm="all-reduce",
                               how="each rank sends 2(N−1)/N·S: a reduce-scatter, then an all-gather, round the ring"),
        "All-gather": shown_by("bytes", "rank_0/sent_bytes", "ring_bytes", arm="all-gather",
                               how="each rank sends its shard on round the ring: (N−1)/N·S"),
        "DTensor": shown_by("dtensor", "shard_dim", "rank_0/local_rows", arm="DTensor",
                            how="Shard(0), Replicate() and Shard(1): which rank holds each element, and what moving costs"),
        "DDP": shown_by("training_step", "rank_0/backward/collectives/all-reduce", arm="DDP",
                        how="one all-reduce of the gradient bucket in every backward"),
        "FSDP": shown_by("training_step", "rank_0/forward/collectives/all-gather", arm="FSDP",
                         how="an all-gather per unit in forward and in backward, a reduce-scatter per unit"),
    }
    methods = {"Distributed training": shown_by("training_step", "rank_0/backward/collectives/all-reduce", arm="DDP",
                                                how="the collectives a data-parallel step sends, rank by rank")}
    formula = (r"\begin{aligned}\text{ring all-reduce: }&2\,\tfrac{N-1}{N}\,S\ \text{sent per rank}\quad"
               r"(\text{reduce-scatter } \tfrac{N-1}{N}S\ +\ \text{all-gather } \tfrac{N-1}{N}S)\\"
               r"t(S) &\approx \alpha + S/B\qquad \text{DDP: 1 all-reduce per bucket}\qquad"
               r"\text{FSDP: } 2U \text{ all-gathers},\ U \text{ reduce-scatters}\end{aligned}")
    Config = Config
    tiny = {"world_size": 2, "largest_kib": 16, "sizes": 1, "repeats": 1, "layers": 1}
    timed = (tiny, {"world_size": 3, "largest_kib": 1024, "sizes": 2, "repeats": 2}, {"sizes": 6, "repeats": 4})
    tiny_space = {"world_size": [2], "largest_kib": [16, 64], "sizes": [1, 2], "repeats": [1]}
    presets = {
        f"two ranks, {running.sweep_words(Config())}": {},  # the sizes it runs, from the defaults
        "four ranks: 2(N−1)/N = 1.5": {"world_size": 4, "sizes": 3},
        "small tensors: latency dominates": {"largest_kib": 64, "sizes": 4, "repeats": 10},
        "FSDP with 4 units": {"layers": 4, "sizes": 2},
    }

    def phases(self, config: Config) -> list[list[Arm]]:
        """One arm: the rank processes; every record is an item reported under its own arm name."""
        sentence = self.refusal(config, running.machine_here())
        if sentence is not None:
            raise ConfigError(sentence)
        return together(Arm("ranks", running.launched(config), running.records_expected(config)))

    def arm_universe(self) -> list[str]:
        return list(running.UNIVERSE)

    def refusal(self, config: Config, machine: Machine) -> str | None:
        return running.refusal(config, machine)

    def rank_processes(self, config: Config) -> int:
        return config.world_size

    def estimate(self, config: Config) -> Estimate:
        return running.estimate(config)

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records = Records(frame)
        ops = {op: dict(zip(("fit_alpha_s", "fit_bandwidth_bytes_per_s"), look.fit(records, op) or (None, None)),
                        sent_over_ring=look.mean_sent_over_ring(records, op))
               for op in running.OPS if records.has("size_bytes", op)}
        error = look.max_error(records)
        steps = {strategy: {name.split("/", 1)[1]: records.last(strategy, name) for name in records.metrics(strategy)
                            if name.startswith("rank_0/") and "/collectives/" in name}
                 for strategy in running.STRATEGIES if records.has("units", strategy)}
        return {"headline": headline(records), "world_size": look.world(records), "ops": ops,
                "max_abs_error": error[0] if error else None, "training_step_collectives": steps}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        return explanation(Records(frame))

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records = Records(frame)
        return Figures({"bytes": lambda: look.bytes_figure(records), "time": lambda: look.time_figure(records),
                        "bytes_by_rank": lambda: look.bytes_by_rank_figure(records),
                        "dtensor": lambda: look.dtensor_figure(records), "training_step": lambda: look.training_figure(records),
                        "correctness": lambda: look.correctness_figure(records)})
