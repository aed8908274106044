"""Runs on a real Ray, the default run's share: a private Ray on 127.0.0.1 started by the test through the
backend (what `EXPLORER_RAY_ADDRESS=local` does) trains a tiny run with the local records, stores it here,
and Stop ends a long one after a step; an address nobody answers fails within its bound. The two-node
cluster, killed nodes, a lost cluster, version checks and the page are in tests/test_ray_cluster.py (slow)."""
import pytest

from explorer.runs import ray_backend
from explorer.runs.handle import RunHandle
from explorer.runs.ray_backend import RayBackend
from explorer.runs.store import RunStore
from ray_helpers import WAIT_S, descendants, need_ray, new_descendants_end
from scenarios import get_scenario

SCENARIO = get_scenario("vanishing-gradients")
LONG = SCENARIO.validate({"steps": 3000})


@pytest.fixture(scope="module")
def private_ray():
    """One private Ray with one warm worker for the module; shut down, and every process it started ended."""
    need_ray()
    before = descendants()
    backend = RayBackend("local", size=1)
    try:
        assert backend.wait_ready(WAIT_S), f"the private Ray never warmed a worker: {backend.failure()}"
        yield backend
    finally:
        backend.shutdown()
        left = new_descendants_end(before)
        assert not left, f"processes the private Ray left behind: {left}"


def test_a_private_ray_trains_the_local_records_and_stop_ends_a_run_after_a_step(private_ray, isolated_store) -> None:
    """The tiny run's records (streamed back in batches) equal the same config trained in-process, as a local
    worker trains it (tests/test_pool.py), and are stored here; a 3000-step run stops after a few steps, stored
    as stopped, and its worker is free again without being replaced."""
    config = SCENARIO.validate(SCENARIO.tiny)
    handle = RunHandle.start(SCENARIO, config, RunStore(), pool=private_ray, session="test")
    assert handle.join(WAIT_S), "the tiny run never ended"
    snap, local = handle.snapshot(), SCENARIO.run(config).frame
    assert snap.status == "finished" and snap.run_id is not None, (snap.status, snap.error)
    assert snap.frame.equals(local), f"{len(snap.frame)} rows from Ray vs {len(local)} in-process, or different values"
    assert RunStore().frame(snap.run_id).equals(local), "the stored rows are the rows that came back"

    long = RunHandle.start(SCENARIO, LONG, RunStore(), pool=private_ray, session="test")
    assert long.wait_for_first_record(WAIT_S), "the long run drew nothing"
    long.stop()
    assert long.join(WAIT_S), "Stop did not end the run"
    stopped = long.snapshot()
    assert stopped.status == "stopped" and 0 < stopped.steps < 3000, (stopped.status, stopped.steps)
    assert RunStore().get(stopped.run_id).status == "stopped"
    status = private_ray.status()
    assert (status.backend, status.workers) == ("ray", 1), status


def test_an_address_nobody_answers_fails_within_its_bound_and_says_why(isolated_store) -> None:
    """ray.init to a closed port waits for minutes; the backend ends its driver after the connect bound, the
    queued run fails with the reason, Run turns off (no machine), and the driver is gone."""
    need_ray()
    before = descendants()
    backend = RayBackend("127.0.0.1:9", connect_timeout_s=3)  # the discard port: nothing listens
    try:
        handle = RunHandle.start(SCENARIO, SCENARIO.validate(SCENARIO.tiny), RunStore(), pool=backend, session="t")
        assert handle.join(WAIT_S), "the run waited on an unreachable cluster without end"
        snap = handle.snapshot()
        assert snap.status == "failed" and "could not reach the Ray cluster at 127.0.0.1:9 within 3 s" in snap.error, snap
        assert backend.machine() is None and backend.failure() == snap.error
    finally:
        backend.shutdown()
    assert not new_descendants_end(before), "the driver outlived its backend"


def test_without_ray_installed_the_backend_says_how_to_install_it(monkeypatch, isolated_store) -> None:
    """No process starts; the run fails with the extra to install."""
    monkeypatch.setattr(ray_backend, "ray_installed", lambda: False)
    backend = RayBackend("local")
    handle = RunHandle.start(SCENARIO, SCENARIO.validate(SCENARIO.tiny), None, pool=backend)
    assert handle.join(5)
    assert "pip install '.[cluster]'" in handle.snapshot().error and backend.pids() == []
