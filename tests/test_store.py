"""The run store: keyed results, concurrent writers, and no half-written runs."""
import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from explorer.runs.store import SCHEMA_VERSION, RunStore, StoreError

ROOT = Path(__file__).resolve().parent.parent
FRAME = pd.DataFrame({"arm": ["a", "a"], "step": [0, 1], "metric": ["loss", "loss"], "value": [0.7, 0.6]})


def test_saved_run_round_trips_and_is_found_by_its_key(isolated_store) -> None:
    store = RunStore()
    run_id = store.save("demo", {"b": 2, "a": 1}, "v1", "finished", FRAME, {"x": 1},
                        [{"arm": "a", "step": 1, "kind": "diverged", "message": "m"}], 1.5)
    found = store.lookup("demo", {"a": 1, "b": 2}, "v1")  # key order does not matter
    assert found is not None and found.run_id == run_id and found.summary == {"x": 1}
    pd.testing.assert_frame_equal(RunStore().frame(run_id), FRAME)  # a new object reads the file
    assert store.events(run_id)[0]["kind"] == "diverged"
    assert store.lookup("demo", {"a": 1, "b": 3}, "v1") is None, "another config"
    assert store.lookup("demo", {"a": 1, "b": 2}, "v2") is None, "another code version"


def test_stopped_and_failed_runs_are_listed_but_never_served(isolated_store) -> None:
    store = RunStore()
    store.save("demo", {"a": 1}, "v1", "stopped", FRAME, {})
    store.save("demo", {"a": 1}, "v1", "failed", FRAME, {}, error="boom")
    assert store.lookup("demo", {"a": 1}, "v1") is None
    assert sorted(r.status for r in store.list_runs("demo")) == ["failed", "stopped"]


def test_delete_removes_the_run_and_its_records(isolated_store) -> None:
    store = RunStore()
    run_id = store.save("demo", {"a": 1}, "v1", "finished", FRAME, {})
    store.delete(run_id)
    assert store.get(run_id) is None and store.frame(run_id).empty


def test_records_kept_in_memory_read_as_the_file_does(isolated_store) -> None:
    """A store object keeps the records it saved or read; what it hands out equals what the file
    holds, is the caller's own to change, and goes with a deleted run."""
    frame = pd.DataFrame({"arm": ["a", "b", "b"], "step": [0, 0, 1], "metric": ["loss"] * 3,
                          "value": [0.5, math.nan, math.inf]})
    store = RunStore()
    run_id = store.save("demo", {"a": 1}, "v1", "finished", frame, {})
    kept, read = store.frame(run_id), RunStore().frame(run_id)
    pd.testing.assert_frame_equal(kept, read)
    kept["value"] = 0.0
    kept["extra"] = 1
    pd.testing.assert_frame_equal(store.frame(run_id), read)
    store.delete(run_id)
    assert store.frame(run_id).empty


def test_store_uses_wal_and_a_schema_version(isolated_store) -> None:
    RunStore()
    db = sqlite3.connect(isolated_store)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreError, match="schema version"):
        RunStore()


def test_nan_and_infinities_are_stored_and_read_back_as_such(isolated_store) -> None:
    """SQLite turns a NaN into NULL; the store keeps which non-finite value it was."""
    values = [0.5, math.nan, math.inf, -math.inf, -0.0, 1e308]
    frame = pd.DataFrame({"arm": ["a"] * 6, "step": range(6), "metric": ["loss"] * 6, "value": values})
    store = RunStore()
    run_id = store.save("demo", {"a": 1}, "v1", "diverged", frame, {"final": math.nan})
    back = RunStore().frame(run_id)
    assert back["value"].tolist()[:1] + back["value"].tolist()[2:] == [0.5, math.inf, -math.inf, 0.0, 1e308]
    assert math.isnan(back["value"][1]), back
    assert back["value"].dtype == float and math.isnan(store.get(run_id).summary["final"])
    empty = store.save("demo", {"a": 2}, "v1", "stopped", frame.iloc[:0], {})
    assert store.frame(empty).empty and store.frame(empty)["value"].dtype == float


SCHEMA_1 = """
CREATE TABLE runs (run_id TEXT PRIMARY KEY, scenario TEXT NOT NULL, config_json TEXT NOT NULL, key TEXT NOT NULL,
    code_version TEXT NOT NULL, status TEXT NOT NULL, created_at REAL NOT NULL, duration_s REAL NOT NULL,
    summary_json TEXT NOT NULL, error TEXT);
CREATE INDEX runs_key ON runs(key, status);
CREATE INDEX runs_scenario ON runs(scenario, created_at);
CREATE TABLE records (run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    arm TEXT NOT NULL, step INTEGER NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL);
CREATE INDEX records_run ON records(run_id);
CREATE TABLE events (run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    arm TEXT NOT NULL, step INTEGER NOT NULL, kind TEXT NOT NULL, message TEXT NOT NULL);
PRAGMA user_version = 1;
"""


def test_a_schema_1_store_is_migrated_with_its_runs(isolated_store) -> None:
    """A store written by the old code (value NOT NULL, ±inf as REAL) opens as the current schema, runs intact."""
    db = sqlite3.connect(isolated_store)
    db.executescript(SCHEMA_1)
    db.execute("INSERT INTO runs VALUES ('old', 'demo', '{}', 'k', 'v1', 'finished', 1.0, 2.0, '{}', NULL)")
    db.executemany("INSERT INTO records VALUES ('old', 'a', ?, 'loss', ?)",
                   [(0, 0.7), (1, math.inf), (2, -math.inf), (3, 0.5)])
    db.commit()
    db.close()
    store = RunStore()
    assert sqlite3.connect(isolated_store).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    assert store.frame("old")["value"].tolist() == [0.7, math.inf, -math.inf, 0.5]
    assert store.get("old").status == "finished" and [r.run_id for r in store.list_runs()] == ["old"]
    nan = pd.DataFrame({"arm": ["a"], "step": [0], "metric": ["loss"], "value": [math.nan]})
    assert math.isnan(store.frame(store.save("demo", {}, "v1", "diverged", nan, {}))["value"][0])
    store.delete("old")
    assert store.frame("old").empty, "records still cascade with their run"


def test_a_schema_2_store_gains_run_names_with_its_runs_intact(isolated_store) -> None:
    """Schema 2 had no `name`: opening it adds the column (empty), and a run can then be named."""
    db = sqlite3.connect(isolated_store)
    db.executescript(SCHEMA_1)
    db.close()
    RunStore()  # schema 1 -> current
    db = sqlite3.connect(isolated_store)
    db.executescript("ALTER TABLE runs DROP COLUMN name; PRAGMA user_version = 2;")  # what schema 2 was
    db.execute("INSERT INTO runs VALUES ('old', 'demo', '{}', 'k', 'v1', 'finished', 1.0, 2.0, '{}', NULL)")
    db.execute("INSERT INTO records VALUES ('old', 'a', 0, 'loss', 0.7, NULL)")
    db.commit()
    db.close()
    store = RunStore()
    assert sqlite3.connect(isolated_store).execute("PRAGMA user_version").fetchone()[0] == 3
    assert store.get("old").name is None and store.frame("old")["value"].tolist() == [0.7]
    store.rename("old", "  the  baseline ")
    assert store.get("old").name == "the baseline" and store.list_runs()[0].name == "the baseline"
    assert store.record_counts(["old", "gone"]) == {"old": 1, "gone": 0}
    store.rename("old", "")
    assert store.get("old").name is None, "an empty name clears it"


@pytest.mark.parametrize("where", ["a directory", "not a database", "under a file", "a read-only place"])
def test_a_bad_store_path_is_one_line_error(tmp_path, where) -> None:
    path = {"a directory": tmp_path, "not a database": tmp_path / "notes.txt",
            "under a file": tmp_path / "notes.txt" / "two\nlines.sqlite3",
            "a read-only place": Path("/proc/explorer-test/runs.sqlite3")}[where]
    (tmp_path / "notes.txt").write_text("hello\n" * 1000)
    with pytest.raises(StoreError) as error:
        RunStore(path)
    message = str(error.value)
    assert "\n" not in message and "cannot be used" in message and "EXPLORER_STORE" in message, message


WRITER = textwrap.dedent("""
    import sys, pandas as pd
    from explorer.runs.store import RunStore
    frame = pd.DataFrame({"arm": ["a"] * 500, "step": range(500), "metric": ["loss"] * 500, "value": [0.5] * 500})
    store = RunStore()
    for i in range(15):
        store.save("demo", {"writer": sys.argv[1], "i": i}, "v1", "finished", frame, {})
""")


def test_two_processes_write_at_once(isolated_store) -> None:
    """Two writers interleave through WAL + busy_timeout; every run of both lands whole."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, name], env=env, stderr=subprocess.PIPE)
               for name in ("p", "q")]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err.decode()
    runs = RunStore().list_runs("demo")
    assert len(runs) == 30
    assert all(len(RunStore().frame(r.run_id)) == 500 for r in runs)


KILLED = textwrap.dedent("""
    import time
    from explorer.runs.handle import RunHandle
    from explorer.runs.pool import WorkerPool
    from explorer.runs.store import RunStore
    from scenarios import get_scenario
    scenario = get_scenario("vanishing-gradients")
    handle = RunHandle.start(scenario, scenario.validate({"steps": 3000}), RunStore(), pool=WorkerPool(1))
    while handle.snapshot().frame.empty:
        time.sleep(0.01)
    print("training", flush=True)
    handle.join()
""")


def test_a_run_killed_midway_is_never_listed_as_complete(isolated_store) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", KILLED], env=env, stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline().strip() == b"training"
        time.sleep(0.3)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    store = RunStore()
    assert store.list_runs() == []
    from scenarios import get_scenario
    scenario = get_scenario("vanishing-gradients")
    config = scenario.validate({"steps": 3000}).model_dump(mode="json")
    assert store.lookup(scenario.id, config, scenario.code_version()) is None


VERSIONS = textwrap.dedent("""
    import json, sys
    from scenarios import get_scenario
    print(json.dumps({name: get_scenario(name).code_version() for name in sys.argv[1:]}))
""")
SERVED = textwrap.dedent("""
    import sys
    from explorer.runs.serving import save_result, stored_result
    from explorer.runs.store import RunStore
    from scenarios import get_scenario
    import pandas as pd
    scenario = get_scenario(sys.argv[2])
    config = scenario.validate({})
    if sys.argv[1] == "save":
        save_result(RunStore(), scenario, config, "finished", pd.DataFrame(columns=["arm", "step", "metric", "value"]),
                    {}, [], 1.0)
    print(stored_result(RunStore(), scenario, config) is not None)
""")


@pytest.mark.slow  # ~10 s: a copy of the code and a process per question (the in-process version tests stay)
def test_an_edit_anywhere_in_a_scenarios_folder_or_its_engines_makes_its_stored_runs_stale(tmp_path) -> None:
    """The code version hashes the scenario's whole folder and the engines it reaches (imported, or
    started by module name): editing a helper in a copy of the code changes it, and the stored run is
    no longer served; editing an engine the scenario never reaches changes nothing."""
    import json
    import shutil
    copy = tmp_path / "code"
    for package in ("scenarios", "engines", "explorer"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(copy), "EXPLORER_STORE": str(tmp_path / "runs.sqlite3")}
    names = ["ddp-fsdp-memory", "rlhf-ppo", "vanishing-gradients"]

    def versions() -> dict[str, str]:
        out = subprocess.run([sys.executable, "-c", VERSIONS, *names], env=env, cwd=tmp_path, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def served(action: str, name: str) -> bool:
        out = subprocess.run([sys.executable, "-c", SERVED, action, name], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip() == "True"

    before = versions()
    assert served("save", "ddp-fsdp-memory"), "a run just stored is served"
    edits = [("scenarios/ddp_fsdp_memory/launch.py", {"ddp-fsdp-memory"}),   # a helper, reached through `import ... as`
             ("scenarios/rlhf_ppo/figures.py", {"rlhf-ppo"}),
             ("engines/distributed/worker.py", {"ddp-fsdp-memory"}),          # started as `python -m`, never imported
             ("engines/rl/dpo.py", {"rlhf-ppo"}),                             # reached through another engine
             ("scenarios/records.py", set(names))]                           # the shared contract: every scenario
    for path, affected in edits:
        with open(copy / path, "a") as f:
            f.write("# an edit\n")
        after = versions()
        changed = {name for name in names if after[name] != before[name]}
        assert changed == affected, f"editing {path} changed the versions of {sorted(changed)}, not {sorted(affected)}"
        before = after
    assert not served("look", "ddp-fsdp-memory"), "a run stored before its helpers changed is still served"


OPENER = textwrap.dedent("""
    import sys, time
    from explorer.runs.store import RunStore
    time.sleep(max(0.0, float(sys.argv[1]) - time.time()))  # all start together
    RunStore()
""")


@pytest.mark.slow
def test_many_processes_open_a_new_store_at_once(tmp_path) -> None:
    """Switching a new file to WAL can answer "locked" without SQLite's busy handler: opening
    retries. (Before the retry, 5 of these 60 openers failed.)"""
    import time
    for trial in range(10):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "EXPLORER_STORE": str(tmp_path / f"store_{trial}.db")}
        start = str(time.time() + 1.5)
        openers = [subprocess.Popen([sys.executable, "-c", OPENER, start], env=env, stderr=subprocess.PIPE)
                   for _ in range(6)]
        for opener in openers:
            _, err = opener.communicate(timeout=120)
            assert opener.returncode == 0, err.decode()[-500:]
