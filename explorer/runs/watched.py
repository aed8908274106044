"""A page's handle on a watched run: what a `RunHandle` offers the live view, read from the store.

A run watched in a person's own script is trained there and written into the store as it goes
(explorer/runs/growing.py). The page follows it with this handle: the live view, the feed, the
exports and the overlays call `running`, `rows_count()` and `snapshot()` as they would on a
page's own run, and each answer reads what the store gained since the last one (at most every
`POLL_S`; only the new rows). The page cannot stop it: the script owns it.
"""
import threading
import time
import uuid
from typing import Any

import pandas as pd

from explorer.runs.growing import records_since
from explorer.runs.handle import Snapshot
from explorer.runs.liveness import RUNNING
from explorer.runs.store import RunStore, StoredRun
from scenarios.base import COLUMNS, Scenario

POLL_S = 0.5  # the store is read at most this often per handle (its writer flushes every 0.5 s)


class WatchedHandle:
    """One watched run, as the store holds it now."""

    pool = None
    traceback = None

    def __init__(self, scenario: Scenario, stored: StoredRun, store: RunStore) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.scenario, self.store, self.run_id = scenario, store, stored.run_id
        self.config = scenario.validate(stored.config)
        self._stored = stored
        self._frame = pd.DataFrame(columns=COLUMNS)
        self._after = 0
        self._events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._polled = -POLL_S
        self._refresh()

    def _refresh(self) -> None:
        """Read what the store gained, unless the run has ended and was read after it ended."""
        with self._lock:
            now = time.monotonic()
            if (self._stored.status != RUNNING and self._polled >= 0) or now - self._polled < POLL_S:
                return
            stored = self.store.get(self.run_id) or self._stored  # (deleted meanwhile: keep what was read)
            new, self._after = records_since(self.store, self.run_id, self._after)
            if len(new):
                self._frame = pd.concat([self._frame, new], ignore_index=True) if len(self._frame) else new
            self._events = self.store.events(self.run_id)
            self._stored, self._polled = stored, now

    @property
    def name(self) -> str | None:
        return self._stored.name

    @property
    def status(self) -> str:
        self._refresh()
        return self._stored.status

    @property
    def running(self) -> bool:
        return self.status == RUNNING

    def rows_count(self) -> int:
        self._refresh()
        return len(self._frame)

    def stop(self, keep: bool = True) -> None:
        """Nothing: the run belongs to the script that trains it."""

    def join(self, timeout: float | None = None) -> bool:
        return not self.running

    def wait_for_first_record(self, timeout: float, steps: int = 1) -> bool:
        return self.rows_count() > 0

    def snapshot(self, with_frame: bool = True) -> Snapshot:
        self._refresh()
        with self._lock:
            stored, frame = self._stored, self._frame
            steps = int(frame["step"].max()) + 1 if len(frame) else 0
            return Snapshot(frame if with_frame else frame.iloc[:0], stored.status, 0.0, list(self._events),
                            stored.error, stored.duration_s, stored.run_id, False, stored.created_at, None, steps)
