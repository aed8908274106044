"""The scenario page under AppTest with runs going to Ray: the same page (Run, queue position, Stop, the stored
run), with where runs train said beside the settings; an address nobody answers said on the page, Run off, and
the local pool offered, which then trains. Slow: a private Ray and local workers start."""
import time

import pytest
from streamlit.testing.v1 import AppTest

from explorer.page.session import _choice, worker_pool
from explorer.runs.handle import RunHandle
from explorer.runs.store import RunStore
from ray_helpers import WAIT_S, need_ray
from scenarios import get_scenario
from tests.test_app import progress_text, run_until, run_until_done, scenario_page
from tests.test_url import shown

pytestmark = pytest.mark.slow
SCENARIO = get_scenario("vanishing-gradients")


@pytest.fixture
def ray_page(monkeypatch):
    """The page's backend chosen afresh from the environment, and ended after the test."""
    need_ray()
    worker_pool.clear()
    _choice.clear()
    yield monkeypatch
    backend = worker_pool()
    worker_pool.clear()
    _choice.clear()
    backend.shutdown()


def opened(auto: bool = False) -> AppTest:
    at = AppTest.from_function(scenario_page, args=(SCENARIO.id,), default_timeout=60)
    at.session_state[f"autorun:{SCENARIO.id}"] = auto
    return at.run()


def texts(at: AppTest, kind: str) -> list[str]:
    return [shown(element.value) for element in at.get(kind)]


def test_on_a_private_ray_the_page_queues_stops_and_runs_as_on_this_machine(ray_page) -> None:
    """One Ray worker: the sidebar says where runs train; pressed while another tab's run holds the worker, Run
    says its place and the free workers, and Stop ends it unstored; then Run trains and stores."""
    ray_page.setenv("EXPLORER_RAY_ADDRESS", "local")
    ray_page.setenv("EXPLORER_WORKERS", "1")
    at = opened()
    assert worker_pool().wait_ready(WAIT_S), worker_pool().failure()
    at = at.run()
    captions = texts(at, "caption")
    assert any("Runs train on a private Ray on this machine: 1 of 1 workers free, 1 node" in c for c in captions), captions
    busy = RunHandle.start(SCENARIO, SCENARIO.validate({"steps": 3000}), RunStore(), pool=worker_pool(), session="other")
    try:
        assert busy.wait_for_first_record(WAIT_S)
        at = at.button(key="run").click().run()
        assert "queued (next in line; 0 of 1 worker free)" in progress_text(at), progress_text(at)
        at = at.button(key="stop").click().run()
        assert progress_text(at).startswith("Stopped") and RunStore().count() == 0, progress_text(at)
    finally:
        busy.stop(keep=False)
        busy.join(WAIT_S)
    at.button(key="run").click()
    at = run_until_done(at, WAIT_S)
    assert progress_text(at).startswith("Finished") and RunStore().count() == 1, progress_text(at)


def test_an_unreachable_cluster_is_said_on_the_page_which_offers_the_local_pool(ray_page) -> None:
    """Nothing answers at the address: within its connect bound the page says so, Run is off, and the button
    moves this server's runs to the local warm pool, where Run trains."""
    ray_page.setenv("EXPLORER_RAY_ADDRESS", "127.0.0.1:9")
    ray_page.setenv("EXPLORER_RAY_CONNECT_S", "3")
    at = run_until(opened(), lambda a: any("Runs cannot go to the Ray cluster" in e for e in texts(a, "error")), WAIT_S)
    errors = texts(at, "error")
    assert any("could not reach the Ray cluster at 127.0.0.1:9 within 3 s" in e for e in errors), errors
    assert at.button(key="run").disabled
    at.button(key="use-local-pool").click().run()
    assert worker_pool().name == "local" and worker_pool().wait_ready(WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while at.button(key="run").disabled and time.monotonic() < deadline:
        at = at.run()
    at.button(key="run").click()
    at = run_until_done(at, WAIT_S)
    assert progress_text(at).startswith("Finished"), progress_text(at)
