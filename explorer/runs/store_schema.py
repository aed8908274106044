"""The run store's SQLite schema, the migrations from older schemas (explorer/runs/store.py runs them),
and the checks a store passes at open: its tables have every column, its pages read back."""
import functools
import itertools
import math
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

SCHEMA_VERSION = 3
NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}

RECORDS = """
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    arm TEXT NOT NULL, step INTEGER NOT NULL, metric TEXT NOT NULL,
    value REAL,      -- NULL exactly when the value is not finite (SQLite keeps no NaN)
    nonfinite TEXT,  -- then which: 'nan' | 'inf' | '-inf'
    CHECK ((value IS NULL) = (nonfinite IS NOT NULL)),
    CHECK (nonfinite IS NULL OR nonfinite IN ('nan', 'inf', '-inf'))
"""
SCHEMA = f"""
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
    error        TEXT,
    name         TEXT            -- given on the Runs page, NULL until then
);
CREATE INDEX IF NOT EXISTS runs_key ON runs(key, status);
CREATE INDEX IF NOT EXISTS runs_scenario ON runs(scenario, created_at);
CREATE TABLE IF NOT EXISTS records ({RECORDS});
CREATE INDEX IF NOT EXISTS records_run ON records(run_id);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    arm TEXT NOT NULL, step INTEGER NOT NULL, kind TEXT NOT NULL, message TEXT NOT NULL
);
"""
# Schema 1 -> 2: records gains `nonfinite` and loses NOT NULL on `value` (a rebuild in SQLite).
# Schema 1 could hold ±inf (never NaN); they move to the flag column, rows keep their order.
MIGRATE_1_TO_2 = f"""
ALTER TABLE records RENAME TO records_v1;
DROP INDEX IF EXISTS records_run;
CREATE TABLE records ({RECORDS});
INSERT INTO records (rowid, run_id, arm, step, metric, value, nonfinite)
    SELECT rowid, run_id, arm, step, metric,
           CASE WHEN value IN (9e999, -9e999) THEN NULL ELSE value END,
           CASE value WHEN 9e999 THEN 'inf' WHEN -9e999 THEN '-inf' END
    FROM records_v1 ORDER BY rowid;
DROP TABLE records_v1;
CREATE INDEX records_run ON records(run_id);
"""
# Schema 2 -> 3: runs gains `name` (added last, so rows read as before plus a NULL name).
MIGRATE_2_TO_3 = "ALTER TABLE runs ADD COLUMN name TEXT"


@functools.cache
def expected_columns() -> dict[str, tuple[str, ...]]:
    """Every table's columns, as SCHEMA creates them (read from an in-memory database built from it)."""
    db = sqlite3.connect(":memory:")
    db.executescript(SCHEMA)
    tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {table: tuple(row[1] for row in db.execute(f"PRAGMA table_info({table})")) for table in tables}


def schema_problem(db: sqlite3.Connection) -> str | None:
    """Why this database is not a whole store of SCHEMA_VERSION, in a few words; None when it is. Runs
    SQLite's quick_check (every page of the file read back: a corrupt page is found here, at open,
    rather than in the middle of reading a run)."""
    for table, columns in expected_columns().items():
        present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        missing = [c for c in columns if c not in present]
        if missing:
            return (f"its table {table} lacks {'the column' if len(missing) == 1 else 'the columns'} "
                    f"{', '.join(missing)}: it says schema {SCHEMA_VERSION}, but this program did not write it so")
    damage = [row[0] for row in db.execute("PRAGMA quick_check(3)")]
    if damage != ["ok"]:
        return f"it is damaged: SQLite's quick_check says {damage[0]}"
    return None


def record_rows(run_id: str, frame: pd.DataFrame) -> Iterator[tuple]:
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


def cannot_write(path: Path) -> bool:
    """The store file is there, but this process may not write it or its folder (SQLite's WAL files)."""
    if not path.is_file():
        return False
    try:
        with open(path, "r+b"):
            pass
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError:
        return True
    return False
