"""The scenario contract: what every experiment declares and how it runs.

A scenario is declarative glue over engines/. It declares a pydantic `Config` (the single
source of the page's widgets, the CLI's `--set`, URL parameters and validation), the
phases of arms it trains (`phases`), one pure `figures(frame, config)` for every view,
an `explain(frame, config)` whose every sentence is a claim the records prove, and per
glossary term (and per training method it shows, `methods`) the evidence that shows it. `Scenario.run` is the only way a run happens —
the page's workers, the CLI and the Python API all call it:

    frame, summary = get_scenario("vanishing-gradients").run({"depth": 30})

Records are long-format rows `arm, step, metric, value`. A diverged arm adds one row
`metric="diverged"` at the step it died, so the frame alone can draw it.

This module imports no torch: a scenario module imports its engines inside `phases`,
so the UI process can import every scenario to draw its controls and figures.
"""
import functools
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd
from pydantic import ValidationError

from scenarios.config import (ConfigError, ScenarioConfig, canonical_value, describe_error, field_adapter, field_spec,
                              view_field)
from scenarios.cost import Work, price
from scenarios.driver import COLUMNS, Arm, Event, Run, RunResult, Sink, in_turn, together
from scenarios.explanation import Explanation
from scenarios.points import PointCache

__all__ = ["Arm", "COLUMNS", "ConfigError", "Estimate", "Event", "Evidence", "Machine", "Run", "RunResult",
           "STATUSES", "Scenario", "ScenarioConfig", "Work", "in_turn", "shown_by", "together", "view_field"]

STATUSES = ("finished", "diverged", "stopped", "failed")
LIVE_STATUSES = ("running", "incomplete")  # a run written as it goes (a watched one): going on, or its script was killed


# --- what a page needs to know before Run --------------------------------------------------
@dataclass(frozen=True)
class Machine:
    """What the machine that would train offers (the page learns it from a worker)."""

    cpus: int
    gpus: int = 0
    gpu_memory_bytes: int = 0          # the smallest GPU's total memory
    memory_limit_bytes: int = 0        # host memory runs may plan on (`host_memory`; 0: unknown)
    memory_source: str = "this machine's total memory"  # where that figure comes from, said in a refusal

    def memory_basis(self, share: float) -> str:
        """The limit a memory refusal applies, in words: its size and what it is based on."""
        return (f"the {share * self.memory_limit_bytes / 1e9:.2f} GB a run may plan on here ({share:.0%} of "
                f"{self.memory_limit_bytes / 1e9:.2f} GB, {self.memory_source}; not what happens to be free now)")


MEMORY_LIMIT_VARIABLE = "EXPLORER_MEMORY_LIMIT_BYTES"


def host_memory() -> dict[str, int | str]:
    """The host memory a run may plan on, as Machine fields: `EXPLORER_MEMORY_LIMIT_BYTES` where set (a
    shared server that wants runs smaller; tests), else this machine's total memory. Never what is free
    at the moment: a config accepted now would be refused two minutes later because of a neighbour."""
    limit = os.environ.get(MEMORY_LIMIT_VARIABLE, "")
    try:
        if limit:
            return {"memory_limit_bytes": int(float(limit)), "memory_source": f"set by {MEMORY_LIMIT_VARIABLE}"}
        return {"memory_limit_bytes": os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"),
                "memory_source": "this machine's total memory"}
    except (ValueError, OSError):
        return {"memory_limit_bytes": 0}


@dataclass(frozen=True)
class Estimate:
    """A cheap, calibrated guess of a run's cost (scenarios/cost.py), said on the page before Run."""

    seconds: float
    bytes: float = 0.0

    def times(self, runs: int) -> "Estimate":
        """`runs` such runs one after another (a seed repeat): the time adds up, the peak does not."""
        return Estimate(self.seconds * runs, self.bytes)


@dataclass(frozen=True)
class Evidence:
    """Where a glossary term is shown: a figure, and the metrics (names, or prefixes ending
    in "/") whose records show it. A test runs the tiny config and finds every one."""

    figure: str | None = None
    metrics: tuple[str, ...] = ()
    how: str = ""                  # one line: what to look at
    arm: str = ""                  # the metrics must belong to an arm whose label contains this
    when: dict[str, Any] = field(default_factory=dict)  # config overrides (on top of `tiny`) that show it
    partial: bool = False          # a training method the page shows only in part (said so on the Glossary)


def shown_by(figure: str | None = None, *metrics: str, how: str = "", arm: str = "",
             when: Mapping[str, Any] | None = None, partial: bool = False) -> Evidence:
    return Evidence(figure, tuple(metrics), how, arm, dict(when or {}), partial)


class Scenario:
    """Subclass, set the class attributes, and implement `phases` (or `execute`), `figures`,
    `summarize` and `explain`."""

    id: ClassVar[str]
    title: ClassVar[str]
    question: ClassVar[str]                  # the one question the page answers
    topic: ClassVar[str] = "Core mechanics"  # the glossary section the page belongs to
    terms: ClassVar[dict[str, Evidence]]     # glossary term -> where this page shows it
    methods: ClassVar[dict[str, Evidence]] = {}  # training method (seed 002) -> where this page shows it
    formula: ClassVar[str]                   # LaTeX of the mechanism
    Config: ClassVar[type[ScenarioConfig]]
    presets: ClassVar[dict[str, dict[str, Any]]] = {}
    tiny: ClassVar[dict[str, Any]] = {}      # overrides for a run of a second or less (tests, smoke checks)
    tiny_space: ClassVar[dict[str, list]] = {}  # values random tiny configs may take (fields that would run long)
    order: ClassVar[int] = 100               # position in the gallery (then by title)
    picture: ClassVar[str | None] = None     # the figure a home card shows small (None: its first term's figure)
    counted: ClassVar[tuple[str, ...]] = ("loss",)  # the status line's "after 300 steps" counts the steps of the arms
                                             # that record a metric whose name holds one of these (training arms,
                                             # not a sweep indexed by bit width or N); (): the line gives no count
    listed: ClassVar[bool] = True            # False: registered (its runs are drawn and explained) but trained
                                             # elsewhere, so not in the gallery, `list` or `run` (scenarios/watched/)
    rates: ClassVar[dict[str, float]] = {}   # seconds per unit of each `work` term here (bench/estimates.py fits them)
    rates_reference: ClassVar[float] = 0.0   # engines.loop.runtime.reference_cpu_seconds() when they were fitted
    timed: ClassVar[tuple[dict[str, Any], ...]] = ()  # three configs (≲ 2 s each) the estimate is held to, within 2×
    arms_note: ClassVar[str] = ""             # how the arms train: as one batched model, or one model each and why
    batches_seeds: ClassVar[bool] = False     # `seed_phases` trains several seeds as one run (scenarios/seeded.py)


    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A scenario's docstring (`help()`, a notebook's `?`) is its question, then its module's
        docstring (what it trains and what to look at), unless the class writes its own."""
        super().__init_subclass__(**kwargs)
        if cls.__doc__ is None and isinstance(getattr(cls, "question", None), str):
            module = sys.modules.get(cls.__module__)
            cls.__doc__ = "\n\n".join(filter(None, (cls.question, getattr(module, "__doc__", None))))

    # --- to implement -------------------------------------------------------------
    def phases(self, config: ScenarioConfig) -> list[list[Arm]]:
        """The arms to train, phase by phase (`together(...)`, `in_turn(...)`)."""
        raise NotImplementedError

    def execute(self, config: ScenarioConfig, run: Run) -> None:
        run.drive(self.phases(config))

    def seed_phases(self, config: ScenarioConfig, seeds: list[int]) -> list[list[Arm]]:
        """With `batches_seeds`: the phases of the runs of `config` at each of `seeds`, as one run whose
        records of arm `a` for seed `s` are named `scenarios.seeded.seed_arm(a, s)`."""
        raise NotImplementedError

    def figures(self, frame: pd.DataFrame, config: ScenarioConfig) -> dict:
        """name -> plotly Figure, drawn from a (possibly partial) frame."""
        raise NotImplementedError

    def summarize(self, frame: pd.DataFrame, config: ScenarioConfig) -> dict[str, Any]:
        """What is stored beside the records: `headline` (a few numbers for the runs table) and more."""
        return {}

    def explain(self, frame: pd.DataFrame, config: ScenarioConfig) -> Explanation:
        """'What to look for': a takeaway and details, each a claim the frame proves."""
        raise NotImplementedError

    def snippet(self, config: ScenarioConfig) -> str | None:
        """Python the page shows under the mechanism: the library call this config amounts to."""
        return None

    def arm_universe(self) -> list[str]:
        """Every arm label this scenario can produce, most common first: a label's colour is its
        place in this list, the same in every run and figure."""
        return []

    def refusal(self, config: ScenarioConfig, machine: Machine) -> str | None:
        """A plain sentence when this machine cannot run `config` (refused before Run), else None."""
        return None

    def work(self, config: ScenarioConfig) -> Work:
        """What a run of `config` grows with (scenarios/cost.py): the terms `rates` prices, the floats it holds."""
        raise NotImplementedError

    def estimate(self, config: ScenarioConfig) -> Estimate | None:
        """The run's time and peak memory, from the config alone (said before Run; a large one waits for Run).
        None for a scenario without `rates` yet (every registered one has them: tests/test_estimates.py)."""
        return Estimate(*price(self.rates, self.work(config))) if self.rates else None

    def rank_processes(self, config: ScenarioConfig) -> int:
        """How many rank processes a run of `config` launches (engines.distributed.launch); the page's
        pool starts that many ahead while the page is read."""
        return 0

    # --- shared -------------------------------------------------------------------
    def validate(self, config: ScenarioConfig | Mapping[str, Any] | None = None) -> ScenarioConfig:
        """A Config from a Config, a mapping (strings allowed: '30', 'true') or None (defaults)."""
        if isinstance(config, self.Config):
            return config
        if config is not None and not isinstance(config, Mapping):
            raise ConfigError(f"a config for {self.id} is a mapping of setting names to values, "
                              f"not {type(config).__name__}")
        try:
            return self.Config.model_validate(self._choices_from_text(canonical_value(dict(config or {}))))
        except ValidationError as error:
            raise ConfigError(describe_error(self.id, self.field_specs(), error)) from None

    def _choices_from_text(self, values: dict[str, Any]) -> dict[str, Any]:
        """A choice given as text ('512' from the CLI or a URL) is the choice written so (Literal[256, 512])."""
        specs = self.field_specs()
        for name, value in values.items():
            spec = specs.get(name, {})
            if isinstance(value, str) and spec.get("kind") == "choice":
                values[name] = next((c for c in spec["choices"] if str(c) == value), value)
        return values

    def validate_field(self, name: str, value: Any) -> Any:
        """One setting checked alone (type, bounds, choices), before the whole config is: a URL's values
        one by one, where a check across fields would wrongly blame the one read first."""
        if name not in self.Config.model_fields:
            raise ConfigError(f"unknown key {name!r} for {self.id}; allowed keys: {', '.join(self.field_specs())}")
        try:
            return field_adapter(self.Config, name).validate_python(self._choices_from_text({name: canonical_value(value)})[name])
        except ValidationError as error:
            raise ConfigError(describe_error(self.id, self.field_specs(), error, name)) from None

    def key_of(self, config: ScenarioConfig) -> dict[str, Any]:
        """The part of a config a result depends on: every field but the view fields, canonical."""
        views = self.view_fields()
        return {k: v for k, v in canonical_value(config.model_dump(mode="json")).items() if k not in views}

    def view_fields(self) -> set[str]:
        return {name for name, spec in self.field_specs().items() if spec["view"]}

    def run(self, config: ScenarioConfig | Mapping[str, Any] | None = None,
            sink: Sink | None = None, points: PointCache | None = None) -> RunResult:
        """`points`: a cache of grid points kept across runs (scenarios/points.py), for a scenario that uses one."""
        config = self.validate(config)
        run = Run(sink, points)
        started = time.perf_counter()
        self.execute(config, run)
        frame = run.frame()
        summary = self.summarize(frame, config)
        status = "stopped" if run.stopped else ("diverged" if any(e.kind == "diverged" for e in run.events) else "finished")
        summary["status"] = status
        return RunResult(frame, summary, run.events, status, time.perf_counter() - started)

    def run_seeds(self, config: ScenarioConfig | Mapping[str, Any] | None, seeds: list[int],
                  sink: Sink | None = None) -> list[RunResult]:
        """The runs of `config` at each of `seeds`, as `run` gives them one by one: in one run when the
        scenario `batches_seeds` (its seeds as more arms of its batched models), else one after another."""
        from scenarios.seeded import split
        config = self.validate(config)
        configs = [config.model_copy(update={"seed": seed}) for seed in seeds]
        if not self.batches_seeds or len(seeds) == 1:
            return [self.run(one, sink) for one in configs]
        run, started = Run(sink), time.perf_counter()
        run.drive(self.seed_phases(config, list(seeds)))
        duration = time.perf_counter() - started
        results = []
        for one, (frame, events) in zip(configs, split(run.frame(), run.events, list(seeds)).values()):
            summary = self.summarize(frame, one)
            status = "stopped" if run.stopped else ("diverged" if any(e.kind == "diverged" for e in events) else "finished")
            summary["status"] = status
            results.append(RunResult(frame, summary, events, status, duration))
        return results

    def code_version(self) -> str:
        """Hash of the code a result depends on: its folder, the shared contract, the engines it reaches."""
        from scenarios.code_version import code_version
        return code_version(type(self).__module__)

    def field_specs(self) -> dict[str, dict[str, Any]]:
        """Per field: type, default, bounds or choices, description — for widgets, CLI help and errors."""
        return _field_specs(self.Config)


@functools.cache
def _field_specs(config_class: type[ScenarioConfig]) -> dict[str, dict[str, Any]]:
    return {name: field_spec(info) for name, info in config_class.model_fields.items()}
