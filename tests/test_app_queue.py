"""A scenario page under AppTest while every worker is busy: a pressed run queues, and says so."""
from explorer.page.session import worker_pool
from explorer.runs.handle import RunHandle
from explorer.runs.store import RunStore
from scenarios import get_scenario
from tests.test_app import open_page, progress_text


def test_a_run_queued_behind_busy_workers_turns_run_off_at_once() -> None:
    """Pressed while every worker trains, the run queues: the page says so and draws Run off then
    (no chart comes soon to redraw it; a second press would start a second run)."""
    at = open_page(auto=False)
    pool, scenario = worker_pool(), get_scenario("vanishing-gradients")
    busy = [RunHandle.start(scenario, scenario.validate({"steps": 3000}), RunStore(), pool=pool)
            for _ in range(pool.size)]
    try:
        at.button(key="run").click().run()
        assert "queued" in progress_text(at), progress_text(at)
        assert at.button(key="run").disabled and not at.button(key="stop").disabled
    finally:
        for handle in busy:
            handle.stop(keep=False)
        at.button(key="stop").click().run()
