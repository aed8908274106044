"""The scenario contract: what every experiment declares and how it runs.

A scenario is declarative glue over engines/. It declares a pydantic `Config` (the single
source of the page's widgets, the CLI's `--set`, URL parameters and validation), the
phases of arms it trains (`phases`), one pure `figures(frame, config)` for every view,
an `explain(frame, config)` whose every sentence is a claim the records prove, and per
glossary term the evidence that shows it. `Scenario.run` is the only way a run happens —
the page's workers, the CLI and the Python API all call it:

    frame, summary = get_scenario("vanishing-gradients").run({"depth": 30})

Records are long-format rows `arm, step, metric, value`. A diverged arm adds one row
`metric="diverged"` at the step it died, so the frame alone can draw it.

This module imports no torch: a scenario module imports its engines inside `phases`,
so the UI process can import every scenario to draw its controls and figures.
"""
import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd
from pydantic import ValidationError

from scenarios.config import (ConfigError, ScenarioConfig, canonical_value, describe_error, field_spec,
                              view_field)
from scenarios.driver import COLUMNS, Arm, Event, Run, RunResult, Sink, in_turn, together
from scenarios.explanation import Explanation

__all__ = ["Arm", "COLUMNS", "ConfigError", "Estimate", "Event", "Evidence", "Machine", "Run", "RunResult",
           "STATUSES", "Scenario", "ScenarioConfig", "in_turn", "shown_by", "together", "view_field"]

STATUSES = ("finished", "diverged", "stopped", "failed")
LIVE_STATUSES = ("running", "incomplete")  # a run written as it goes (a watched one): going on, or its script was killed


# --- what a page needs to know before Run --------------------------------------------------
@dataclass(frozen=True)
class Machine:
    """What the machine that would train offers (the page learns it from a worker)."""

    cpus: int
    gpus: int = 0
    gpu_memory_bytes: int = 0          # the smallest GPU's total memory
    memory_available_bytes: int = 0    # host memory free now (0: unknown)


@dataclass(frozen=True)
class Estimate:
    """A cheap, calibrated guess of a run's cost, said before it starts when it is large."""

    seconds: float
    bytes: float = 0.0


@dataclass(frozen=True)
class Evidence:
    """Where a glossary term is shown: a figure, and the metrics (names, or prefixes ending
    in "/") whose records show it. A test runs the tiny config and finds every one."""

    figure: str | None = None
    metrics: tuple[str, ...] = ()
    how: str = ""                  # one line: what to look at
    arm: str = ""                  # the metrics must belong to an arm whose label contains this
    when: dict[str, Any] = field(default_factory=dict)  # config overrides (on top of `tiny`) that show it


def shown_by(figure: str | None = None, *metrics: str, how: str = "", arm: str = "",
             when: Mapping[str, Any] | None = None) -> Evidence:
    return Evidence(figure, tuple(metrics), how, arm, dict(when or {}))


class Scenario:
    """Subclass, set the class attributes, and implement `phases` (or `execute`), `figures`,
    `summarize` and `explain`."""

    id: ClassVar[str]
    title: ClassVar[str]
    question: ClassVar[str]                  # the one question the page answers
    topic: ClassVar[str] = "Core mechanics"  # the glossary section the page belongs to
    terms: ClassVar[dict[str, Evidence]]     # glossary term -> where this page shows it
    formula: ClassVar[str]                   # LaTeX of the mechanism
    Config: ClassVar[type[ScenarioConfig]]
    presets: ClassVar[dict[str, dict[str, Any]]] = {}
    tiny: ClassVar[dict[str, Any]] = {}      # overrides for a run of a second or less (tests, smoke checks)
    tiny_space: ClassVar[dict[str, list]] = {}  # values random tiny configs may take (fields that would run long)
    order: ClassVar[int] = 100               # position in the gallery (then by title)
    picture: ClassVar[str | None] = None     # the figure a home card shows small (None: its first term's figure)
    listed: ClassVar[bool] = True            # False: registered (its runs are drawn and explained) but trained
                                             # elsewhere, so not in the gallery, `list` or `run` (scenarios/watched/)

    # --- to implement -------------------------------------------------------------
    def phases(self, config: ScenarioConfig) -> list[list[Arm]]:
        """The arms to train, phase by phase (`together(...)`, `in_turn(...)`)."""
        raise NotImplementedError

    def execute(self, config: ScenarioConfig, run: Run) -> None:
        run.drive(self.phases(config))

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

    def estimate(self, config: ScenarioConfig) -> Estimate | None:
        """A cheap guess of the run's time and memory, said before a large run starts."""
        return None

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
            return self.Config.model_validate(canonical_value(dict(config or {})))
        except ValidationError as error:
            raise ConfigError(describe_error(self.id, self.field_specs(), error)) from None

    def key_of(self, config: ScenarioConfig) -> dict[str, Any]:
        """The part of a config a result depends on: every field but the view fields, canonical."""
        views = self.view_fields()
        return {k: v for k, v in canonical_value(config.model_dump(mode="json")).items() if k not in views}

    def view_fields(self) -> set[str]:
        return {name for name, spec in self.field_specs().items() if spec["view"]}

    def run(self, config: ScenarioConfig | Mapping[str, Any] | None = None,
            sink: Sink | None = None) -> RunResult:
        config = self.validate(config)
        run = Run(sink)
        started = time.perf_counter()
        self.execute(config, run)
        frame = run.frame()
        summary = self.summarize(frame, config)
        status = "stopped" if run.stopped else ("diverged" if any(e.kind == "diverged" for e in run.events) else "finished")
        summary["status"] = status
        return RunResult(frame, summary, run.events, status, time.perf_counter() - started)

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
