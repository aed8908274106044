"""The run manager: background runs that stop on request, report errors, and keep apart."""
import time

import pytest

from explorer.runs import RunHandle
from explorer.store import RunStore
from scenarios import get_scenario
from scenarios.base import Event, Run, Scenario, ScenarioConfig

SCENARIO = get_scenario("vanishing-gradients")


def wait_for_rows(handle: RunHandle, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while handle.snapshot().frame.empty:
        assert time.time() < deadline, "no records arrived"
        time.sleep(0.01)


def test_stop_ends_a_run_within_a_second_and_keeps_its_rows(isolated_store) -> None:
    handle = RunHandle.start(SCENARIO, SCENARIO.validate({"steps": 3000}), RunStore())
    wait_for_rows(handle)
    handle.stop()
    stopped_at = time.perf_counter()
    assert handle.join(timeout=5)
    assert time.perf_counter() - stopped_at < 1.0
    snap = handle.snapshot()
    assert snap.status == "stopped" and not snap.frame.empty and snap.frame["step"].max() < 2999
    stored = RunStore().get(snap.run_id)
    assert stored.status == "stopped" and len(RunStore().frame(snap.run_id)) == len(snap.frame)


def test_two_runs_at_once_do_not_touch_each_other(isolated_store) -> None:
    """Two handles (two browser tabs) train concurrently and match their solo results."""
    configs = [SCENARIO.validate({"depth": 4, "steps": 40, "seed": s}) for s in (1, 2)]
    handles = [RunHandle.start(SCENARIO, c) for c in configs]
    assert all(h.join(timeout=60) for h in handles)
    for handle, config in zip(handles, configs):
        solo = SCENARIO.run(config).frame
        assert handle.snapshot().frame.equals(solo), f"seed {config.seed} differs when run beside another"


class Boom(Scenario):
    id, title, question, terms, formula = "boom", "Boom", "Does it fail?", ("x",), "x"

    class Config(ScenarioConfig):
        pass

    def execute(self, config: ScenarioConfig, run: Run) -> None:
        run.add("arm", 0, {"loss": 1.0})
        raise ValueError("the engine broke")


def test_a_run_that_raises_reports_its_error_and_keeps_partial_rows(isolated_store) -> None:
    handle = RunHandle.start(Boom(), Boom.Config(), RunStore())
    assert handle.join(timeout=10)
    snap = handle.snapshot()
    assert snap.status == "failed" and snap.error == "ValueError: the engine broke"
    assert "Traceback" in handle.traceback and len(snap.frame) == 1
    assert RunStore().get(snap.run_id).error == "ValueError: the engine broke"


def test_a_stored_run_is_served_without_training(isolated_store) -> None:
    store = RunStore()
    config = SCENARIO.validate(SCENARIO.tiny)
    trained = RunHandle.start(SCENARIO, config, store)
    trained.join(timeout=60)
    stored = store.lookup(SCENARIO.id, config.model_dump(mode="json"), SCENARIO.code_version())
    served = RunHandle.from_stored(SCENARIO, stored, store).snapshot()
    assert served.from_store and served.status == "finished"
    assert served.frame.equals(trained.snapshot().frame)
