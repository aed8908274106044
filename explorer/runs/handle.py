"""A page run: its handle, fed by a warm worker's stream, and what the page reads from it.

A `RunHandle` is one run of one config. The page keeps it in `st.session_state` (so two
browser tabs own two independent handles) and reads `snapshot()` from its live view.
Training happens in a worker of the run backend (explorer/runs/backend.py: the local pool,
explorer/runs/pool.py, or Ray); the handle is the backend's job: it receives the worker's messages (rows, events, progress, notes, done) into
the one row buffer the page draws from, and on `done` saves the run — finished, diverged,
stopped or failed — to the store. Two things are never stored: a refused config (the
scenario said it cannot run here; nothing ran) and a run that ended before its first
record (or was superseded by a newer config, `stop(keep=False)`).
"""
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pandas as pd

from explorer.runs.serving import save_result
from explorer.runs.store import COMPLETE, RunStore, StoredRun
from scenarios.base import COLUMNS, STATUSES, Scenario, ScenarioConfig

FINAL = (*STATUSES, "refused")  # how a page run can end: a run's statuses, or not run at all
EMPTY = pd.DataFrame(columns=COLUMNS)


@dataclass(frozen=True)
class Snapshot:
    frame: pd.DataFrame
    status: str            # running | finished | diverged | stopped | failed | refused
    progress: float        # 0..1
    events: list[dict[str, Any]]
    error: str | None
    elapsed_s: float
    run_id: str | None     # set once the run is in the store
    from_store: bool = False
    created_at: float | None = None
    waiting: str | None = None   # what a running run waits for ("queued (1 ahead)", "starting 3 rank processes")
    steps: int = 0               # the last step recorded, plus one
    step_now: int | None = None  # the newest rows' last step, plus one: where the arm training now is
    arm_now: str | None = None   # that arm, once a second arm trains (arms batched together: None)

    @property
    def running(self) -> bool:
        return self.status == "running"


class RunHandle:
    """One run of one scenario config, trained by a worker of `pool` (a run backend). `session`: whose
    run it is (a browser tab), for the backend's fair queue."""

    def __init__(self, scenario: Scenario, config: ScenarioConfig, store: RunStore | None = None,
                 pool=None, session: str = "") -> None:
        self.id = uuid.uuid4().hex[:12]
        self.session = session
        self.scenario = scenario
        self.config = config       # the config the page draws it with (a view field may change; the key never does)
        self.store = store
        self.pool = pool
        self.fresh = False         # a retrain: no stored grid point is reused
        self._rows: list[tuple[str, int, str, float]] = []
        self._events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._ended = threading.Event()
        self._first_record = threading.Event()
        self._frame_cache: tuple[int, pd.DataFrame] = (0, EMPTY)
        self._steps = 0
        self._step_now: int | None = None
        self._arm_now: str | None = None
        self._arms_seen: set[str] = set()
        self._progress = 0.0
        self._status = "running"
        self._note: str | None = None
        self._error: str | None = None
        self._traceback: str | None = None
        self._run_id: str | None = None
        self._from_store = False
        self._created_at: float | None = None
        self._keep = True
        self._submitted = time.perf_counter()
        self._started: float | None = None      # when a worker took it
        self._ended_at: float | None = None
        self.train_seconds: float | None = None  # the worker's own time for `Scenario.run`, once done

    # --- lifecycle ---------------------------------------------------------------------
    @classmethod
    def start(cls, scenario: Scenario, config: ScenarioConfig, store: RunStore | None = None, *,
              pool, session: str = "", fresh: bool = False) -> "RunHandle":
        """Train `config` on `pool`; `fresh`: retrain everything, a grid's stored points too."""
        handle = cls(scenario, config, store, pool, session)
        handle.fresh = fresh
        pool.submit(handle)
        return handle

    @classmethod
    def from_stored(cls, scenario: Scenario, stored: StoredRun, store: RunStore,
                    frame: pd.DataFrame | None = None) -> "RunHandle":
        """A finished handle that shows a stored run at once, without training."""
        handle = cls(scenario, scenario.validate(stored.config), store)
        frame = store.frame(stored.run_id) if frame is None else frame
        # Only counted from here on: the frame is built already, and a stored run gets no more rows
        # (turning a long frame into tuples took ~50 ms of each page run that showed one).
        handle._rows = [None] * len(frame)
        handle._frame_cache = (len(frame), frame)
        handle._steps = int(frame["step"].max()) + 1 if len(frame) else 0
        handle._events = store.events(stored.run_id)
        handle._status, handle._error, handle._progress = stored.status, stored.error, 1.0
        handle._run_id, handle._from_store, handle._created_at = stored.run_id, True, stored.created_at
        handle._started = handle._submitted
        handle._ended_at = handle._submitted + stored.duration_s
        handle._ended.set()
        return handle

    @classmethod
    def of_result(cls, scenario: Scenario, config: ScenarioConfig, result) -> "RunHandle":
        """A finished handle holding a run trained elsewhere (`Scenario.run` in this process: tests, notebooks)."""
        handle = cls(scenario, config)
        handle._rows = list(result.frame.itertuples(index=False, name=None))
        handle._status, handle._progress, handle._ended_at = result.status, 1.0, time.perf_counter()
        handle._events = [vars(event) for event in result.events]
        handle._ended.set()
        return handle

    def stop(self, keep: bool = True) -> None:
        """End the run within a second. It is stored only if it had records when asked (what the
        page showed), and not at all with `keep=False` (superseded by a newer config)."""
        with self._lock:
            self._keep = keep and bool(self._rows)
        if self.pool is not None and not self._ended.is_set():
            self.pool.cancel(self)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the run to end (and be stored); True when it has."""
        return self._ended.wait(timeout)

    def wait_for_first_record(self, timeout: float, steps: int = 1) -> bool:
        """Block up to `timeout` seconds until the run has rows of `steps` steps (steps 0 … steps-1;
        2: a line's first two points), or has ended; True when it has them. A run queued for a
        worker (all busy, or none warm yet) returns at once: no record comes that soon."""
        if self.pool is not None and self._started is None and self.pool.waiting(self) is not None:
            return False
        deadline = time.perf_counter() + timeout
        while not (self._first_record.wait(0.01) and self._steps >= steps):
            if self._ended.is_set() or time.perf_counter() > deadline:
                return False
            if self._first_record.is_set():
                time.sleep(0.01)  # rows came, not yet of enough steps (the wait above no longer sleeps)
        return True

    @property
    def traceback(self) -> str | None:
        return self._traceback

    # --- the pool's job ---------------------------------------------------------------------
    def request(self) -> dict[str, Any]:
        """What a worker is sent; `store`: the run store whose point cache a grid's points may use (not
        for a retrain, which trains every point again)."""
        store = self.store is not None and not getattr(self.store, "read_only", False) and not self.fresh
        return {"module": type(self.scenario).__module__, "cls": type(self.scenario).__qualname__,
                "config": self.config.model_dump(mode="json"), "ranks": self.scenario.rank_processes(self.config),
                **({"store": str(self.store.path)} if store else {})}

    def receive(self, message: dict[str, Any]) -> None:
        """One message of the worker's stream (called from the pool's threads)."""
        kind = message["kind"]
        with self._lock:
            if self._ended_at is not None:
                return
            self._started = self._started or time.perf_counter()
            if kind == "rows":
                self._rows.extend(tuple(row) for row in message["rows"])
                self._step_now = 1 + max(row[1] for row in message["rows"])
                arms = {row[0] for row in message["rows"]}
                self._arms_seen |= arms  # named once a second arm trains: its step starts again from 0
                self._arm_now = next(iter(arms)) if len(arms) == 1 and len(self._arms_seen) > 1 else None
                self._steps = max(self._steps, self._step_now)
                self._note = None
                self._first_record.set()
            elif kind == "event":
                self._events.append(message["event"])
            elif kind == "progress":
                self._progress = message["fraction"]
            elif kind == "note":
                self._note = message["text"]
        if kind == "done":
            self._finish(message)

    def _finish(self, done: dict[str, Any]) -> None:
        status, error = done["status"], done.get("error")
        frame = self._frame()
        run_id = None
        stored = self.store is not None and status != "refused" and (
            status != "stopped" or (self._keep and not frame.empty))
        if stored:
            summary = done.get("summary") or self._summary(frame, status)
            try:
                run_id = save_result(self.store, self.scenario, self.config, status, frame, summary,
                                     list(self._events), done.get("seconds", self._elapsed()), error)
            except Exception as exc:
                error = (error + "; " if error else "") + f"could not save to the run store: {exc}"
        with self._lock:
            self.train_seconds = done.get("seconds")
            self._status, self._error, self._traceback = status, error, done.get("traceback")
            self._run_id, self._ended_at, self._note = run_id, time.perf_counter(), None
            if status in COMPLETE:
                self._progress = 1.0
        self._ended.set()

    def _summary(self, frame: pd.DataFrame, status: str) -> dict[str, Any]:
        """A run that ended without its worker's summary (ended by Stop, or crashed): summarize here."""
        try:
            summary = self.scenario.summarize(frame, self.config)
        except Exception:
            summary = {}
        return {**summary, "status": status}

    # --- what the page reads ---------------------------------------------------------------
    def _frame(self) -> pd.DataFrame:
        """The rows as a frame, rebuilt only when rows arrived since the last call."""
        with self._lock:
            count, frame = self._frame_cache
            if count == len(self._rows):
                return frame
            rows = list(self._rows)
        frame = pd.DataFrame(rows, columns=COLUMNS)
        with self._lock:
            if len(rows) > self._frame_cache[0]:
                self._frame_cache = (len(rows), frame)
        return frame

    def rows_count(self) -> int:
        return len(self._rows)

    @property
    def running(self) -> bool:
        return not self._ended.is_set()

    def _elapsed(self) -> float:
        start = self._started if self._started is not None else self._submitted
        end = self._ended_at if self._ended_at is not None else time.perf_counter()
        return end - start

    def snapshot(self, with_frame: bool = True) -> Snapshot:
        """The run now; `with_frame=False` leaves the frame empty (a status line needs none)."""
        frame = self._frame() if with_frame else EMPTY
        waiting = self.pool.waiting(self) if self.pool is not None and self._started is None else None
        with self._lock:
            return Snapshot(frame, self._status, self._progress, list(self._events), self._error,
                            self._elapsed(), self._run_id, self._from_store, self._created_at,
                            waiting or self._note, self._steps, self._step_now, self._arm_now)
