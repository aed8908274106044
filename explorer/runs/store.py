"""The run store: every run in one SQLite file, embedded by default in the platform's user data
folder (explorer/runs/store_home.py; `EXPLORER_STORE` names another). WAL mode lets the page read
while a run is saved, and several processes write at once (each waits through `busy_timeout`).

A run is written in one transaction at its end (row, records, events), so a process killed mid-run
leaves nothing that looks complete; but a run watched in a person's own script grows while it goes
(explorer/runs/growing.py) and reads `running` while its writer lives, `incomplete` once it was
killed. Results are keyed by scenario id + canonical config + code version: the same config on the
same code is served from here instead of being trained again.

Non-finite values are kept: SQLite stores a NaN as NULL, so `value` is NULL exactly when it is not
finite and `nonfinite` says which ('nan', 'inf', '-inf'); reading puts the float back. Opening a
schema-1 store (`value REAL NOT NULL`) or schema-2 one (no `name` column) migrates it in one
transaction. A store that cannot be used says so in one line (`StoreError`) with what to do: at
open (not a database, a newer schema, a missing column, damage found by SQLite's quick_check) or
when a later read meets damage. A store this process cannot write is refused for writing and, for
commands that only read (`reading=True`), opened read-only.
"""
import hashlib
import json
import sqlite3
import threading
import time
import urllib.parse
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from explorer.runs.liveness import LIVE, RUNNING, settled
from explorer.runs.store_home import store_path
from explorer.runs.store_schema import (MIGRATE_1_TO_2, MIGRATE_2_TO_3, NONFINITE, SCHEMA, SCHEMA_VERSION, cannot_write,
                                        record_rows, schema_problem)

COMPLETE = ("finished", "diverged")  # statuses whose result can be served again
KEPT_ROWS = 1_000_000  # records of recently saved or read runs kept in memory per store object (~70 MB)

RUN_COLUMNS = ("run_id, scenario, config_json, key, code_version, status, created_at, duration_s, summary_json, "
               "error, name")


class StoreError(ValueError):
    """The run store cannot be used (a bad EXPLORER_STORE, a file that is not a whole store, a read-only
    store asked to write). One line, saying what to do."""


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
    """`reading`: the caller only reads (`runs`, `show`): a store it cannot write is opened read-only,
    where a writer is refused at once (before it trains)."""

    def __init__(self, path: str | Path | None = None, *, reading: bool = False) -> None:
        self.path = store_path(path)
        self.read_only, self._open = False, False
        self._uri: str | None = None  # set for a store opened read-only
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
                break
            except sqlite3.OperationalError as error:
                if "locked" in str(error) and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                if not cannot_write(self.path):
                    raise self._error(error) from None
                if not reading:
                    raise self._error("it is read-only here: this process may not write it or its folder",
                                      "runs and show still read it; run --no-store trains without storing") from None
                self._open_read_only()
                break
            except (OSError, sqlite3.Error) as error:  # a directory, a read-only place, not a database
                raise self._error(error) from None
        self._open = True  # from here on a database error is a StoreError (see `_connect`)
        with self._connect() as db:
            problem = schema_problem(db)
        if problem:
            raise self._error(problem, "move it aside" if "damaged" in problem else "")

    def _error(self, error: Exception | str, what_to_do: str = "") -> "StoreError":
        reason = error if isinstance(error, str) else getattr(error, "strerror", None) or str(error)
        return StoreError(" ".join(f"the run store {self.path} cannot be used: {reason} "
                                   f"({what_to_do + '; or ' if what_to_do else ''}set EXPLORER_STORE to another file)"
                                   .split()))

    def _open_read_only(self) -> None:
        """Read the store as it is: `mode=ro`, or (no WAL index beside it, and none can be made in a
        read-only folder) `immutable=1`: nobody can be writing it, as nobody can make that index."""
        base = "file:" + urllib.parse.quote(str(self.path.resolve()))
        for self._uri in (base + "?mode=ro", base + "?mode=ro&immutable=1"):
            try:
                with self._connect() as db:
                    version = db.execute("PRAGMA user_version").fetchone()[0]
                break
            except sqlite3.Error as error:
                last = error
        else:
            raise self._error(last) from None
        self.read_only = True
        if version != SCHEMA_VERSION:
            raise self._error(f"it is read-only here and of schema version {version}, and this code reads {SCHEMA_VERSION} "
                              "(it is migrated when opened by a process that may write it)")

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
    def _connect(self, writing: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection for one operation; a damaged store met here (the open's check misses what breaks
        later) is a StoreError, not a traceback."""
        if writing and self.read_only:
            raise self._error("it is read-only here, opened for reading only")
        db = sqlite3.connect(self._uri or self.path, timeout=30, isolation_level=None, uri=self._uri is not None)
        try:
            db.execute("PRAGMA busy_timeout=30000")
            db.execute("PRAGMA foreign_keys=ON")
            yield db
        except sqlite3.DatabaseError as error:
            if not self._open:
                raise  # the opening code tells a read-only store, a lock and damage apart
            if isinstance(error, sqlite3.OperationalError):
                if "locked" in str(error):
                    raise
                raise self._error(error) from None
            raise self._error(f"it is damaged: {error}", "move it aside") from None
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
        with self._connect(writing=True) as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(f"INSERT INTO runs ({RUN_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,NULL)", (
                    run_id, scenario, canonical(config), result_key(scenario, config if key is None else key, code_version),
                    code_version,
                    status, time.time(), duration_s, json.dumps(summary), error))
                db.executemany("INSERT INTO records VALUES (?,?,?,?,?,?)", record_rows(run_id, frame))
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
        with self._connect(writing=True) as db:
            db.execute("UPDATE runs SET name = ? WHERE run_id = ?", (name, run_id))

    def delete(self, run_id: str) -> None:
        with self._connect(writing=True) as db:
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
