"""The run store: keyed results, concurrent writers, and no half-written runs."""
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

from explorer.store import SCHEMA_VERSION, RunStore

ROOT = Path(__file__).resolve().parent.parent
FRAME = pd.DataFrame({"arm": ["a", "a"], "step": [0, 1], "metric": ["loss", "loss"], "value": [0.7, 0.6]})


def test_saved_run_round_trips_and_is_found_by_its_key(isolated_store) -> None:
    store = RunStore()
    run_id = store.save("demo", {"b": 2, "a": 1}, "v1", "finished", FRAME, {"x": 1},
                        [{"arm": "a", "step": 1, "kind": "diverged", "message": "m"}], 1.5)
    found = store.lookup("demo", {"a": 1, "b": 2}, "v1")  # key order does not matter
    assert found is not None and found.run_id == run_id and found.summary == {"x": 1}
    pd.testing.assert_frame_equal(store.frame(run_id), FRAME)
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


def test_store_uses_wal_and_a_schema_version(isolated_store) -> None:
    RunStore()
    db = sqlite3.connect(isolated_store)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(RuntimeError, match="schema version"):
        RunStore()


WRITER = textwrap.dedent("""
    import sys, pandas as pd
    from explorer.store import RunStore
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
    from explorer.pool import WorkerPool
    from explorer.runs import RunHandle
    from explorer.store import RunStore
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


def test_a_scenarios_private_helpers_are_part_of_its_code_version(tmp_path) -> None:
    """Stored results are keyed by the code that made them: the scenario module and the
    `scenarios._*` helpers it imports (transitively), not unrelated ones."""
    from scenarios.base import _with_helpers
    (tmp_path / "mine.py").write_text("from scenarios._reads import x\nimport scenarios.plotting\n")
    (tmp_path / "_reads.py").write_text("from scenarios._draws import y\nx = 1\n")
    (tmp_path / "_draws.py").write_text("y = 2\n")
    (tmp_path / "_unrelated.py").write_text("z = 3\n")
    assert sorted(p.name for p in _with_helpers(tmp_path / "mine.py")) == ["_draws.py", "_reads.py", "mine.py"]


OPENER = textwrap.dedent("""
    import sys, time
    from explorer.store import RunStore
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
