"""Runs written while they go on: a watched run's row, records and events arrive over its life.

A scenario's run is written once, at its end, all or nothing (explorer/runs/store.py). A run
watched in a person's own script (`from explorer import watch`) is written as it goes, so the
page can follow it: `begin` adds its row with status `running`, each `append_steps` adds records and
events in one transaction and beats the row's heartbeat (`duration_s`, the seconds from its
start to the last beat), `end` says how it ended and writes its summary.

A running row names the process that writes it; a reader that finds that process gone reads the
run as `incomplete` (explorer/runs/liveness.py): nothing has to clean up after a killed script.
"""
import json
import math
import sqlite3
import time
import uuid
from typing import Any

import pandas as pd

from explorer.runs.liveness import RUNNING, writer_identity
from explorer.runs.store import RUN_COLUMNS, RunStore, canonical, result_key

def begin(store: RunStore, scenario: str, config: dict[str, Any], code_version: str, name: str | None,
          started_at: float | None = None) -> str:
    """Add a running run's row (no records yet); its run id. `started_at` (a `time.time()`, default now) is
    when the run began, which may be before its row could be added: durations count from it."""
    run_id = uuid.uuid4().hex[:12]
    summary = {"status": RUNNING, "writer": writer_identity()}
    with store._connect() as db:
        db.execute(f"INSERT INTO runs ({RUN_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)", (
            run_id, scenario, canonical(config), result_key(scenario, config, code_version), code_version, RUNNING,
            time.time() if started_at is None else started_at, 0.0, json.dumps(summary), None, name))
    return run_id


# One statement inserts a whole flush: its steps as one JSON text, `[[step, {metric: value, ...}], ...]`,
# expanded by SQLite (json_each) with the GIL released; a non-finite value arrives as its name ("nan", …).
STEPS_SQL = """
INSERT INTO records (run_id, arm, step, metric, value, nonfinite)
SELECT ?1, ?2, json_extract(s.value, '$[0]'), m.key,
       CASE m.type WHEN 'text' THEN NULL ELSE m.value END, CASE m.type WHEN 'text' THEN m.value END
FROM json_each(?3) AS s, json_each(s.value, '$[1]') AS m ORDER BY s.key, m.id
"""


def append_steps(store: RunStore, run_id: str, arm: str, steps: list[tuple[int, dict[str, float]]],
                 events: list[dict[str, Any]] = ()) -> None:
    """Records and events of a running run, and its heartbeat, in one transaction: `steps` holds each
    step's metrics as one dict (float values), in the order they are to be read back.

    The watch's writer thread shares the GIL with the person's training: a row at a time through
    `executemany` held it for ~4 µs a row (74 rows a logged step at every=1). Here Python only encodes
    one JSON text (C code), and the rows are made inside SQLite, which runs without the GIL."""
    text = json.dumps(steps)
    if "NaN" in text or "Infinity" in text:  # a non-finite value (or a metric named so): spelled out
        text = json.dumps([(step, {name: value if math.isfinite(value) else _nonfinite(value)
                                   for name, value in metrics.items()}) for step, metrics in steps])
    with store._connect() as db:
        db.execute("BEGIN IMMEDIATE")
        try:
            try:
                db.execute(STEPS_SQL, (run_id, arm, text))
            except sqlite3.OperationalError as error:  # an SQLite built without its JSON functions
                if "json_each" not in str(error):
                    raise
                db.executemany("INSERT INTO records VALUES (?,?,?,?,?,?)", _record_values(
                    run_id, [(arm, step, name, value) for step, metrics in steps for name, value in metrics.items()]))
            db.executemany("INSERT INTO events VALUES (?,?,?,?,?)",
                           ((run_id, e["arm"], e["step"], e["kind"], e["message"]) for e in events))
            db.execute("UPDATE runs SET duration_s = ? - created_at WHERE run_id = ?", (time.time(), run_id))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise


def _nonfinite(value: float) -> str:
    return "nan" if value != value else ("inf" if value > 0 else "-inf")


def _record_values(run_id: str, rows: list[tuple[str, int, str, float]]):
    """The records table's rows (as explorer/runs/store.py writes them: a non-finite value as NULL and its
    kind), straight from the tuples: no frame is built for a flush (the writer shares the GIL with training)."""
    for arm, step, metric, value in rows:
        if math.isfinite(value):
            yield run_id, arm, step, metric, value, None
        else:
            yield run_id, arm, step, metric, None, _nonfinite(value)


def end(store: RunStore, run_id: str, status: str, summary: dict[str, Any], error: str | None = None) -> None:
    """How the run ended (finished, diverged, stopped, failed), its summary and error."""
    with store._connect() as db:
        db.execute("UPDATE runs SET status = ?, summary_json = ?, error = ?, duration_s = ? - created_at "
                   "WHERE run_id = ?", (status, json.dumps({**summary, "status": status}), error, time.time(), run_id))


def records_since(store: RunStore, run_id: str, after: int = 0) -> tuple[pd.DataFrame, int]:
    """The run's records added after row `after` (0: all), and the row to ask after next time.
    Rows of one run are read through its index in the order they were written."""
    with store._connect() as db:
        rows = db.execute("SELECT rowid, arm, step, metric, value, nonfinite FROM records WHERE run_id = ? "
                          "AND rowid > ? ORDER BY rowid", (run_id, after)).fetchall()
    if not rows:
        return pd.DataFrame(columns=["arm", "step", "metric", "value"]), after
    frame = pd.DataFrame(rows, columns=["rowid", "arm", "step", "metric", "value", "nonfinite"])
    last = int(frame["rowid"].iloc[-1])
    nonfinite = frame.pop("nonfinite")
    frame["value"] = frame["value"].astype(float).mask(nonfinite.notna(), nonfinite.map(
        {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}))
    return frame.drop(columns="rowid"), last
