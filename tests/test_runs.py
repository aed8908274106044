"""Run handles: a worker's run reports its error, two runs keep apart, a stored run is served,
a refused config stores nothing. (The pool's own behaviour: tests/test_pool.py.)"""
import pytest

from explorer.runs.handle import RunHandle
from explorer.runs.pool import WorkerPool
from explorer.runs.store import RunStore
from scenarios import get_scenario
from scenarios.base import ConfigError, Machine, Run, Scenario, ScenarioConfig

SCENARIO = get_scenario("vanishing-gradients")
WAIT_S = 120


@pytest.fixture(scope="module")
def pool():
    pool = WorkerPool(size=2)
    assert pool.wait_ready(WAIT_S)
    yield pool
    pool.shutdown()


class Boom(Scenario):
    id, title, question, terms, formula = "boom", "Boom", "Does it fail?", {}, "x"

    class Config(ScenarioConfig):
        pass

    def execute(self, config: ScenarioConfig, run: Run) -> None:
        run.add("arm", 0, {"loss": 1.0})
        raise ValueError("the engine broke")


class Picky(Scenario):
    """Refuses what it cannot run: before Run (`refusal`), and in the worker (`ConfigError`)."""
    id, title, question, terms, formula = "picky", "Picky", "Is it refused?", {}, "x"

    class Config(ScenarioConfig):
        pass

    def refusal(self, config: ScenarioConfig, machine: Machine) -> str | None:
        return "This needs 8 GPUs and the machine has none." if machine.gpus < 8 else None

    def execute(self, config: ScenarioConfig, run: Run) -> None:
        raise ConfigError("This needs 8 GPUs and the machine has none.")


def test_a_run_that_raises_reports_its_error_and_keeps_partial_rows(pool, isolated_store) -> None:
    handle = RunHandle.start(Boom(), Boom.Config(), RunStore(), pool=pool)
    assert handle.join(WAIT_S)
    snap = handle.snapshot()
    assert snap.status == "failed" and snap.error == "ValueError: the engine broke"
    assert "Traceback" in handle.traceback and len(snap.frame) == 1
    assert RunStore().get(snap.run_id).error == "ValueError: the engine broke"


def test_a_refused_config_is_refused_in_plain_words_and_stores_nothing(pool, isolated_store) -> None:
    assert Picky().refusal(Picky.Config(), pool.machine(WAIT_S)) == "This needs 8 GPUs and the machine has none."
    handle = RunHandle.start(Picky(), Picky.Config(), RunStore(), pool=pool)
    assert handle.join(WAIT_S)
    snap = handle.snapshot()
    assert snap.status == "refused" and snap.error == "This needs 8 GPUs and the machine has none."
    assert RunStore().count() == 0


def test_two_runs_at_once_do_not_touch_each_other(pool, isolated_store) -> None:
    """Two handles (two browser tabs) train at once, each on its own worker, and match their solo results."""
    configs = [SCENARIO.validate({"depth": 4, "steps": 40, "seed": s}) for s in (1, 2)]
    handles = [RunHandle.start(SCENARIO, c, pool=pool) for c in configs]
    assert all(h.join(WAIT_S) for h in handles)
    for handle, config in zip(handles, configs):
        assert handle.snapshot().frame.equals(SCENARIO.run(config).frame), f"seed {config.seed} differs"


def test_a_stored_run_is_served_without_training(pool, isolated_store) -> None:
    store = RunStore()
    config = SCENARIO.validate(SCENARIO.tiny)
    trained = RunHandle.start(SCENARIO, config, store, pool=pool)
    assert trained.join(WAIT_S)
    stored = store.lookup(SCENARIO.id, SCENARIO.key_of(config), SCENARIO.code_version())
    served = RunHandle.from_stored(SCENARIO, stored, store).snapshot()
    assert served.from_store and served.status == "finished"
    assert served.frame.equals(trained.snapshot().frame)
