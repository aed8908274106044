"""The one arms driver: a run's rows and events, its progress and its Stop.

A scenario's `phases` are lists of `Arm`s; `Run.drive` advances the arms of a phase side
by side (one item each in turn) and the phases one after another. Every item an arm
yields is a step (`engines.loop.training.train` yields one per step), so Stop is checked after
every step of every arm, and progress is computed here, once, from each arm's `steps`
and `cost`: the work done over the work done and left (an arm that diverges early leaves
less). A diverged arm ends with an event and a `diverged` row; a diverged `needed` arm (a
teacher, the float model) ends the run. A `Note` item tells the sink what the run
waits for ("starting 3 rank processes") without recording anything. One batched step of K
arms (`engines.loop.batched.train_arms`) is one item too: a list of `(arm_name, record)`, each
reported under its own name as it comes; a diverged one ends that arm alone.
"""
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd

from engines.loop.records import Diverged, Note, StepRecord
from scenarios.points import PointCache

COLUMNS = ["arm", "step", "metric", "value"]
PROGRESS_EVERY_S = 0.1  # a sink hears about progress at most this often (and at the end)


@dataclass(frozen=True)
class Event:
    arm: str
    step: int
    kind: str  # "diverged", ...
    message: str


class Sink(Protocol):
    """Where a running scenario reports to (a page's worker, the CLI's progress bar)."""

    def add(self, rows: list[tuple[str, int, str, float]]) -> None: ...
    def event(self, event: Event) -> None: ...
    def progress(self, fraction: float) -> None: ...
    def note(self, text: str) -> None: ...  # what the run waits for ("starting 3 rank processes")
    def stop_requested(self) -> bool: ...


Named = tuple[str, StepRecord | Diverged]
Item = StepRecord | Diverged | Note | None | Named | list[Named]


@dataclass
class Arm:
    """A named stream of records: usually `engines.loop.training.train(...)`, one item per step.

    `steps` is how many items it will yield (`Note`s aside) and `cost` the relative time of one, for
    progress. A `needed` arm's result is used by later phases (a teacher, the float model):
    if it diverges the run ends there. An item may be `(arm_name, record)` to report under
    another name (one process group streaming several strategies), or a list of them: one step
    of a batched group of arms, every arm's record at once (`steps` counts such steps)."""

    name: str
    records: Iterator[Item]
    steps: int
    cost: float = 1.0
    needed: bool = False


def together(*arms: Arm) -> list[list[Arm]]:
    """One phase: the arms advance side by side, one item each in turn."""
    return [list(arms)]


def in_turn(*arms: Arm) -> list[list[Arm]]:
    """One phase per arm: each runs to its end before the next starts."""
    return [[arm] for arm in arms]


class Run:
    """One run's rows and events, its progress and its Stop, relayed to an optional sink.

    `drive` is the one arms driver: every scenario's phases go through it, so Stop is
    checked after every step of every arm and progress is computed in one place."""

    def __init__(self, sink: Sink | None = None, points: "PointCache | None" = None) -> None:
        self.sink = sink
        self.points = points  # where a grid's points are kept across runs (scenarios/points.py), if anywhere
        self.rows: list[tuple[str, int, str, float]] = []
        self.events: list[Event] = []
        self.stopped = False
        self._reported = 0.0
        self._noted = ""

    def add(self, arm: str, step: int, metrics: Mapping[str, float]) -> None:
        rows = [(arm, int(step), name, float(value)) for name, value in metrics.items()]
        self.rows.extend(rows)
        if self.sink is not None and rows:
            self.sink.add(rows)

    def event(self, event: Event) -> None:
        self.events.append(event)
        if event.kind == "diverged":
            self.add(event.arm, event.step, {"diverged": 1.0})
        if self.sink is not None:
            self.sink.event(event)

    def progress(self, fraction: float) -> None:
        now = time.monotonic()
        if self.sink is not None and (fraction >= 1.0 or now - self._reported >= PROGRESS_EVERY_S):
            self._reported = now
            self.sink.progress(min(1.0, max(0.0, fraction)))

    def note(self, text: str) -> None:
        """Tell the sink what the run is waiting for (not recorded: it is not a result); a note
        repeated unchanged is told once."""
        if text == self._noted:
            return
        self._noted = text
        if self.sink is not None and hasattr(self.sink, "note"):
            self.sink.note(text)

    def should_stop(self) -> bool:
        if not self.stopped and self.sink is not None and self.sink.stop_requested():
            self.stopped = True
        return self.stopped

    def drive(self, phases: list[list[Arm]]) -> None:
        """Run the phases in order; within a phase, advance the arms side by side.

        Progress is the work done over the work done and still to do (steps × cost): an arm that
        ends early (it diverged) takes its unrun steps off what is left, rather than counting them
        as done, so the bar moves with the time the run still needs."""
        later = [sum(arm.steps * arm.cost for arm in phase) for phase in phases]
        done = 0.0
        for index, phase in enumerate(phases):
            live = {id(arm): arm for arm in phase}
            left = {id(arm): arm.steps for arm in phase}
            after = sum(later[index + 1:])
            try:
                while live:
                    for key, arm in list(live.items()):
                        item = next(arm.records, StopIteration)
                        if isinstance(item, Note):  # not a step: no progress, but Stop is heard
                            self.note(item.text)
                            if self.should_stop():
                                return
                            continue
                        if item is StopIteration or self._take(arm, item):
                            del live[key]  # its unrun steps will not run: no longer work to do
                            if item is not StopIteration and arm.needed:
                                return
                            continue
                        left[key] -= 1
                        if left[key] >= 0:
                            done += arm.cost
                        if self.should_stop():
                            return
                    to_do = sum(max(0, left[key]) * arm.cost for key, arm in live.items()) + after
                    self.progress(done / (done + to_do) if done + to_do else 1.0)
            finally:
                for arm in live.values():
                    arm.records.close()  # a stopped run still runs each loop's `finally`
        self.progress(1.0)

    def _take(self, arm: Arm, item: Item) -> bool:
        """Report one item; True when it ends the arm (it diverged)."""
        if isinstance(item, list):  # a batched step: each arm's record under its name; the group ends itself
            for named in item:
                self._take(arm, named)
            return False
        name = arm.name
        if isinstance(item, tuple):
            name, item = item
        if isinstance(item, StepRecord):
            self.add(name, item.step, item.metrics)
        elif isinstance(item, Diverged):
            self.event(Event(name, item.step, "diverged", item.message))
            return name == arm.name
        return False

    def frame(self) -> pd.DataFrame:
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
