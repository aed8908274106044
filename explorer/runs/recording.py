"""The writer of a watched run: its records go from the training thread to the run store in the background.

The training thread only appends each step's metrics (one dict) to a list (`add`, `event`); it never
waits for the store. A writer thread opens the store (importing pandas and the scenario registry there, off the
person's training path), adds the run's row, and every `FLUSH_S` moves what was added into it in
one transaction, beating the run's heartbeat at least every `HEARTBEAT_S` (explorer/runs/liveness.py).

When the store cannot be opened or written (a read-only disk, a file that is not a store, a lock
held past SQLite's 30 s wait) the writer says so once on stderr and keeps the records in memory,
trying again every `RETRY_S`: the person's training goes on, and nothing is dropped while fewer
than `MAX_PENDING` rows wait.
"""
import math
import sys
import threading
import time
from typing import Any

from explorer.plaintext import one_line
from explorer.runs.liveness import HEARTBEAT_S

FLUSH_S = 0.5          # how often new records reach the store (the page follows at this pace)
RETRY_S = 5.0          # how often a store that failed is tried again
MAX_PENDING = 5_000_000  # rows kept in memory while the store cannot take them (~0.5 GB); past it, dropped
SCENARIO = "watched"


class Recorder:
    """One watched run's rows and events, written by a background thread; `close` says how it ended."""

    def __init__(self, config: dict[str, Any], name: str | None, arm: str, path: str | None = None) -> None:
        self.config, self.name, self.arm, self.path = config, name, arm, path
        self.run_id: str | None = None
        self.problem: str | None = None    # why the store could not be written (said once on stderr)
        self.diverged_at: int | None = None
        self.last_loss: tuple[int, float] | None = None
        self.steps = 0
        self.started_at = time.time()  # the run's start: its row is added by the writer up to FLUSH_S later
        self._pending: list[tuple[int, dict[str, float]]] = []  # (step, its metrics), in the order added
        self._pending_rows = 0
        self._events: list[dict[str, Any]] = []
        self._dropped = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._waiters: list[threading.Event] = []
        self._ending: tuple[str, str | None] | None = None  # (status, error) once `close` is called
        self._ended = threading.Event()
        self._store = None
        self._thread = threading.Thread(target=self._loop, name="explorer-watch-writer", daemon=True)
        self._thread.start()

    # --- the training thread ----------------------------------------------------------------------
    def add(self, step: int, metrics: dict[str, float]) -> None:
        metrics = {name: float(value) for name, value in metrics.items()}
        loss = metrics.get("loss")
        self.steps = max(self.steps, step + 1)
        if loss is not None:
            self.last_loss = (step, loss)
            if not math.isfinite(loss) and self.diverged_at is None:  # a result, not a crash of the script
                self.diverged_at = step
                metrics["diverged"] = 1.0
                self.event("diverged", step, f"diverged at step {step}: loss is {loss}")
        with self._lock:
            if self._pending_rows + len(metrics) > MAX_PENDING:
                self._dropped += len(metrics)
                return
            self._pending.append((step, metrics))
            self._pending_rows += len(metrics)

    def event(self, kind: str, step: int, message: str) -> None:
        with self._lock:
            self._events.append({"arm": self.arm, "step": step, "kind": kind, "message": message})

    def flush(self, timeout: float | None = 60.0) -> bool:
        """Write what was added, now; True once the writer has tried (it may have failed: `problem`)."""
        if not self._thread.is_alive():  # the run has ended: nothing more is written
            return True
        done = threading.Event()
        with self._lock:
            self._waiters.append(done)
        self._wake.set()
        return done.wait(timeout)

    def close(self, status: str, error: str | None = None, timeout: float = 30.0) -> bool:
        """Write the rest and how the run ended; True when the store has it (False: not stored, or the
        store still waits on a lock after `timeout`: the run will read as incomplete)."""
        self._ending = (status, error)
        self._wake.set()
        self._thread.join(timeout)
        return self._ended.is_set()

    # --- the writer thread ---------------------------------------------------------------------------
    def _loop(self) -> None:
        beat = 0.0
        while True:
            self._wake.wait(FLUSH_S)
            self._wake.clear()
            ending = self._ending
            with self._lock:
                waiters, self._waiters = self._waiters, []
            failed = False
            try:
                if self._store is None:
                    self._open()
                rows, events = self._take()
                if rows or events or time.monotonic() - beat > HEARTBEAT_S or ending:
                    self._write(rows, events)
                    beat = time.monotonic()
                if ending:
                    self._end(*ending)
                    self._ended.set()
            except Exception as error:
                self._warn(error)
                failed = True
            for waiter in waiters:
                waiter.set()
            if ending:
                return
            if failed:
                self._wake.wait(RETRY_S)

    def _open(self) -> None:
        from explorer.runs.growing import begin
        from explorer.runs.store import RunStore
        from scenarios import get_scenario
        store = RunStore(self.path)
        self.run_id = begin(store, SCENARIO, self.config, get_scenario(SCENARIO).code_version(), self.name,
                            self.started_at)
        self._store = store

    def _take(self) -> tuple[list, list]:
        with self._lock:
            rows, self._pending, self._pending_rows = self._pending, [], 0
            events, self._events = self._events, []
        return rows, events

    def _write(self, rows: list, events: list) -> None:
        from explorer.runs.growing import append_steps
        try:
            append_steps(self._store, self.run_id, self.arm, rows, events)
        except BaseException:
            with self._lock:  # put them back, ahead of anything added meanwhile
                self._pending[:0], self._events[:0] = rows, events
                self._pending_rows += sum(len(metrics) for _, metrics in rows)
            raise
        if self.problem is not None:
            print(f"explorer.watch: the run store takes records again; run {self.run_id} is complete in it",
                  file=sys.stderr)
            self.problem = None

    def _end(self, status: str, error: str | None) -> None:
        from explorer.runs.growing import end
        headline = {"final loss": self.last_loss[1] if self.last_loss else None, "steps": self.steps}
        if self._dropped:
            dropped = f"{self._dropped} records were dropped while the store was unusable"
            error = f"{error}; {dropped}" if error else dropped
        end(self._store, self.run_id, status, {"headline": headline}, error)

    def _warn(self, error: Exception) -> None:
        if self.problem is not None:
            return
        self.problem = one_line(f"{type(error).__name__}: {error}")
        where = self.path or "the run store (EXPLORER_STORE or the default)"
        print(one_line(f"explorer.watch: cannot write to {where}: {self.problem}. Training goes on; this run's "
                       f"records are kept in memory and written when the store takes them."), file=sys.stderr)

    # --- reading back --------------------------------------------------------------------------------
    def rows(self) -> list[tuple[str, int, str, float]]:
        """Every record so far: those in the store, then those still waiting (after one flush)."""
        self.flush()
        stored = []
        if self._store is not None and self.run_id is not None:
            stored = list(self._store.frame(self.run_id).itertuples(index=False, name=None))
        with self._lock:
            return stored + [(self.arm, step, name, value) for step, metrics in self._pending
                             for name, value in metrics.items()]
