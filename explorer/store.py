"""The run store: finished, stopped, diverged and failed runs in one SQLite file.

Embedded by default at ~/.cache/training-dynamics-explorer/runs.sqlite3; set
`EXPLORER_STORE` to another path. WAL mode lets the page read while a run is saved, and
several processes write at once (each waits its turn through `busy_timeout`).

A run is written in one transaction at the end — its row, its records and its events
together — so a process killed mid-run leaves nothing behind that looks complete.
Results are keyed by scenario id + canonical config + code version: the same config on
the same code is served from here instead of being trained again.
"""
import hashlib
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

SCHEMA_VERSION = 1
COMPLETE = ("finished", "diverged")  # statuses whose result can be served again
DEFAULT_PATH = Path.home() / ".cache" / "training-dynamics-explorer" / "runs.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id       TEXT PRIMARY KEY,
    scenario     TEXT NOT NULL,
    config_json  TEXT NOT NULL,  -- canonical: sorted keys, no spaces
    key          TEXT NOT NULL,  -- sha256(scenario, canonical config, code version)
    code_version TEXT NOT NULL,
    status       TEXT NOT NULL,  -- finished | diverged | stopped | failed
    created_at   REAL NOT NULL,
    duration_s   REAL NOT NULL,
    summary_json TEXT NOT NULL,
    error        TEXT
);
CREATE INDEX IF NOT EXISTS runs_key ON runs(key, status);
CREATE INDEX IF NOT EXISTS runs_scenario ON runs(scenario, created_at);
CREATE TABLE IF NOT EXISTS records (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    arm TEXT NOT NULL, step INTEGER NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS records_run ON records(run_id);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    arm TEXT NOT NULL, step INTEGER NOT NULL, kind TEXT NOT NULL, message TEXT NOT NULL
);
"""


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


class RunStore:
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path or os.environ.get("EXPLORER_STORE") or DEFAULT_PATH)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Two processes opening a new store at once can meet SQLite's "locked" answer without its
        # busy handler being asked (switching to WAL, or a read lock that must upgrade): retry.
        deadline = time.monotonic() + 30
        while True:
            try:
                self._create()
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _create(self) -> None:
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")  # persistent: set once, kept by the file
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise RuntimeError(f"{self.path} has schema version {version}; this code knows up to {SCHEMA_VERSION}")
            db.executescript(_SCHEMA)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

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
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?)", (
                    run_id, scenario, canonical(config), result_key(scenario, config if key is None else key, code_version),
                    code_version,
                    status, time.time(), duration_s, json.dumps(summary), error))
                db.executemany("INSERT INTO records VALUES (?,?,?,?,?)",
                               ((run_id, arm, int(step), metric, float(value))
                                for arm, step, metric, value in frame[["arm", "step", "metric", "value"]].itertuples(index=False)))
                db.executemany("INSERT INTO events VALUES (?,?,?,?,?)",
                               ((run_id, e["arm"], e["step"], e["kind"], e["message"]) for e in events))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return run_id

    def lookup(self, scenario: str, key: dict[str, Any], code_version: str) -> StoredRun | None:
        """The newest complete run of exactly this key (config without view fields) on this code, if any."""
        with self._connect() as db:
            row = db.execute(
                f"SELECT * FROM runs WHERE key = ? AND status IN ({','.join('?' * len(COMPLETE))}) "
                "ORDER BY created_at DESC LIMIT 1",
                (result_key(scenario, key, code_version), *COMPLETE)).fetchone()
        return _stored(row) if row else None

    def get(self, run_id: str) -> StoredRun | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return _stored(row) if row else None

    def frame(self, run_id: str) -> pd.DataFrame:
        with self._connect() as db:
            return pd.read_sql_query(
                "SELECT arm, step, metric, value FROM records WHERE run_id = ? ORDER BY rowid", db, params=(run_id,))

    def events(self, run_id: str) -> list[dict[str, Any]]:
        with self._connect() as db:
            rows = db.execute("SELECT arm, step, kind, message FROM events WHERE run_id = ? ORDER BY rowid",
                              (run_id,)).fetchall()
        return [dict(zip(("arm", "step", "kind", "message"), row)) for row in rows]

    def list_runs(self, scenario: str | None = None, limit: int = 200) -> list[StoredRun]:
        query, params = "SELECT * FROM runs", []
        if scenario:
            query, params = query + " WHERE scenario = ?", [scenario]
        with self._connect() as db:
            rows = db.execute(query + " ORDER BY created_at DESC LIMIT ?", (*params, limit)).fetchall()
        return [_stored(row) for row in rows]

    def count(self, scenario: str | None = None) -> int:
        query, params = "SELECT COUNT(*) FROM runs", ()
        if scenario:
            query, params = query + " WHERE scenario = ?", (scenario,)
        with self._connect() as db:
            return db.execute(query, params).fetchone()[0]

    def delete(self, run_id: str) -> None:
        with self._connect() as db:
            db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))


def _stored(row: tuple) -> StoredRun:
    run_id, scenario, config_json, _key, code_version, status, created_at, duration_s, summary_json, error = row
    return StoredRun(run_id, scenario, json.loads(config_json), code_version, status, created_at, duration_s,
                     json.loads(summary_json), error)
