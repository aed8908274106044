"""The pages under Streamlit's AppTest: home gallery, controls from the Config, Run, plots."""
import time

import pytest
from streamlit.testing.v1 import AppTest

from tests.descendants import ranks_alive, tag_environment


def scenario_page(scenario_id: str) -> None:
    from explorer.pages import render_scenario
    from scenarios import get_scenario
    render_scenario(get_scenario(scenario_id))


def open_page(scenario_id: str = "vanishing-gradients") -> AppTest:
    at = AppTest.from_function(scenario_page, args=(scenario_id,), default_timeout=60)
    return at.run()


def run_until_done(at: AppTest, timeout: float = 90) -> AppTest:
    deadline = time.time() + timeout
    while True:
        at.run()
        progress = [p.proto.text for p in at.get("progress")]
        if progress and not progress[0].startswith("Running"):
            return at
        assert time.time() < deadline, f"still running: {progress}"
        time.sleep(0.3)


def test_home_lists_every_scenario_with_a_link() -> None:
    at = AppTest.from_file("../app.py", default_timeout=60).run()
    assert not at.exception
    assert "Vanishing gradients" in [h.value for h in at.subheader]
    assert any("Why do deep sigmoid networks" in m.value for m in at.markdown)


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
    at = open_page()
    at.sidebar.slider(key="vanishing-gradients.depth").set_value(6)
    at.sidebar.slider(key="vanishing-gradients.steps").set_value(30)
    at.run()
    at.button(key="run").click()  # Run
    at = run_until_done(at)
    assert not at.exception and not at.error
    assert at.get("progress")[0].proto.text.startswith("Finished")
    charts = at.get("plotly_chart")
    assert len(charts) >= 3
    assert any("layer 6" in m.value for m in at.markdown), "what-to-look-for reads depth 6"

    # The same config again is served from the store, without training.
    at.button(key="run").click().run()
    assert "Served from the run store" in at.get("progress")[0].proto.text


def test_moving_a_slider_during_a_run_does_not_restart_it() -> None:
    at = open_page()
    at.sidebar.slider(key="vanishing-gradients.steps").set_value(3000)
    at.run()
    at.button(key="run").click().run()
    handle = at.session_state["run:vanishing-gradients"]
    at.sidebar.slider(key="vanishing-gradients.depth").set_value(12).run()
    assert at.session_state["run:vanishing-gradients"] is handle
    assert any("Settings changed since this run started" in c.value for c in at.caption)
    at.button(key="stop").click().run()  # Stop
    assert handle.snapshot().status == "stopped"
    assert at.get("progress")[0].proto.text.startswith("Stopped")


def failing_page() -> None:
    from explorer.pages import render_scenario
    from tests.test_runs import Boom
    render_scenario(Boom())


def test_a_run_that_raises_shows_its_error_on_the_page() -> None:
    at = AppTest.from_function(failing_page, default_timeout=60).run()
    at.button(key="run").click()
    at = run_until_done(at)
    assert any("The run failed: ValueError: the engine broke" in e.value for e in at.error)
    assert at.get("progress")[0].proto.text.startswith("Failed")


@pytest.mark.slow
def test_a_failing_rank_shows_its_message_on_the_page(monkeypatch) -> None:
    """DDP vs FSDP: rank 1 raises; the page says which rank and why, and no rank is left."""
    monkeypatch.setenv("EXPLORER_DIST_FAIL_RANK", "1")
    tag = tag_environment(monkeypatch)
    at = open_page("ddp-fsdp-memory")
    at.button(key="run").click()
    at = run_until_done(at, timeout=120)
    errors = [e.value for e in at.error]
    assert any("rank 1 of 2 failed (exit code 1): RuntimeError: injected failure on rank 1" in e for e in errors), errors
    assert at.get("progress")[0].proto.text.startswith("Failed")
    alive = ranks_alive(tag)  # this test's own ranks: others may run elsewhere on the machine
    assert not alive, f"rank processes left: {alive}"


def test_the_status_line_counts_steps_per_arm() -> None:
    """A teacher trained 400 steps and students 300: "up to 400 steps", not "after 400 steps"."""
    import pandas as pd

    from explorer.live import status_line
    from explorer.runs import Snapshot
    rows = [("teacher", s, "loss", 1.0) for s in range(400)] + [("T=4", s, "loss", 1.0) for s in range(300)]
    uneven = pd.DataFrame(rows, columns=["arm", "step", "metric", "value"])
    assert status_line(Snapshot(uneven, "finished", 1.0, [], None, 2.0, "abc")).startswith(
        "Finished after up to 400 steps in 2.0 s")
    even = uneven[uneven["step"] < 10]
    assert "after 10 steps in" in status_line(Snapshot(even, "stopped", 0.1, [], None, 0.5, None))
