"""The run store: finished, stopped, diverged and failed runs in one SQLite file.

Embedded by default at ~/.cache/training-dynamics-explorer/runs.sqlite3; set
`EXPLORER_STORE` to another path. WAL mode lets the page read while a run is saved, and
several processes write at once (each waits its turn through `busy_timeout`).

A run is written in one transaction at the end — its row, its records and its events
together — so a process killed mid-run leaves nothing behind that looks complete.
Results are keyed by scenario id + canonical config + code version: the same config on
the same code is served from here instead of being trained again.

Non-finite values are kept as such. SQLite stores a NaN as NULL, so a record's `value` is
NULL exactly when it is not finite, and its `nonfinite` column says which it was ('nan',
'inf', '-inf'); reading puts the float back. (Schema 1 had `value REAL NOT NULL`, so one
NaN made a run unsaveable; opening a schema-1 store migrates it, in one transaction.)
A run may be given a name (the Runs page); schema 3 added the column, and opening a schema-1
or schema-2 store adds it, empty, in the same transaction. A run watched in a person's own script
is the one exception to "written at its end": it grows while it goes (explorer/runs/growing.py),
and reads as `running` while its writer lives, `incomplete` once it was killed.
"""
import hashlib
import itertools
import json
import math
import os
import sqlite3
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from explorer.runs.liveness import LIVE, RUNNING, settled
from explorer.runs.store_schema import MIGRATE_1_TO_2, MIGRATE_2_TO_3, SCHEMA, SCHEMA_VERSION

COMPLETE = ("finished", "diverged")  # statuses whose result can be served again
DEFAULT_PATH = Path.home() / ".cache" / "training-dynamics-explorer" / "runs.sqlite3"
KEPT_ROWS = 1_000_000  # records of recently saved or read runs kept in memory per store object (~70 MB)

RUN_COLUMNS = ("run_id, scenario, config_json, key, code_version, status, created_at, duration_s, summary_json, "
               "error, name")
NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class StoreError(ValueError):
    """The run store cannot be opened (a bad EXPLORER_STORE, a file that is not a store). One line."""


def _record_rows(run_id: str, frame: pd.DataFrame) -> Iterator[tuple]:
    """The rows of `frame` (as `save` types it) as the records table's: a finite value as (value, NULL), any other as
    (NULL, 'nan' | 'inf' | '-inf'). Built a column at a time (row by row took ~60 ms of the
    ~100 ms that saving 10k records took)."""
    values = frame["value"].to_numpy(dtype=float)
    finite = np.isfinite(values)
    value = values.astype(object)
    value[~finite] = None
    nonfinite = np.full(len(values), None, dtype=object)
    nonfinite[~finite] = np.where(np.isnan(values[~finite]), "nan", np.where(values[~finite] > 0, "inf", "-inf"))
    return zip(itertools.repeat(run_id), frame["arm"].tolist(), frame["step"].tolist(), frame["metric"].tolist(),
               value.tolist(), nonfinite.tolist())


def canonical(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def result_key(scenario: str, config: dict[str, Any], code_version: str) -> str:
    return hashlib.sha256(f"{scenario}\n{canonical(config)}\n{code_version}".encode()).hexdigest()[:20]


@dataclass(frozen=True)
class StoredRun:
    run_id: str
    scenario: str
    config: dict[str, Any]
    code_version: str
    status: str
    created_at: float
    duration_s: float
    summary: dict[str, Any]
    error: str | None
    name: str | None = None


class RunStore:
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path or os.environ.get("EXPLORER_STORE") or DEFAULT_PATH)
        # A stored run's records never change: those saved or read through this object are kept
        # (reading 10k rows back took ~40 ms of every page run that showed a run again).
        self._frames: OrderedDict[str, pd.DataFrame] = OrderedDict()
        self._frames_lock = threading.Lock()
        # Two processes opening a new store at once can meet SQLite's "locked" answer without its
        # busy handler being asked (switching to WAL, or a read lock that must upgrade): retry.
        deadline = time.monotonic() + 30
        while True:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._create()
                return
            except sqlite3.OperationalError as error:
                if "locked" in str(error) and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                raise self._error(error) from None
            except (OSError, sqlite3.Error) as error:  # a directory, a read-only place, not a database
                raise self._error(error) from None

    def _error(self, error: Exception) -> "StoreError":
        reason = getattr(error, "strerror", None) or str(error)
        return StoreError(" ".join(f"the run store {self.path} cannot be used: {reason} "
                                   "(set EXPLORER_STORE to another file)".split()))

    def _create(self) -> None:
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")  # persistent: set once, kept by the file
            db.execute("BEGIN IMMEDIATE")  # one opener at a time creates or migrates
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(f"the run store {self.path} has schema version {version}; this code knows up to "
                                 f"{SCHEMA_VERSION} (set EXPLORER_STORE to another file)")
            if version == 1:
                _script(db, MIGRATE_1_TO_2)
            if version in (1, 2):
                db.execute(MIGRATE_2_TO_3)
            _script(db, SCHEMA)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")  # an error before this: closing the connection rolls back

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            db.execute("PRAGMA busy_timeout=30000")
            db.execute("PRAGMA foreign_keys=ON")
            yield db
        finally:
            db.close()

    def save(self, scenario: str, config: dict[str, Any], code_version: str, status: str,
             frame: pd.DataFrame, summary: dict[str, Any], events: list[dict[str, Any]] = (),
             duration_s: float = 0.0, error: str | None = None, key: dict[str, Any] | None = None) -> str:
        """Write one run, all or nothing. Returns its run id. `key` is the part of the config the
        result depends on (the scenario's `key_of`: view fields left out); default the whole config."""
        run_id = uuid.uuid4().hex[:12]
        frame = pd.DataFrame({"arm": frame["arm"].astype(str), "step": frame["step"].astype("int64"),
                              "metric": frame["metric"].astype(str), "value": frame["value"].astype(float)})
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(f"INSERT INTO runs ({RUN_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,NULL)", (
                    run_id, scenario, canonical(config), result_key(scenario, config if key is None else key, code_version),
                    code_version,
                    status, time.time(), duration_s, json.dumps(summary), error))
                db.executemany("INSERT INTO records VALUES (?,?,?,?,?,?)", _record_rows(run_id, frame))
                db.executemany("INSERT INTO events VALUES (?,?,?,?,?)",
                               ((run_id, e["arm"], e["step"], e["kind"], e["message"]) for e in events))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        self._keep(run_id, frame)
        return run_id

    def lookup(self, scenario: str, key: dict[str, Any], code_version: str) -> StoredRun | None:
        """The newest complete run of exactly this key (config without view fields) on this code, if any."""
        with self._connect() as db:
            row = db.execute(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE key = ? AND status IN ({','.join('?' * len(COMPLETE))}) "
                "ORDER BY created_at DESC LIMIT 1",
                (result_key(scenario, key, code_version), *COMPLETE)).fetchone()
        return _stored(row) if row else None

    def get(self, run_id: str) -> StoredRun | None:
        with self._connect() as db:
            row = db.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return _stored(row) if row else None

    def frame(self, run_id: str) -> pd.DataFrame:
        """The run's records as saved: `arm, step, metric, value`, NaN and ±inf included. Each call
        gets a frame of its own (sharing the kept data: pandas copies on write)."""
        with self._frames_lock:
            kept = self._frames.get(run_id)
            if kept is not None:
                self._frames.move_to_end(run_id)
                return kept.copy(deep=False)
        with self._connect() as db:
            frame = pd.read_sql_query("SELECT arm, step, metric, value, nonfinite FROM records WHERE run_id = ? "
                                      "ORDER BY rowid", db, params=(run_id,))
            status = db.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        nonfinite = frame.pop("nonfinite")
        frame["value"] = frame["value"].astype(float).mask(nonfinite.notna(), nonfinite.map(NONFINITE))
        if len(frame) and status and status[0] != RUNNING:  # an unknown run id, or a run still growing: not kept
            self._keep(run_id, frame)
        return frame.copy(deep=False)

    def _keep(self, run_id: str, frame: pd.DataFrame) -> None:
        with self._frames_lock:
            self._frames[run_id] = frame
            while len(self._frames) > 1 and sum(map(len, self._frames.values())) > KEPT_ROWS:
                self._frames.popitem(last=False)

    def events(self, run_id: str) -> list[dict[str, Any]]:
        with self._connect() as db:
            rows = db.execute("SELECT arm, step, kind, message FROM events WHERE run_id = ? ORDER BY rowid",
                              (run_id,)).fetchall()
        return [dict(zip(("arm", "step", "kind", "message"), row)) for row in rows]

    def list_runs(self, scenario: str | None = None, limit: int = 200, status: str | None = None) -> list[StoredRun]:
        """The newest runs first, of one scenario and one status when given (`running` and
        `incomplete` are both written `running`: which one a run is, is read when it is read)."""
        written = RUNNING if status in LIVE else status
        wheres = [(column, value) for column, value in (("scenario", scenario), ("status", written)) if value]
        where = " WHERE " + " AND ".join(f"{c} = ?" for c, _ in wheres) if wheres else ""
        query = f"SELECT {RUN_COLUMNS} FROM runs" + where
        with self._connect() as db:
            rows = db.execute(query + " ORDER BY created_at DESC LIMIT ?", (*(v for _, v in wheres), limit)).fetchall()
        return [stored for stored in map(_stored, rows) if status is None or stored.status == status]

    def count(self, scenario: str | None = None) -> int:
        query, params = "SELECT COUNT(*) FROM runs", ()
        if scenario:
            query, params = query + " WHERE scenario = ?", (scenario,)
        with self._connect() as db:
            return db.execute(query, params).fetchone()[0]

    def record_counts(self, run_ids: list[str]) -> dict[str, int]:
        """How many records each run holds (0 for a run that stopped before its first)."""
        counts = dict.fromkeys(run_ids, 0)
        with self._connect() as db:
            for start in range(0, len(run_ids), 500):
                chunk = run_ids[start:start + 500]
                rows = db.execute(f"SELECT run_id, COUNT(*) FROM records WHERE run_id IN ({','.join('?' * len(chunk))}) "
                                  "GROUP BY run_id", chunk).fetchall()
                counts.update(dict(rows))
        return counts

    def rename(self, run_id: str, name: str | None) -> None:
        """Give a run a name (stripped; empty or None clears it)."""
        name = " ".join((name or "").split())[:80] or None
        with self._connect() as db:
            db.execute("UPDATE runs SET name = ? WHERE run_id = ?", (name, run_id))

    def delete(self, run_id: str) -> None:
        with self._connect() as db:
            db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
        with self._frames_lock:
            self._frames.pop(run_id, None)


def _script(db: sqlite3.Connection, sql: str) -> None:
    """Statements one by one inside the caller's transaction (`executescript` would commit it)."""
    for statement in sql.split(";"):
        if statement.strip():
            db.execute(statement)


def _stored(row: tuple) -> StoredRun:
    run_id, scenario, config_json, _key, code_version, status, created_at, duration_s, summary_json, error, name = row
    summary = json.loads(summary_json)
    return StoredRun(run_id, scenario, json.loads(config_json), code_version,
                     settled(status, summary, created_at, duration_s), created_at, duration_s, summary, error, name)
