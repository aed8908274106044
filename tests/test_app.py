"""The pages under Streamlit's AppTest: home gallery, controls from the Config, Run, auto-run, plots."""
import json
import time

from typing import Literal

import plotly.graph_objects as go
import pytest
from pydantic import Field
from streamlit.testing.v1 import AppTest

from scenarios.base import Run, Scenario, ScenarioConfig, view_field
from scenarios.explanation import Explanation
from tests.test_url import shown


def scenario_page(scenario_id: str) -> None:
    from explorer.page.pages import render_scenario
    from scenarios import get_scenario
    render_scenario(get_scenario(scenario_id))


def open_page(scenario_id: str = "vanishing-gradients", function=scenario_page, auto: bool = True) -> AppTest:
    at = AppTest.from_function(function, args=(scenario_id,), default_timeout=60)
    at.session_state[f"autorun:{scenario_id}"] = auto
    at.run()
    deadline = time.time() + 120
    while any("Starting the workers" in c.value for c in at.caption):  # the server's first page starts them
        assert time.time() < deadline, "the workers never reported"
        time.sleep(0.3)
        at.run()
    from explorer.page.session import worker_pool
    assert worker_pool().wait_ready(120), "the workers never warmed up"  # a run would queue until then
    return at


def progress_text(at: AppTest) -> str:
    """The status line: the progress bar, or while a run goes on the live status component's first paint."""
    progress = at.get("progress")
    if progress:
        return progress[0].proto.text
    for element in at.get("bidi_component"):
        state = json.loads(element.proto.json or "{}").get("state")
        if state:
            return state["text"]
    return ""


def run_until(at: AppTest, done, timeout: float = 120) -> AppTest:
    """Rerun the page (as the live fragment's ticks would) until `done(at)`."""
    deadline = time.time() + timeout
    while not done(at):
        assert time.time() < deadline, f"never happened; progress: {progress_text(at)!r}"
        time.sleep(0.2)
        at.run()
    return at


def run_until_done(at: AppTest, timeout: float = 120) -> AppTest:
    return run_until(at.run(), lambda a: progress_text(a) and not progress_text(a).startswith(("Running", "Settings", "Waiting")),
                     timeout)


def charts(at: AppTest) -> dict[str, dict]:
    """The figures the page draws (chart components), by name, as plotly JSON."""
    out = {}
    for element in at.get("bidi_component"):
        data = json.loads(element.proto.json or "{}")
        if data.get("figure"):
            out[data["name"]] = json.loads(data["figure"])
    return out


def test_home_lists_every_scenario_with_a_link() -> None:
    at = AppTest.from_file("../app.py", default_timeout=60).run()
    assert not at.exception
    from scenarios import all_scenarios
    titles = [link.proto.label for link in at.get("page_link")]
    assert all(f"**{s.title}**" in titles for s in all_scenarios()), "each card's title links to its page"
    assert any("Why do deep sigmoid networks" in m.value for m in at.markdown)
    from explorer.page.pictures import picture_runs
    from explorer.page.session import run_store
    for scenario in all_scenarios():  # the picture run an empty store starts: not this test's business
        handle = picture_runs(str(run_store().path)).run_of(scenario)
        if handle is not None:
            handle.stop(keep=False)


def test_controls_come_from_the_config() -> None:
    at = open_page()
    assert at.sidebar.slider(key="vanishing-gradients.depth").value == 10
    assert at.sidebar.selectbox(key="vanishing-gradients.activation").options == ["sigmoid", "tanh", "relu", "gelu"]
    assert at.sidebar.toggle(key="vanishing-gradients.residual").value is False
    assert at.sidebar.select_slider(key="vanishing-gradients.lr").value == 0.1
    depth_help = at.sidebar.slider(key="vanishing-gradients.depth").help
    assert "Hidden layers" in depth_help


@pytest.mark.slow
def test_change_a_slider_run_and_see_the_plots() -> None:
    at = open_page(auto=False)
    at.sidebar.slider(key="vanishing-gradients.depth").set_value(6)
    at.sidebar.slider(key="vanishing-gradients.steps").set_value(30)
    at.run()
    assert progress_text(at) == "", "auto-run is off: nothing starts by itself"
    at.button(key="run").click()  # Run
    at = run_until_done(at)
    assert not at.exception and not at.error
    assert progress_text(at).startswith("Finished")
    assert len(charts(at)) >= 3
    assert any("layer 6" in m.value for m in at.markdown), "what-to-look-for reads depth 6"

    # The same config again is served from the store, without training.
    at.button(key="run").click().run()
    assert "Served from the run store" in progress_text(at)


def test_auto_run_starts_the_new_setting_and_cancels_the_old_run() -> None:
    at = open_page()
    at.sidebar.slider(key="vanishing-gradients.steps").set_value(3000).run()
    assert progress_text(at).startswith("Settings changed"), "a moved setting waits out its pause first"
    first = run_until(at, lambda a: a.session_state["run:vanishing-gradients"] if
                      "run:vanishing-gradients" in a.session_state else None).session_state["run:vanishing-gradients"]
    assert first.config.steps == 3000 and first.snapshot().running
    at.sidebar.slider(key="vanishing-gradients.depth").set_value(12).run()
    run_until(at, lambda a: a.session_state["run:vanishing-gradients"] is not first)
    second = at.session_state["run:vanishing-gradients"]
    assert (second.config.depth, second.config.steps) == (12, 3000), "the new run has the new value"
    assert first.join(10) and first.snapshot().status == "stopped", "the old config's run was cancelled"
    assert second.wait_for_first_record(60), "the new run records before it is stopped (a run stopped before "\
        "its first record is not stored)"
    at.button(key="stop").click().run()
    assert second.join(10) and progress_text(at).startswith("Stopped")
    from explorer.runs.store import RunStore
    assert [r.config["depth"] for r in RunStore().list_runs()] == [12], "the superseded run is not stored"


def test_opening_a_page_with_a_link_starts_nothing() -> None:
    """Opening a page is not a setting that moved: auto-run waits for one."""
    at = AppTest.from_function(scenario_page, args=("vanishing-gradients",), default_timeout=60)
    at.query_params["depth"] = "7"
    at.run()
    for _ in range(4):
        time.sleep(0.4)
        at.run()
    assert at.sidebar.slider(key="vanishing-gradients.depth").value == 7
    assert "run:vanishing-gradients" not in at.session_state and progress_text(at) == ""


def test_with_auto_run_off_a_moved_slider_does_not_restart_the_run() -> None:
    at = open_page(auto=False)
    at.sidebar.slider(key="vanishing-gradients.steps").set_value(3000)
    at.run()
    at.button(key="run").click().run()
    handle = at.session_state["run:vanishing-gradients"]
    at.sidebar.slider(key="vanishing-gradients.depth").set_value(12).run()
    time.sleep(0.5)
    at.run()
    assert at.session_state["run:vanishing-gradients"] is handle and handle.snapshot().running
    assert any("Settings changed since this run started. Press Run" in c.value for c in at.caption)
    at.button(key="stop").click().run()  # Stop
    assert handle.snapshot().status == "stopped"
    assert progress_text(at).startswith("Stopped")


class Viewy(Scenario):
    """A run whose plot has a view field: the y axis scale."""
    id, title, question, terms, formula = "viewy", "Viewy", "Does a view field retrain?", {}, "x"

    class Config(ScenarioConfig):
        points: int = Field(20, ge=5, le=50, description="Points.")
        scale: Literal["linear", "log"] = view_field("linear", description="The y axis.")

    def execute(self, config, run: Run) -> None:
        for step in range(config.points):
            run.add("arm", step, {"loss": 1.0 / (step + 1)})

    def figures(self, frame, config) -> dict:
        figure = go.Figure(go.Scatter(x=frame["step"], y=frame["value"], name="loss"))
        return {"loss": figure.update_layout(yaxis_type=config.scale)}

    def explain(self, frame, config) -> Explanation:
        return Explanation(waiting=f"{len(frame)} points")


class Sleepy(Viewy):
    """Its first record comes after a long wait (which Stop ends)."""
    id, title = "sleepy", "Sleepy"

    def execute(self, config, run: Run) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not run.should_stop():
            time.sleep(0.01)
        run.add("arm", 0, {"loss": 1.0})


def custom_page(scenario_id: str) -> None:
    from explorer.page.pages import render_scenario
    from tests import test_app, test_runs
    render_scenario({"boom": test_runs.Boom, "picky": test_runs.Picky, "viewy": test_app.Viewy,
                     "sleepy": test_app.Sleepy}[scenario_id]())


def test_a_run_that_raises_shows_its_error_on_the_page() -> None:
    at = open_page("boom", custom_page)
    at.button(key="run").click()
    at = run_until_done(at)
    assert any("The run failed: ValueError: the engine broke" in shown(e.value) for e in at.error)
    assert progress_text(at).startswith("Failed")


def test_a_config_this_machine_cannot_run_is_refused_before_run() -> None:
    at = open_page("picky", custom_page)
    assert [shown(e.value) for e in at.sidebar.error] == ["This needs 8 GPUs and the machine has none."]
    assert at.button(key="run").disabled, "Run is off for a refused config"
    assert any("this machine cannot run these settings" in c.value for c in at.caption)
    from explorer.runs.store import RunStore
    assert RunStore().count() == 0


def test_a_view_field_redraws_the_same_records_without_a_run() -> None:
    at = open_page("viewy", custom_page)
    at.button(key="run").click()
    at = run_until_done(at)
    handle, stored = at.session_state["run:viewy"], at.session_state["run:viewy"].snapshot().run_id
    assert charts(at)["loss"]["layout"]["yaxis"]["type"] == "linear"
    at.sidebar.selectbox(key="viewy.scale").set_value("log").run()
    assert at.session_state["run:viewy"] is handle and handle.config.scale == "log", "no new run for a view field"
    assert charts(at)["loss"]["layout"]["yaxis"]["type"] == "log", "the same records, drawn with the new config"
    from explorer.runs.store import RunStore
    assert [r.run_id for r in RunStore().list_runs()] == [stored]


def test_stop_before_the_first_record_stores_nothing() -> None:
    at = open_page("sleepy", custom_page)
    at.button(key="run").click().run()
    handle = at.session_state["run:sleepy"]
    assert handle.snapshot().running and handle.snapshot().frame.empty
    at.button(key="stop").click().run()
    assert handle.join(10) and handle.snapshot().status == "stopped"
    assert "not stored" in progress_text(at)
    from explorer.runs.store import RunStore
    assert RunStore().count() == 0


@pytest.mark.slow
def test_a_failing_rank_shows_its_message_on_the_page(monkeypatch) -> None:
    """DDP vs FSDP: rank 1 raises; the page says which rank and why, and no rank is left."""
    import os

    from explorer.page.session import worker_pool
    from explorer.runs.processes import descendants
    monkeypatch.setenv("EXPLORER_DIST_FAIL_RANK", "1")
    worker_pool.clear()  # workers of their own, started with the variable set
    try:
        at = open_page("ddp-fsdp-memory")
        at.button(key="run").click()
        at = run_until_done(at, timeout=180)
    finally:
        pool = worker_pool()
        worker_pool.clear()
        pool.shutdown()
    errors = [shown(e.value) for e in at.error]
    assert any("rank 1 of 2 failed (exit code 1): RuntimeError: injected failure on rank 1" in e for e in errors), errors
    assert progress_text(at).startswith("Failed")
    ranks = [pid for pid in descendants(os.getpid()) if "engines.distributed.worker" in _cmdline(pid)
             or "engines.distributed.spare_rank" in _cmdline(pid)]
    assert not ranks, f"rank processes left: {ranks}"


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_a_pages_figures_are_warmed_once_per_process_in_a_thread_that_ends() -> None:
    from explorer.page.session import warm_figures
    first = warm_figures("dead-relu")
    first.join(timeout=120)
    assert not first.is_alive(), "the warm-up thread ends once the figures are built"
    assert warm_figures("dead-relu") is first, "once per scenario and process"
