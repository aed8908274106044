"""End-to-end, the live loop in a real Chromium: a moved slider runs the new value and cancels the
old run; a chart keeps its element between redraws; an expander opens mid-run; no worker
outlives its server. Nothing here asserts wall time: orderings, identities and counts."""
import os
import signal
import subprocess
import sys
import time

import pytest

from browser_helpers import (PLOT, SIDEBAR, button, open_scenario, press_on_slider, progress_text, wait_done,
                             wait_progress)
from conftest import ROOT, _free_port, _healthy
from explorer.runs.processes import descendants, wait_quiet

pytestmark = [pytest.mark.browser]
SCENARIO_PATH = "/vanishing-gradients"
RUN_TIMEOUT_S = 90
QUIET_AFTER_STOP_S = 20  # a replaced worker's start-up, on a slow shared machine; the runs had ~40 s left


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _workers() -> list[int]:
    return [pid for pid in descendants(os.getpid()) if "explorer.runs.worker" in _cmdline(pid)]


def _wait_workers_quiet(timeout_s: float = 120, why: str = "") -> None:
    """Until the workers use no CPU for half a second: a fresh worker imports torch first."""
    used = wait_quiet(_workers, timeout_s)
    if used is not None:
        raise AssertionError(f"the workers were still busy after {timeout_s} s ({used} s of CPU in the last 0.5 s)"
                             + (f": {why}" if why else ""))


def test_a_moved_slider_runs_the_new_value_and_cancels_the_old_run(page, app_url) -> None:
    open_scenario(page, app_url, SCENARIO_PATH, "Vanishing gradients")
    _wait_workers_quiet()
    press_on_slider(page, "steps", "End")  # 3000 steps: auto-run starts a long run
    wait_progress(page, r"^Running… \d+% \(step [1-9]", RUN_TIMEOUT_S)

    press_on_slider(page, "depth", "ArrowLeft")  # depth 9: the depth-10 run is superseded
    page.wait_for_url("**depth=9**", timeout=30_000)  # the page has rerun with it
    moved_on = page.get_by_text("Settings changed since this run started")
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while moved_on.count() or not progress_text(page).startswith("Running"):  # the new run is the page's run
        assert time.monotonic() < deadline, f"the new run never started: {progress_text(page)!r}"
        time.sleep(0.1)
    chart = page.locator("div.explorer-chart").first
    chart.evaluate("el => { el.__kept = true; }")
    first = chart.get_attribute("data-drawn")
    page.wait_for_function("([el, v]) => el.dataset.drawn && el.dataset.drawn !== v",
                           arg=[chart.element_handle(), first], timeout=RUN_TIMEOUT_S * 1000)
    assert progress_text(page).startswith("Running"), "the chart was redrawn while the run went on"
    assert page.locator("div.explorer-chart").first.evaluate("el => el.__kept === true"), \
        "the chart kept its element between redraws (no new element, no blank frame)"
    button(page, "Stop").click()
    wait_progress(page, r"^Stopped", 15)
    # Both runs (3000 steps: tens of seconds left) are over: the workers go quiet. A worker that
    # missed the stop's grace was ended and replaced; the replacement imports torch for a few
    # seconds, and then is quiet too.
    _wait_workers_quiet(QUIET_AFTER_STOP_S, "the old run was not cancelled")


def test_a_chart_far_below_the_screen_is_drawn_when_scrolled_to(page, app_url) -> None:
    """Only charts on screen (or near it) are drawn; one far below gets its figure when it comes near."""
    page.set_viewport_size({"width": 1400, "height": 700})
    open_scenario(page, app_url, SCENARIO_PATH + "?seed=78&steps=40", "Vanishing gradients")
    button(page, "Run").click()
    wait_done(page, r"^Finished", RUN_TIMEOUT_S)
    first, last = page.locator("div.explorer-chart").first, page.locator("div.explorer-chart").last
    assert first.evaluate("c => c.dataset.drawn === c.dataset.version"), "the chart on screen is drawn"
    gap = last.evaluate("""c => c.getBoundingClientRect().top
                               - document.querySelector('[data-testid="stMain"]').getBoundingClientRect().bottom""")
    assert gap > 300, f"the last chart is only {gap:.0f} px below the screen: the page's layout changed"
    assert last.evaluate("c => c.dataset.version && c.dataset.drawn !== c.dataset.version"), "drawn far off screen"
    last.scroll_into_view_if_needed()
    page.wait_for_function("c => c.dataset.drawn === c.dataset.version", arg=last.element_handle(), timeout=10_000)
    assert last.locator(PLOT).count() or last.evaluate("c => c.classList.contains('js-plotly-plot')")


def test_a_figure_that_comes_again_after_a_placeholder_is_drawn_again(page, app_url) -> None:
    """A chart's version is its figure's hash. A run's placeholder resets the chart, and the same
    figure can then come back (a stored run shown again): it must be drawn, not taken for a draw
    already under way. Before the fix it stayed blank for good (tokenization's pre-split chart)."""
    open_scenario(page, app_url, SCENARIO_PATH + "?seed=79&steps=40", "Vanishing gradients")
    button(page, "Run").click()
    wait_done(page, r"^Finished", RUN_TIMEOUT_S)
    first = page.locator("div.explorer-chart").first
    page.wait_for_function("c => c.dataset.drawn && c.dataset.drawn === c.dataset.version",
                           arg=first.element_handle(), timeout=10_000)
    version = first.get_attribute("data-version")
    first.evaluate("""c => { const update = Object.values(window.__explorerCharts).find(u => u.element === c);
      const data = c.__latest;
      update({name: data.name, height: data.height});  // the placeholder of a run that starts
      c.__resetSeen = c.dataset.version === "" && c.dataset.drawn === "";
      update(data); }""")  # the same figure again
    assert first.evaluate("c => c.__resetSeen"), "the placeholder reset the chart"
    page.wait_for_function("c => c.dataset.drawn !== '' && c.dataset.drawn === c.dataset.version",
                           arg=first.element_handle(), timeout=10_000)
    assert first.get_attribute("data-drawn") == version, "the same figure was drawn again"


def test_while_a_run_goes_on_only_the_charts_in_view_are_built(page, app_url) -> None:
    """The server builds the charts in view while a run goes on (explorer/view/live.py): one far below
    is a placeholder, with no figure, until it is scrolled to; then it gets this run's figure at once."""
    page.set_viewport_size({"width": 1400, "height": 700})
    open_scenario(page, app_url, SCENARIO_PATH + "?seed=80", "Vanishing gradients")
    press_on_slider(page, "steps", "End")  # 3000 steps: auto-run starts a long run
    wait_progress(page, r"^Running… \d+% \(step [1-9]", RUN_TIMEOUT_S)
    first, last = page.locator("div.explorer-chart").first, page.locator("div.explorer-chart").last
    page.wait_for_function("c => c.dataset.drawn && c.dataset.drawn === c.dataset.version",
                           arg=first.element_handle(), timeout=RUN_TIMEOUT_S * 1000)
    assert last.get_attribute("data-version") is None, "a chart far below the screen is not built"
    assert page.locator("div.explorer-chart").count() == 5, "every chart has its place"
    last.scroll_into_view_if_needed()
    page.wait_for_function("c => !!c.dataset.drawn", arg=last.element_handle(), timeout=RUN_TIMEOUT_S * 1000)
    assert progress_text(page).startswith("Running"), "built and drawn while the run went on"
    button(page, "Stop").click()
    wait_progress(page, r"^Stopped", 15)


def test_plotly_pays_its_first_draw_while_the_page_is_read(page, app_url) -> None:
    """A hidden warm-up draw (explorer/view/chart.py) runs once the page is open and before any run, and
    leaves no element behind: the first chart after Run is not the page's first plotly draw."""
    open_scenario(page, app_url, SCENARIO_PATH + "?seed=79", "Vanishing gradients")
    page.wait_for_function("() => window.__explorerWarm === 'done'", timeout=30_000)
    assert page.locator("div.explorer-chart").count() == 0, "no chart yet: nothing has run on this page"
    assert page.locator(".js-plotly-plot").count() == 0, "the warm-up's plot was removed"


def test_an_expander_opens_while_a_run_is_drawing(page, app_url) -> None:
    open_scenario(page, app_url, SCENARIO_PATH + "?seed=77", "Vanishing gradients")
    press_on_slider(page, "steps", "End")
    wait_progress(page, r"^Running… \d+% \(step [1-9]", RUN_TIMEOUT_S)
    page.locator(PLOT).first.wait_for(timeout=RUN_TIMEOUT_S * 1000)
    summary = page.locator('[data-testid="stMain"] [data-testid="stExpander"] summary').filter(has_text="The mechanism")
    if summary.evaluate("s => s.parentElement.open"):
        summary.click()
    summary.click()
    page.locator('[data-testid="stMain"] [data-testid="stExpander"] .katex').first.wait_for(timeout=10_000)
    assert progress_text(page).startswith("Running"), "the expander opened while the run went on"
    assert page.locator(f'{SIDEBAR} [data-testid="stSlider"]').count() > 0
    button(page, "Stop").click()
    wait_progress(page, r"^Stopped", 15)


# SIGINT under -m slow: tests/test_pool.py ends a server by SIGINT, SIGTERM and SIGKILL in the default run
@pytest.mark.parametrize("signum", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)],
                         ids=lambda s: s.name)
def test_no_worker_outlives_the_server(browser, tmp_path, signum) -> None:
    """A page opened (the pool starts), then the server is ended: its workers end with it."""
    port = _free_port()
    base = f"http://localhost:{port}"
    env = dict(os.environ, EXPLORER_STORE=str(tmp_path / "runs.sqlite3"), STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                               "--server.headless", "true"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not _healthy(base):
            assert time.monotonic() < deadline and server.poll() is None, "the server did not start"
            time.sleep(0.3)
        context = browser.new_context()
        tab = context.new_page()
        open_scenario(tab, base, SCENARIO_PATH, "Vanishing gradients")
        deadline = time.monotonic() + 120
        while tab.get_by_text("Starting the workers").count():
            assert time.monotonic() < deadline, "the workers never started"
            time.sleep(0.3)
        workers = [pid for pid in descendants(server.pid) if "explorer.runs.worker" in _cmdline(pid)]
        assert len(workers) >= 1
        context.close()
        server.send_signal(signum)
        server.wait(timeout=60)
        deadline = time.monotonic() + 60
        while any(_cmdline(pid) for pid in workers):  # gone (or reaped zombies: no cmdline)
            assert time.monotonic() < deadline, f"workers left after {signum.name}: {workers}"
            time.sleep(0.2)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()

