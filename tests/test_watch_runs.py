"""`watch` in a person's script: the run is in the store at once and grows, ends as the script ends, and
never costs the training its run (a NaN, a locked or unusable store, a killed script, two scripts)."""
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from explorer import WatchError, watch
from explorer.runs.store import RunStore

ROOT = Path(__file__).resolve().parent.parent


def model_and_optimizer(seed: int = 0, lr: float = 0.05):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    return model, torch.optim.SGD(model.parameters(), lr=lr)


def train(run, model, optimizer, steps: int, seed: int = 0, nan_at: int | None = None) -> None:
    generator = torch.Generator().manual_seed(seed)
    for step in range(steps):
        x = torch.randn(32, 8, generator=generator)
        loss = nn.functional.cross_entropy(model(x), (x[:, 0] > 0).long())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        run.log(loss=torch.tensor(float("nan")) if step == nan_at else loss)


def test_a_watched_run_is_stored_at_once_grows_while_it_runs_and_finishes() -> None:
    """The run's row is there while it trains (running, named, with your config and its modules); its
    loss is recorded at every step, the per-module values every `every`-th; finish() ends it finished."""
    model, optimizer = model_and_optimizer()
    run = watch(model, optimizer, name="baseline", every=4, config={"lr": 0.05, "note": {"a": [1]}})
    train(run, model, optimizer, 10)
    rows = run.rows()
    stored = RunStore().get(run.run_id)
    assert stored.status == "running" and stored.name == "baseline" and stored.scenario == "watched"
    assert stored.config["lr"] == 0.05 and stored.config["watch_layers"] == ["0", "2"]
    run.finish()
    stored, frame = RunStore().get(run.run_id), RunStore().frame(run.run_id)
    assert stored.status == "finished", stored.status
    assert sorted(frame[frame.metric == "loss"].step) == list(range(10))
    assert sorted(frame[frame.metric == "grad_norm/layer_01"].step) == [0, 4, 8]
    assert len(frame) == len(rows) and stored.summary["headline"]["steps"] == 10


def test_a_watched_runs_duration_counts_from_watch_to_finish() -> None:
    """The writer adds the run's row up to half a second after `watch` (or at the end of a shorter run):
    the stored duration still counts from the call to `watch`, so it is at least what the loop took."""
    model, optimizer = model_and_optimizer()
    run = watch(model, optimizer, every=5)
    started = time.monotonic()  # after the call: its start is stamped inside it
    train(run, model, optimizer, 60)
    took = time.monotonic() - started
    run.finish()
    stored = RunStore().get(run.run_id)
    assert stored.duration_s >= took, f"stored {stored.duration_s:.3f} s for a loop that took {took:.3f} s"


def test_a_nan_loss_is_the_runs_divergence_not_an_error() -> None:
    """A NaN loss at step 3: recorded as such with a `diverged` event; training goes on; the run ends diverged."""
    model, optimizer = model_and_optimizer()
    run = watch(model, optimizer, every=2)
    train(run, model, optimizer, 6, nan_at=3)
    run.finish()
    store = RunStore()
    assert store.get(run.run_id).status == "diverged"
    assert [(e["kind"], e["step"]) for e in store.events(run.run_id)] == [("diverged", 3)]
    frame = store.frame(run.run_id)
    assert frame[(frame.metric == "loss") & (frame.step == 3)].value.isna().all()


@pytest.mark.parametrize("ending, status", [(None, "finished"), (ValueError, "failed"), (KeyboardInterrupt, "stopped")])
def test_a_with_block_ends_the_run_as_the_block_ended(ending, status: str) -> None:
    """`with watch(...) as run:`: finished, failed on an exception (its message kept), stopped on Ctrl-C."""
    model, optimizer = model_and_optimizer()
    with pytest.raises(ending) if ending else contextlib.nullcontext():
        with watch(model, optimizer, every=1) as run:
            train(run, model, optimizer, 2)
            if ending:
                raise ending("out of memory")
    stored = RunStore().get(run.run_id)
    assert stored.status == status, stored.status
    assert (stored.error is not None) == (ending is not None)


def test_a_store_that_cannot_be_used_warns_once_and_training_goes_on(tmp_path, capfd) -> None:
    """A store path inside a regular file: one warning on stderr; every step trains; the records stay in
    memory, and the diagnosis reads them."""
    (tmp_path / "file").write_text("not a folder")
    model, optimizer = model_and_optimizer()
    run = watch(model, optimizer, every=2, store=str(tmp_path / "file" / "runs.sqlite3"))
    train(run, model, optimizer, 8)
    rows = run.rows()
    run.finish()
    warned = [line for line in capfd.readouterr().err.splitlines() if line.startswith("explorer.watch: cannot write")]
    assert len(warned) == 1 and "Training goes on" in warned[0], warned
    assert sum(r[2] == "loss" for r in rows) == 8
    assert run.diagnosis() and run.run_id is None


def test_a_locked_store_never_holds_the_training_back() -> None:
    """Another process holds the store's write lock: all 40 steps train meanwhile (the writer waits in its
    own thread); once the lock is gone, every record lands."""
    model, optimizer = model_and_optimizer()
    run = watch(model, optimizer, every=1)
    run_id = run.run_id
    lock = sqlite3.connect(os.environ["EXPLORER_STORE"], isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        train(run, model, optimizer, 40)
        assert run.probe.step == 40, "every step trained while the store was locked"
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    run.finish()
    frame = RunStore().frame(run_id)
    assert RunStore().get(run_id).status == "finished" and (frame.metric == "loss").sum() == 40


SCRIPT = textwrap.dedent("""
    import sys, torch
    from torch import nn
    from explorer import watch
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    run = watch(model, optimizer, name=sys.argv[1], every=2)
    for step in range(30):
        x = torch.randn(32, 8)
        loss = nn.functional.cross_entropy(model(x), (x[:, 0] > 0).long())
        loss.backward(); optimizer.step(); optimizer.zero_grad(); run.log(loss=loss)
    run.rows()  # everything so far is in the store
    print(run.run_id, flush=True)
    if sys.argv[2] == "wait":
        sys.stdin.readline()
    if sys.argv[2] == "raise":
        raise RuntimeError("the loader broke")
    # "exit": no finish(): the interpreter's exit ends the run
""")


def script(name: str, then: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EXPLORER_TORCH_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", SCRIPT, name, then], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_script_killed_by_sigkill_leaves_an_incomplete_run_never_a_finished_one() -> None:
    """SIGKILL runs no exit hook: the run's writer is gone, so the run reads as incomplete, with its records."""
    child = script("killed", "wait")
    try:
        run_id = child.stdout.readline().strip()
        assert RunStore().get(run_id).status == "running"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    store = RunStore()
    assert store.get(run_id).status == "incomplete"
    assert [r.run_id for r in store.list_runs(status="incomplete")] == [run_id]
    assert store.list_runs(status="finished") == [] and (store.frame(run_id).metric == "loss").sum() == 30


@pytest.mark.slow  # two interpreters importing torch: seconds
def test_two_scripts_at_once_make_two_whole_runs_and_a_crash_ends_one_failed() -> None:
    """Two scripts watch at once: two runs, none of their records lost; one ends at exit without finish()
    (finished), the other by an uncaught exception (failed, its message kept)."""
    children = [script("exits", "exit"), script("raises", "raise")]
    for child in children:
        child.communicate(timeout=120)
    store = RunStore()
    runs = {r.name: r for r in store.list_runs("watched")}
    assert runs["exits"].status == "finished" and runs["raises"].status == "failed", {k: r.status for k, r in runs.items()}
    assert "RuntimeError: the loader broke" in runs["raises"].error
    assert [(store.frame(r.run_id).metric == "loss").sum() for r in runs.values()] == [30, 30]


def test_watch_refuses_a_bad_ranks_value_in_one_line() -> None:
    model, optimizer = model_and_optimizer()
    with pytest.raises(WatchError, match="ranks must be '0'"):
        watch(model, optimizer, ranks="some")
