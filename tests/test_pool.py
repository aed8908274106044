"""The worker pool: runs train in warm worker processes, queue when every worker is busy, stop,
survive a killed worker, and leave no process behind. Processes are counted among this
test's own descendants only (other sessions on the machine run their own workers)."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import psutil
import pytest

from explorer.runs.handle import RunHandle
from explorer.runs.pool import WorkerPool
from explorer.runs.processes import cpu_seconds, descendants, wait_quiet
from explorer.runs.store import RunStore
from no_proc import hide_proc
from scenarios import get_scenario
from scenarios.base import Run, Scenario, ScenarioConfig

SCENARIO = get_scenario("vanishing-gradients")
LONG = SCENARIO.validate({"steps": 3000})
WAIT_S = 120  # generous: the machine is shared; nothing here asserts on wall time


@pytest.fixture(scope="module")
def pool():
    pool = WorkerPool(size=1)
    assert pool.wait_ready(WAIT_S), "the worker never became ready"
    yield pool
    pool.shutdown()


def wait_until(condition, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class Hang(Scenario):
    """Starts a process of its own (as the distributed scenario starts ranks), then never
    checks Stop: only ending its worker ends it."""
    id, title, question, terms, formula = "hang", "Hang", "Does Stop end it?", {}, "x"

    class Config(ScenarioConfig):
        pass

    def execute(self, config: ScenarioConfig, run: Run) -> None:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        run.add("arm", 0, {"loss": 1.0, "child_pid": float(child.pid)})
        time.sleep(600)


def test_a_worker_run_gives_the_records_of_the_headless_run(pool, isolated_store) -> None:
    config = SCENARIO.validate(SCENARIO.tiny)
    handle = RunHandle.start(SCENARIO, config, RunStore(), pool=pool)
    assert handle.join(WAIT_S)
    snap = handle.snapshot()
    assert snap.status == "finished" and snap.run_id is not None
    headless = SCENARIO.run(config).frame
    assert snap.frame.equals(headless), "the worker's records differ from the same config run in-process"
    assert RunStore().frame(snap.run_id).equals(headless), "the stored rows are the rows the page drew"


def test_a_worker_reports_the_machine_once_torch_is_imported_then_warms_up() -> None:
    """The page can check settings against the machine (and queue a run) ~2.5 s of CPU into a
    worker's start, not after the whole warm-up."""
    proc = subprocess.Popen([sys.executable, "-m", "explorer.runs.worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        first, second = json.loads(proc.stdout.readline()), json.loads(proc.stdout.readline())
        assert first["kind"] == "machine" and first["machine"]["cpus"] >= 1, first
        assert second["kind"] == "ready" and second["machine"]["cpus"] == first["machine"]["cpus"], second
    finally:
        proc.stdin.close()
        proc.wait(timeout=WAIT_S)


def test_a_run_submitted_while_the_workers_start_waits_for_one_then_trains(isolated_store) -> None:
    fresh = WorkerPool(size=1)
    try:
        handle = RunHandle.start(SCENARIO, SCENARIO.validate({"steps": 10}), RunStore(), pool=fresh)
        assert "warming up" in (handle.snapshot().waiting or ""), handle.snapshot().waiting
        # The page's wait for the first records returns at once for a queued run (no record comes soon).
        assert handle.wait_for_first_record(WAIT_S) is False and handle.snapshot().waiting
        assert handle.join(WAIT_S) and handle.snapshot().status == "finished", handle.snapshot()
    finally:
        fresh.shutdown()


def test_a_run_queues_while_every_worker_is_busy_and_stop_ends_each(pool, isolated_store) -> None:
    store = RunStore()
    first = RunHandle.start(SCENARIO, LONG, store, pool=pool)
    second = RunHandle.start(SCENARIO, SCENARIO.validate({**SCENARIO.tiny, "seed": 1}), store, pool=pool)
    third = RunHandle.start(SCENARIO, SCENARIO.validate({**SCENARIO.tiny, "seed": 2}), store, pool=pool)
    first.wait_for_first_record(WAIT_S)
    waits = (second.snapshot().waiting, third.snapshot().waiting)
    assert waits == ("queued (next in line; 0 of 1 worker free)", "queued (1 ahead; 0 of 1 worker free)"), waits

    second.stop()  # queued: ends at once, never trained
    assert second.join(WAIT_S) and second.snapshot().status == "stopped" and second.snapshot().frame.empty
    assert third.snapshot().waiting == "queued (next in line; 0 of 1 worker free)", third.snapshot().waiting
    first.stop()
    assert first.join(WAIT_S)
    stopped = first.snapshot()
    assert stopped.status == "stopped" and not stopped.frame.empty and stopped.frame["step"].max() < 2999
    assert third.join(WAIT_S) and third.snapshot().status == "finished", "the queued run ran once a worker was free"
    statuses = sorted(r.status for r in store.list_runs())
    assert statuses == ["finished", "stopped"], f"stored {statuses}: the run stopped in the queue must not be"


def test_a_run_stopped_before_its_first_record_is_not_stored(pool, isolated_store) -> None:
    handle = RunHandle.start(SCENARIO, LONG, RunStore(), pool=pool)
    handle.stop()
    assert handle.join(WAIT_S)
    assert handle.snapshot().status == "stopped" and RunStore().count() == 0


def test_a_superseded_run_is_not_stored(pool, isolated_store) -> None:
    handle = RunHandle.start(SCENARIO, LONG, RunStore(), pool=pool)
    assert handle.wait_for_first_record(WAIT_S, steps=2) and handle.snapshot().steps >= 2, "a line's first two points"
    handle.stop(keep=False)
    assert handle.join(WAIT_S) and not handle.snapshot().frame.empty
    assert RunStore().count() == 0


def test_a_run_that_ignores_stop_ends_with_its_worker_and_its_processes(pool, isolated_store, monkeypatch) -> None:
    """With /proc hidden from our code (as on macOS): the worker's tree is found and ended all the same."""
    refused = hide_proc(monkeypatch)
    handle = RunHandle.start(Hang(), Hang.Config(), RunStore(), pool=pool)
    assert handle.wait_for_first_record(WAIT_S)
    worker, = pool.pids()
    child = int(handle.snapshot().frame.query("metric == 'child_pid'")["value"].iloc[0])
    assert child in descendants(worker)
    handle.stop()
    assert handle.join(WAIT_S) and handle.snapshot().status == "stopped"
    wait_until(lambda: not alive(worker) and not alive(child), "the worker and its child to end")
    wait_until(lambda: len(pool.pids()) == 1 and pool.pids() != [worker], "a replacement worker")
    assert pool.wait_ready(WAIT_S)
    assert not refused, f"read /proc itself: {refused}"


def test_a_killed_worker_fails_its_run_with_a_message_and_is_replaced(pool, isolated_store) -> None:
    handle = RunHandle.start(SCENARIO, LONG, RunStore(), pool=pool)
    assert handle.wait_for_first_record(WAIT_S)
    worker, = pool.pids()
    os.kill(worker, signal.SIGKILL)
    assert handle.join(WAIT_S)
    snap = handle.snapshot()
    assert snap.status == "failed" and "died, killed by SIGKILL" in snap.error, snap.error
    assert RunStore().get(snap.run_id).status == "failed", "a crashed run is stored with its error"
    wait_until(lambda: pool.pids() and pool.pids() != [worker], "a replacement worker")
    assert pool.wait_ready(WAIT_S)
    again = RunHandle.start(SCENARIO, SCENARIO.validate(SCENARIO.tiny), RunStore(), pool=pool)
    assert again.join(WAIT_S) and again.snapshot().status == "finished"


def test_shutdown_leaves_no_process(monkeypatch) -> None:
    """With /proc hidden from our code (as on macOS): shutdown ends both workers and what they started."""
    refused = hide_proc(monkeypatch)
    pool = WorkerPool(size=2)
    assert pool.wait_ready(WAIT_S)
    handle = RunHandle.start(Hang(), Hang.Config(), pool=pool)
    assert handle.wait_for_first_record(WAIT_S)
    before = set(pool.pids()) | {pid for worker in pool.pids() for pid in descendants(worker)}
    assert before <= set(descendants(os.getpid())) and len(before) == 3, "two workers and the hanging run's child"
    pool.shutdown()
    assert handle.join(WAIT_S) and handle.snapshot().status == "stopped"
    wait_until(lambda: not any(alive(pid) for pid in before), "every worker process to end")
    assert not refused, f"read /proc itself: {refused}"


def test_a_distributed_page_starts_its_rank_processes_ahead_and_its_run_takes_them(monkeypatch, isolated_store) -> None:
    """`prepare` (the DDP page, read while nothing trains) has one worker start the rank
    processes; the run goes to that worker and takes them: no rank process is started for it."""
    from tests.descendants import ranks_alive, tag_environment
    tag = tag_environment(monkeypatch)
    ddp = get_scenario("ddp-fsdp-memory")
    config = ddp.validate(ddp.tiny)  # one rank process
    assert ddp.rank_processes(config) == 1 and ddp.rank_processes(ddp.validate({})) == 3
    pool = WorkerPool(size=2)
    try:
        assert pool.wait_ready(WAIT_S)
        assert ranks_alive(tag) == []
        pool.prepare(2)
        wait_until(lambda: len(ranks_alive(tag)) == 2, "two rank processes started ahead")
        ahead = set(ranks_alive(tag))
        owner = [pid for pid in pool.pids() if ahead <= set(descendants(pid))]
        assert len(owner) == 1, "one worker holds both"
        pool.prepare(2)
        pool.prepare(1)  # already there: nothing more starts
        handle = RunHandle.start(ddp, config, RunStore(), pool=pool)
        assert handle.join(WAIT_S) and handle.snapshot().status == "finished", handle.snapshot().error
        left = set(ranks_alive(tag))
        assert left < ahead and len(left) == 1, f"the run took one of {ahead} and started none: {left} left"
    finally:
        pool.shutdown()
    wait_until(lambda: not ranks_alive(tag), "every rank process to end with the pool")


def test_rank_processes_asked_for_while_the_workers_start_are_started_once_one_is_warm(monkeypatch) -> None:
    """A DDP page read on a fresh server asks before any worker is ready (the page stops looking
    once the machine is known): the first warm worker starts them."""
    from tests.descendants import ranks_alive, tag_environment
    tag = tag_environment(monkeypatch)
    pool = WorkerPool(size=1)
    try:
        pool.prepare(2)  # the worker is still importing torch
        assert ranks_alive(tag) == []
        wait_until(lambda: len(ranks_alive(tag)) == 2, "two rank processes started once the worker was warm")
    finally:
        pool.shutdown()
    wait_until(lambda: not ranks_alive(tag), "every rank process to end with the pool")


SERVER = """
import faulthandler, signal, sys, time
faulthandler.register(signal.SIGUSR1)  # the test asks for every thread's stack if the server hangs
from explorer.runs.pool import WorkerPool
pool = WorkerPool(size=2)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # as `streamlit run` does: exit, atexit runs
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a terminal (a background job ignores it)
pool.wait_ready(120)
# The handlers are in place before the test hears the pids: a signal sent at once is never lost
# (a server started from a background job inherits SIGINT ignored until the line above).
print(" ".join(map(str, pool.pids())), flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("signum", [pytest.param(s, marks=pytest.mark.slow) for s in (signal.SIGTERM, signal.SIGINT)]
                         + [signal.SIGKILL], ids=lambda s: s.name)
def test_no_worker_outlives_its_server(signum) -> None:
    """However the server ends — SIGTERM, Ctrl-C, SIGKILL (no cleanup) — its workers end (the first two: -m slow)."""
    errors = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: nothing the server writes can block it
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, stderr=errors, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    workers = [int(pid) for pid in server.stdout.readline().split()]
    assert len(workers) == 2 and all(alive(pid) for pid in workers)
    server.send_signal(signum)
    try:
        server.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:  # say where it hangs: every thread's stack, then end it
        server.send_signal(signal.SIGUSR1)
        time.sleep(1.0)  # faulthandler writes at once; a second for a loaded machine (the test has failed already)
        server.kill()
        server.wait()
        errors.seek(0)
        pytest.fail(f"the server did not end within {WAIT_S} s of {signum.name}; its threads:\n{errors.read()[-6000:]}")
    finally:
        errors.close()
    wait_until(lambda: not any(alive(pid) for pid in workers), f"the workers to end after {signum.name}")


def test_when_no_worker_can_start_the_pool_says_why_and_the_page_turns_run_off(isolated_store) -> None:
    """Workers that die before they are ready (here: a bad EXPLORER_TORCH_THREADS) are not
    restarted in a loop; the pool keeps the reason, a run submitted then fails with it, and the
    line beside Run says it instead of "Starting the workers" for ever."""
    from explorer.page.run_note import run_note
    pool = WorkerPool(size=1, env={"EXPLORER_TORCH_THREADS": "many"})
    try:
        wait_until(lambda: pool.failure() is not None, "the pool to give up")
        assert "no worker could start" in pool.failure() and "many" in pool.failure(), pool.failure()
        assert pool.machine() is None
        handle = RunHandle.start(SCENARIO, SCENARIO.validate({"steps": 10}), RunStore(), pool=pool)
        assert handle.join(WAIT_S) and handle.snapshot().status == "failed"
        assert "no worker could start" in handle.snapshot().error
        note = run_note(SCENARIO, SCENARIO.validate({}), None, None, None, None, 1, True, pool.failure())
        assert note == "Run is off: no worker process could start on this server."
        assert run_note(SCENARIO, SCENARIO.validate({}), None, None, None, None, 1, True) == \
            "Starting the workers (importing torch)…"
    finally:
        pool.shutdown()


def test_wait_quiet_tells_a_busy_process_from_an_idle_one() -> None:
    busy = subprocess.Popen([sys.executable, "-c", "print('up', flush=True)\nwhile True: pass"], stdout=subprocess.PIPE)
    idle = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"],
                            stdout=subprocess.PIPE)
    try:
        assert busy.stdout.readline() == idle.stdout.readline() == b"up\n"  # both past their start
        assert wait_quiet(lambda: [idle.pid], timeout_s=10) is None
        # Busy: any CPU at all in its windows (a loaded machine may give it little), so it never reads quiet.
        used = wait_quiet(lambda: [busy.pid], timeout_s=1.0, idle_cpu_s=0.0)
        assert used is not None and used[busy.pid] > 0, used
        assert cpu_seconds(busy.pid) > cpu_seconds(idle.pid)
    finally:
        busy.kill(), idle.kill(), busy.wait(), idle.wait()
    assert cpu_seconds(busy.pid) == 0.0, "an ended process has used nothing"

