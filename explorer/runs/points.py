"""The run store as a point cache (scenarios/points.py): a grid's points kept beside the runs.

One table in the store's SQLite file, made when first written (a store that never held a point has
none, and a read-only store is only read): `points(key, metrics_json, created_at)`, the key naming
the scenario, the point's spec and the code version. Floats go through JSON as Python writes them
(repr: exact), NaN and ±inf included, so a point read back equals the point trained.
"""
import json
import sqlite3
import time
from pathlib import Path

TABLE = "CREATE TABLE IF NOT EXISTS points (key TEXT PRIMARY KEY, metrics_json TEXT NOT NULL, created_at REAL NOT NULL)"


class StorePoints:
    """Grid points kept in the run store at `path` (a RunStore's `path`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.execute("PRAGMA busy_timeout=30000")
        return db

    def get(self, key: str) -> dict[str, float] | None:
        """The point's metrics, or None: never kept, or the store cannot be read (a cache miss trains it)."""
        try:
            db = self._connect()
        except sqlite3.Error:
            return None
        try:
            row = db.execute("SELECT metrics_json FROM points WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error:  # no point was ever kept here (no table yet), or the file is no store
            return None
        finally:
            db.close()
        return {name: float(value) for name, value in json.loads(row[0]).items()} if row else None

    def put(self, key: str, metrics: dict[str, float]) -> None:
        """Keep the point; a store that cannot take it (read-only, locked past the wait) costs only the reuse."""
        try:
            db = self._connect()
        except sqlite3.Error:
            return
        try:
            db.execute(TABLE)
            db.execute("INSERT OR REPLACE INTO points VALUES (?, ?, ?)",
                       (key, json.dumps({name: float(value) for name, value in metrics.items()}), time.time()))
        except sqlite3.Error:
            pass
        finally:
            db.close()


def points_of(store) -> StorePoints | None:
    """The point cache of a RunStore (None: no store, or one opened read-only)."""
    if store is None or getattr(store, "read_only", False):
        return None
    return StorePoints(store.path)
