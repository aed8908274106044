"""The run manager: training happens here, in a background thread, never in the
Streamlit script thread.

A `RunHandle` is one run. The page keeps its handle in `st.session_state` (so two
browser tabs own two independent handles) and polls `snapshot()` a few times a second.
The handle is also the scenario's sink: the training thread appends rows under a lock,
reads the stop flag between logged steps, and on the way out saves the run — finished,
diverged, stopped or failed — to the store. A run that raises keeps its partial rows and
reports its error; nothing is left running.
"""
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from explorer.serving import save_result
from explorer.store import COMPLETE, RunStore, StoredRun
from scenarios.base import COLUMNS, Event, Scenario, ScenarioConfig


@dataclass(frozen=True)
class Snapshot:
    frame: pd.DataFrame
    status: str            # running | finished | diverged | stopped | failed
    progress: float        # 0..1
    events: list[dict[str, Any]]
    error: str | None
    elapsed_s: float
    run_id: str | None     # set once the run is in the store
    from_store: bool = False
    created_at: float | None = None

    @property
    def running(self) -> bool:
        return self.status == "running"


class RunHandle:
    """One run of one scenario config, in its own daemon thread."""

    def __init__(self, scenario: Scenario, config: ScenarioConfig, store: RunStore | None = None) -> None:
        self.scenario = scenario
        self.config = config
        self.store = store
        self._rows: list[tuple[str, int, str, float]] = []
        self._events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._first_record = threading.Event()
        self._progress = 0.0
        self._status = "running"
        self._error: str | None = None
        self._traceback: str | None = None
        self._run_id: str | None = None
        self._from_store = False
        self._created_at: float | None = None
        self._started = time.perf_counter()
        self._ended: float | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------
    @classmethod
    def start(cls, scenario: Scenario, config: ScenarioConfig, store: RunStore | None = None) -> "RunHandle":
        handle = cls(scenario, config, store)
        handle._thread = threading.Thread(target=handle._work, name=f"run-{scenario.id}", daemon=True)
        handle._thread.start()
        return handle

    @classmethod
    def from_stored(cls, scenario: Scenario, stored: StoredRun, store: RunStore) -> "RunHandle":
        """A finished handle that shows a stored run at once, without training."""
        handle = cls(scenario, scenario.validate(stored.config), store)
        handle._rows = list(store.frame(stored.run_id).itertuples(index=False, name=None))
        handle._events = store.events(stored.run_id)
        handle._status, handle._error, handle._progress = stored.status, stored.error, 1.0
        handle._run_id, handle._from_store, handle._created_at = stored.run_id, True, stored.created_at
        handle._ended = handle._started + stored.duration_s
        return handle

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread; True when it has ended."""
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def wait_for_first_record(self, timeout: float) -> bool:
        """Block up to `timeout` seconds until the run has a row (or has ended)."""
        deadline = time.perf_counter() + timeout
        while not self._first_record.wait(0.02):
            if self._ended is not None or time.perf_counter() > deadline:
                return False
        return True

    @property
    def traceback(self) -> str | None:
        return self._traceback

    def _work(self) -> None:
        status, error, summary = "failed", None, {}
        try:
            from engines.runtime import configure  # torch loads with the first run, not with the page
            configure()
            result = self.scenario.run(self.config, sink=self)
            status, summary = result.status, result.summary
        except Exception as exc:  # the page shows it; the thread must not die silently
            error = "".join(traceback.format_exception_only(exc)).strip()
            self._traceback = traceback.format_exc()
        ended = time.perf_counter()
        run_id = None
        if self.store is not None:
            try:
                run_id = save_result(self.store, self.scenario, self.config, status, self._frame(), summary,
                                     self._events_copy(), ended - self._started, error)
            except Exception as exc:
                error = (error + "; " if error else "") + f"could not save to the run store: {exc}"
        with self._lock:
            self._status, self._error, self._run_id, self._ended = status, error, run_id, ended
            if status in COMPLETE:
                self._progress = 1.0

    # --- the sink the scenario reports to -----------------------------------------------
    def add(self, rows: list[tuple[str, int, str, float]]) -> None:
        with self._lock:
            self._rows.extend(rows)
        self._first_record.set()

    def event(self, event: Event) -> None:
        with self._lock:
            self._events.append({"arm": event.arm, "step": event.step, "kind": event.kind, "message": event.message})

    def progress(self, fraction: float) -> None:
        self._progress = fraction

    def stop_requested(self) -> bool:
        return self._stop.is_set()

    # --- what the page reads ---------------------------------------------------------------
    def _frame(self) -> pd.DataFrame:
        with self._lock:
            rows = list(self._rows)
        return pd.DataFrame(rows, columns=COLUMNS)

    def _events_copy(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._events)

    def snapshot(self) -> Snapshot:
        frame = self._frame()
        with self._lock:
            end = self._ended if self._ended is not None else time.perf_counter()
            return Snapshot(frame, self._status, self._progress, list(self._events), self._error,
                            end - self._started, self._run_id, self._from_store, self._created_at)
