"""The page says what a run would cost before Run: the estimate beside Run; a large run (the issue's
memory-tricks link, ~16 min) never starts by itself, and Run asks once before it starts it."""
import time

from streamlit.testing.v1 import AppTest

from tests.test_url import scenario_page, shown

REPRO = {"layers": "64", "width": "512", "batch": "256", "timing_repeats": "20", "steps": "2000"}


def opened(scenario_id: str, query: dict[str, str], auto: bool = True) -> AppTest:
    """The page opened from a link, once the workers have said what this machine offers."""
    at = AppTest.from_function(scenario_page, args=(scenario_id,), default_timeout=60)
    at.session_state[f"autorun:{scenario_id}"] = auto
    at.query_params.update(query)
    at.run()
    deadline = time.time() + 120
    while any("Starting the workers" in c.value for c in at.caption):
        assert time.time() < deadline, "the workers never reported"
        time.sleep(0.3)
        at.run()
    return at


def started(at: AppTest):
    """The run the page holds, if any (a handle in the session)."""
    return at.session_state["run:memory-tricks"] if "run:memory-tricks" in at.session_state else None


def notes(at: AppTest) -> str:
    return " | ".join(shown(c.value) for c in at.caption)


def test_the_estimate_is_said_beside_run() -> None:
    at = opened("vanishing-gradients", {"depth": "12"}, auto=False)
    assert "Estimated: about" in notes(at) and not at.exception, notes(at)


def test_the_issues_link_says_its_estimate_waits_and_run_asks_once() -> None:
    at = opened("memory-tricks", REPRO)
    assert "This run would take about" in notes(at) and "Auto-run waits for you" in notes(at), notes(at)
    assert started(at) is None, "opening a link starts nothing"
    at.sidebar.slider(key="memory-tricks.steps").set_value(1999).run()  # a move, with auto-run on
    time.sleep(0.5)  # past the auto-run pause
    at.run()
    assert started(at) is None, "auto-run started a run estimated past 60 s"
    at.button(key="run").click().run()
    assert "Press Run again to start it" in notes(at), notes(at)
    assert started(at) is None, "the first press only asks"
    at.button(key="run").click().run()
    handle = started(at)
    assert handle is not None and handle.config.steps == 1999, "the second press starts it"
    handle.stop(keep=False)
    assert handle.join(30)
