"""The run store's SQLite schema, and the migrations from older schemas (explorer/runs/store.py runs them)."""

SCHEMA_VERSION = 3

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
