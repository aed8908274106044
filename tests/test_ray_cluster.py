"""A simulated multi-node Ray cluster on one machine (`ray.cluster_utils.Cluster`, every node on 127.0.0.1,
started by the test): runs, a stop, a distributed run's ranks in a placement group, a killed worker node, a
lost cluster, a node of another version. Slow: a head, its nodes and warm actors start for each test."""
import os

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # read when ray is imported: nodes bind to 127.0.0.1

import pytest  # noqa: E402

from explorer.runs.handle import RunHandle  # noqa: E402
from explorer.runs.ray_backend import RayBackend, versions  # noqa: E402
from explorer.runs.store import RunStore  # noqa: E402
from ray_helpers import WAIT_S, descendants, need_ray, new_descendants_end  # noqa: E402
from scenarios import get_scenario  # noqa: E402

pytestmark = pytest.mark.slow
SCENARIO = get_scenario("vanishing-gradients")
TINY = SCENARIO.validate(SCENARIO.tiny)
LONG = SCENARIO.validate({"steps": 3000})
NODE = {"object_store_memory": 80 * 2**20}


@pytest.fixture
def cluster():
    """A head that trains nothing (0 CPUs; the page's server would sit beside it) and no nodes yet."""
    need_ray()
    from ray.cluster_utils import Cluster
    before = descendants()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False, **NODE})
    try:
        yield cluster
    finally:
        cluster.shutdown()
        left = new_descendants_end(before)
        assert not left, f"processes left after the cluster and its driver ended: {left}"


@pytest.fixture
def backends():
    """Every backend a test starts, shut down after it (before its cluster)."""
    started: list[RayBackend] = []
    yield started
    for backend in started:
        backend.shutdown()


def connect(cluster, backends, **options) -> RayBackend:
    backend = RayBackend(cluster.address, **options)
    backends.append(backend)
    return backend


def test_a_two_node_cluster_trains_stops_and_runs_a_distributed_run_in_a_placement_group(cluster, backends,
                                                                                          isolated_store) -> None:
    """Nodes of 2 and 1 CPUs, one warm worker: the tiny run's records are the in-process ones; Stop ends a long
    run; the collectives run's 2 ranks (one CPU each: the worker's node has one left) train to the end."""
    cluster.add_node(num_cpus=2, **NODE)
    cluster.add_node(num_cpus=1, **NODE)
    backend = connect(cluster, backends, size=1)
    assert backend.wait_ready(WAIT_S), backend.failure()
    assert backend.status().nodes == 3, backend.status()
    handle = RunHandle.start(SCENARIO, TINY, RunStore(), pool=backend, session="a")
    assert handle.join(WAIT_S) and handle.snapshot().frame.equals(SCENARIO.run(TINY).frame), handle.snapshot().error

    long = RunHandle.start(SCENARIO, LONG, RunStore(), pool=backend, session="a")
    assert long.wait_for_first_record(WAIT_S)
    long.stop()
    assert long.join(WAIT_S) and long.snapshot().status == "stopped", long.snapshot().status

    collectives = get_scenario("collectives")
    config = collectives.validate({**collectives.tiny, "world_size": 2})
    ranked = RunHandle.start(collectives, config, RunStore(), pool=backend, session="b")
    assert ranked.join(WAIT_S), "the distributed run never ended"
    snap = ranked.snapshot()
    assert snap.status == "finished", (snap.status, snap.error)
    assert set(snap.frame["arm"]) == set(collectives.run(config).frame["arm"]), sorted(set(snap.frame["arm"]))


def test_a_killed_worker_node_fails_its_run_with_rays_message_and_a_new_node_trains_again(cluster, backends,
                                                                                         isolated_store) -> None:
    """The only node with CPUs dies mid-run: the run fails naming the dead worker, is stored as failed (never
    complete), and once a node joins a fresh worker warms up there and trains the next run."""
    node = cluster.add_node(num_cpus=1, **NODE)
    backend = connect(cluster, backends, size=1)
    assert backend.wait_ready(WAIT_S), backend.failure()
    long = RunHandle.start(SCENARIO, LONG, RunStore(), pool=backend, session="a")
    assert long.wait_for_first_record(WAIT_S)
    cluster.remove_node(node, allow_graceful=False)
    assert long.join(WAIT_S), "the run outlived its node"
    snap = long.snapshot()
    assert snap.status == "failed" and "the Ray worker training this run died" in snap.error, (snap.status, snap.error)
    assert RunStore().get(snap.run_id).status == "failed"
    assert backend.failure() is None, backend.failure()
    cluster.add_node(num_cpus=1, **NODE)
    again = RunHandle.start(SCENARIO, TINY, RunStore(), pool=backend, session="a")
    assert again.join(WAIT_S) and again.snapshot().status == "finished", again.snapshot().error


def test_a_lost_cluster_fails_the_run_with_the_reason_and_the_backend_keeps_answering(cluster, backends,
                                                                                      isolated_store) -> None:
    """The whole cluster goes mid-run: the run fails with why, the backend says the cluster is lost (Run off),
    and a run submitted now fails at once with that reason instead of waiting."""
    cluster.add_node(num_cpus=1, **NODE)
    backend = connect(cluster, backends, size=1)
    assert backend.wait_ready(WAIT_S), backend.failure()
    long = RunHandle.start(SCENARIO, LONG, RunStore(), pool=backend, session="a")
    assert long.wait_for_first_record(WAIT_S)
    cluster.shutdown()
    assert long.join(WAIT_S), "the run outlived its cluster"
    snap = long.snapshot()
    assert snap.status == "failed" and snap.error, snap
    late = RunHandle.start(SCENARIO, TINY, RunStore(), pool=backend, session="b")
    assert late.join(WAIT_S), "a run submitted to a lost cluster waited"
    assert late.snapshot().status == "failed" and backend.machine() is None, late.snapshot()
    assert backend.failure() and backend.status().workers == 0, backend.status()


def test_a_node_running_another_version_is_refused_at_connect_naming_both(cluster, backends, isolated_store) -> None:
    """This server expects torch 0.0.1: the node's worker reports its own torch, and the backend refuses the cluster."""
    cluster.add_node(num_cpus=1, **NODE)
    expected = {**versions(), "torch": "0.0.1"}
    backend = connect(cluster, backends, size=1, expect=expected)
    assert not backend.wait_ready(WAIT_S)
    failure = backend.failure() or ""
    assert "refused the Ray cluster" in failure and f"torch {versions()['torch']}" in failure \
        and "torch 0.0.1" in failure, failure
    handle = RunHandle.start(SCENARIO, TINY, RunStore(), pool=backend, session="a")
    assert handle.join(WAIT_S) and handle.snapshot().status == "failed"


def test_the_cli_and_the_api_train_on_the_cluster_and_say_so(cluster, isolated_store, capsys, monkeypatch) -> None:
    """`tdx run --ray ADDRESS --json` names the backend "ray" and stores the run here; so does `explorer.run(ray=...)`."""
    import json

    import explorer
    from explorer.cli.main import main
    cluster.add_node(num_cpus=1, **NODE)
    monkeypatch.setenv("EXPLORER_WORKERS", "1")
    assert main(["run", SCENARIO.id, "--set", "steps=20", "--ray", cluster.address, "--json", "--quiet"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["backend"], printed["status"]) == ("ray", "finished"), printed
    assert RunStore().get(printed["run_id"]).status == "finished", "stored on this machine"
    result = explorer.run(SCENARIO.id, steps=21, ray=cluster.address, progress=False)
    assert (result.backend, result.status) == ("ray", "finished") and len(result.frame), result
