"""The scenario contract: what every experiment declares and how it runs.

A scenario is declarative glue over engines/. It declares a pydantic `Config` (the single
source of the page's widgets, the CLI's `--set`, URL parameters and validation), runs its
arms through the shared engines in `execute`, and draws everything with one pure
`figures(frame, config)`. `Scenario.run` is the only way a run happens — the page, the
CLI and the Python API all call it:

    frame, summary = get_scenario("vanishing-gradients").run({"depth": 30})

Records are long-format rows `arm, step, metric, value`. A diverged arm adds one row
`metric="diverged"` at the step it died, so the frame alone can draw it.
"""
import functools
import hashlib
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engines.training import Diverged, StepRecord

COLUMNS = ["arm", "step", "metric", "value"]
STATUSES = ("finished", "diverged", "stopped", "failed")
_ENGINES = Path(__file__).resolve().parent.parent / "engines"


class ScenarioConfig(BaseModel):
    """Base of every scenario's Config: unknown keys are refused, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = Field(0, ge=0, le=2**31 - 1, description="Seeds the weights and the data order of every arm.")


class ConfigError(ValueError):
    """Bad input from any edge (page, CLI, URL, API): one line naming the field and what is allowed."""


@dataclass(frozen=True)
class Event:
    arm: str
    step: int
    kind: str  # "diverged", ...
    message: str


class Sink(Protocol):
    """Where a running scenario reports to (the run manager, the CLI's progress bar)."""

    def add(self, rows: list[tuple[str, int, str, float]]) -> None: ...
    def event(self, event: Event) -> None: ...
    def progress(self, fraction: float) -> None: ...
    def stop_requested(self) -> bool: ...


class Run:
    """Collects one run's rows and events and relays them to an optional outer sink."""

    def __init__(self, sink: Sink | None = None) -> None:
        self.sink = sink
        self.rows: list[tuple[str, int, str, float]] = []
        self.events: list[Event] = []
        self.stopped = False
        self._lock = threading.Lock()

    def add(self, arm: str, step: int, metrics: Mapping[str, float]) -> None:
        rows = [(arm, step, name, float(value)) for name, value in metrics.items()]
        with self._lock:
            self.rows.extend(rows)
        if self.sink is not None:
            self.sink.add(rows)

    def event(self, event: Event) -> None:
        self.events.append(event)
        if event.kind == "diverged":
            self.add(event.arm, event.step, {"diverged": 1.0})
        if self.sink is not None:
            self.sink.event(event)

    def progress(self, fraction: float) -> None:
        if self.sink is not None:
            self.sink.progress(min(1.0, max(0.0, fraction)))

    def should_stop(self) -> bool:
        if self.sink is not None and self.sink.stop_requested():
            self.stopped = True
        return self.stopped

    def interleave(self, arms: Mapping[str, Iterator[StepRecord | Diverged]], steps: int) -> None:
        """Advance every arm one logged record at a time, so the arms grow side by side."""
        live = dict(arms)
        done_steps = {name: 0 for name in arms}
        while live and not self.should_stop():
            for name in list(live):
                record = next(live[name], None)
                if record is None:
                    del live[name]
                elif isinstance(record, Diverged):
                    self.event(Event(name, record.step, "diverged", record.message))
                    done_steps[name] = steps
                    del live[name]
                else:
                    self.add(name, record.step, record.metrics)
                    done_steps[name] = record.step + 1
            self.progress(sum(done_steps.values()) / (steps * len(arms)))
        for generator in live.values():
            generator.close()  # a stopped run still runs each loop's `finally`

    def frame(self) -> pd.DataFrame:
        with self._lock:
            return pd.DataFrame(self.rows, columns=COLUMNS)


@dataclass
class RunResult:
    """What `Scenario.run` returns. Unpacks as `frame, summary = result`."""

    frame: pd.DataFrame
    summary: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    status: str = "finished"
    duration_s: float = 0.0

    def __iter__(self):
        yield self.frame
        yield self.summary


class Scenario:
    """Subclass, set the class attributes, and implement `execute`, `figures`, `summarize`."""

    id: ClassVar[str]
    title: ClassVar[str]
    question: ClassVar[str]            # the one question the page answers
    terms: ClassVar[tuple[str, ...]]   # glossary terms it brings to life
    formula: ClassVar[str]             # LaTeX of the mechanism
    Config: ClassVar[type[ScenarioConfig]]
    presets: ClassVar[dict[str, dict[str, Any]]] = {}
    tiny: ClassVar[dict[str, Any]] = {}  # overrides for a run of a second or less (tests, smoke checks)
    order: ClassVar[int] = 100            # position in the gallery (then by title)

    # --- to implement -------------------------------------------------------------
    def execute(self, config: ScenarioConfig, run: Run) -> None:
        raise NotImplementedError

    def figures(self, frame: pd.DataFrame, config: ScenarioConfig) -> dict:
        """name -> plotly Figure, drawn from a (possibly partial) frame."""
        raise NotImplementedError

    def summarize(self, frame: pd.DataFrame, config: ScenarioConfig) -> dict[str, Any]:
        raise NotImplementedError

    def explain(self, summary: dict[str, Any], config: ScenarioConfig) -> str:
        """'What to look for', as markdown that reads the actual result."""
        raise NotImplementedError

    # --- shared -------------------------------------------------------------------
    def validate(self, config: ScenarioConfig | Mapping[str, Any] | None = None) -> ScenarioConfig:
        """A Config from a Config, a mapping (strings allowed: '30', 'true') or None (defaults)."""
        if isinstance(config, self.Config):
            return config
        values = dict(config or {})
        try:
            return self.Config.model_validate(values)
        except ValidationError as error:
            raise ConfigError(describe_error(self, error)) from None

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
        """Hash of the code a result depends on: engines/, this contract and the scenario's module."""
        return _code_version(type(self).__module__)

    def field_specs(self) -> dict[str, dict[str, Any]]:
        """Per field: type, default, bounds or choices, description — for widgets, CLI help and errors."""
        return {name: field_spec(info) for name, info in self.Config.model_fields.items()}


@functools.cache
def _code_version(module: str) -> str:
    """Hashed once per process: it describes the code this process imported, and the Runs
    page asks for it once per listed run. All of engines/ (a worker may be started by
    name, not imported), this contract, the scenario's module and the private helper
    modules (`scenarios/_*.py`) it imports."""
    import sys
    digest = hashlib.sha256()
    files = sorted(_ENGINES.glob("*.py")) + [Path(__file__)] + _with_helpers(Path(sys.modules[module].__file__))
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _with_helpers(path: Path) -> list[Path]:
    """`path` and the `scenarios._*` modules it imports, transitively (read from the source)."""
    import ast
    found, todo = [], [path]
    while todo:
        current = todo.pop()
        if current in found:
            continue
        found.append(current)
        for node in ast.walk(ast.parse(current.read_text())):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            todo += [path.parent / (name.split(".")[1] + ".py") for name in names
                     if name.startswith("scenarios._") and (path.parent / (name.split(".")[1] + ".py")).exists()]
    return found


def field_spec(info) -> dict[str, Any]:
    """The facts about one pydantic field that the edges need."""
    import typing
    spec: dict[str, Any] = {"default": info.default, "description": info.description or ""}
    annotation = info.annotation
    if typing.get_origin(annotation) is typing.Literal:
        spec.update(kind="choice", choices=list(typing.get_args(annotation)))
    elif annotation is bool:
        spec["kind"] = "bool"
    elif annotation in (int, float):
        spec["kind"] = annotation.__name__
        for meta in info.metadata:
            for bound in ("ge", "gt", "le", "lt"):
                if hasattr(meta, bound):
                    spec[bound] = getattr(meta, bound)
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        spec["scale"] = extra.get("scale", "linear")
    else:
        spec["kind"] = "other"
    return spec


def describe_error(scenario: Scenario, error: ValidationError) -> str:
    """The first problem in one line, naming the key and what is allowed."""
    problem = error.errors()[0]
    key = ".".join(str(part) for part in problem["loc"]) or "config"
    specs = scenario.field_specs()
    if problem["type"] == "extra_forbidden":
        return f"unknown key {key!r} for {scenario.id}; allowed keys: {', '.join(specs)}"
    spec = specs.get(key, {})
    given = problem.get("input")
    if spec.get("kind") == "choice":
        allowed = "one of " + ", ".join(str(c) for c in spec["choices"])
    elif spec.get("kind") in ("int", "float"):
        low = spec.get("ge", spec.get("gt"))
        high = spec.get("le", spec.get("lt"))
        allowed = f"{'an integer' if spec['kind'] == 'int' else 'a number'} from {low} to {high}"
    elif spec.get("kind") == "bool":
        allowed = "true or false"
    else:
        allowed = problem["msg"]
    return f"{key}={given} is not allowed for {scenario.id}: {key} must be {allowed}"
