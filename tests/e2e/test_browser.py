"""End-to-end: the real app in a real (headless) Chromium, driven through Playwright.

Starts `streamlit run app.py` once for the module on a free localhost port with its own
empty run store, then per test opens a fresh browser context and clicks through the app
the way a person would: gallery -> scenario page -> move sliders with the keyboard ->
Run -> watch the live view fill in -> (test 2) Stop a long run and keep the partial plots.

Skips when there is no Chromium or no Playwright, except under CI (env CI set), where
the browser tests must run and a missing browser is a failure.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]  # the repo root: tests/e2e/ -> tests/ -> root
SCENARIO_PATH = "/vanishing-gradients"
SERVER_START_S = 60
RUN_TIMEOUT_S = 60
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

SIDEBAR = '[data-testid="stSidebar"]'
PROGRESS_TEXT = '[data-testid="stProgress"]'
PLOT = ".js-plotly-plot"
MAIN = '[data-testid="stMain"]'  # the page body; the app header has its own "Stop" (script) button


def button(page, name: str):
    """A button in the page body (not Streamlit's header toolbar) whose text is exactly `name`."""
    return page.locator(MAIN).get_by_role("button", name=name, exact=True)


# --- prerequisites ------------------------------------------------------------------------

def _chromium_path() -> str | None:
    env = os.environ.get("PLAYWRIGHT_CHROMIUM_EXECUTABLE")
    if env and Path(env).exists():
        return env
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


def _unavailable(reason: str):
    """Skip locally; fail under CI, where the browser tests must run."""
    if os.environ.get("CI"):
        pytest.fail(f"browser tests must run in CI, but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def chromium_exe() -> str:
    exe = _chromium_path()
    if exe is None:
        _unavailable("no Chromium executable found (install Debian's chromium, or set "
                     "PLAYWRIGHT_CHROMIUM_EXECUTABLE)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as error:
        _unavailable(f"the playwright Python package is not importable ({error})")
    return exe


# --- the app server -----------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(base_url + "/_stcore/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def app_url(chromium_exe, tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("e2e_app")
    log_path = tmp / "streamlit.log"
    port = _free_port()
    base_url = f"http://localhost:{port}"
    env = dict(os.environ, EXPLORER_STORE=str(tmp / "runs.sqlite3"), PYTHONUNBUFFERED="1",
               STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
             "--server.address", "localhost", "--server.headless", "true"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)  # its own process group, so teardown can end all of it
    try:
        deadline = time.monotonic() + SERVER_START_S
        while not _healthy(base_url):
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited with code {proc.returncode} before serving; "
                            f"log {log_path}:\n{log_path.read_text(errors='replace')[-4000:]}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"streamlit did not answer {base_url}/_stcore/health within {SERVER_START_S} s; "
                            f"log {log_path}:\n{log_path.read_text(errors='replace')[-4000:]}", pytrace=False)
            time.sleep(0.3)
        yield base_url
    finally:
        _stop(proc)
        print(f"\nstreamlit log: {log_path}")
        # The port must not outlive the module.
        deadline = time.monotonic() + 10
        while _port_in_use(port) and time.monotonic() < deadline:
            time.sleep(0.2)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("localhost", port)) == 0


# --- the browser --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser(chromium_exe):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_exe, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser, app_url, request, tmp_path):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(30_000)
    page = context.new_page()
    failures_before = request.session.testsfailed
    yield page
    try:
        if request.session.testsfailed > failures_before:  # this test's call phase failed
            shot = tmp_path / "failure.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"\nfailure screenshot: {shot}")
    finally:
        context.close()


# --- helpers ------------------------------------------------------------------------------

def wait_idle(page, timeout_s: float = 30) -> None:
    """Wait until Streamlit reports no script run in progress (stApp's data-test-script-state)."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_s * 1000)
    deadline = time.monotonic() + timeout_s
    time.sleep(0.3)
    while time.monotonic() < deadline:
        if page.locator('[data-testid="stApp"]').get_attribute("data-test-script-state") != "running":
            return
        time.sleep(0.2)
    raise AssertionError(f"the app script was still running after {timeout_s} s")


def slider(page, label: str):
    """The sidebar slider widget (stSlider) whose label is exactly `label`."""
    widget = page.locator(f'{SIDEBAR} [data-testid="stSlider"]').filter(
        has=page.locator('[data-testid="stWidgetLabel"]', has_text=re.compile(rf"^\s*{re.escape(label)}\s*$")))
    assert widget.count() == 1, f"expected one sidebar slider labelled {label!r}, found {widget.count()}"
    return widget


def thumb(page, label: str):
    """The slider's focusable thumb: a range input (role slider) or an ARIA role="slider" element."""
    handle = slider(page, label).locator('input[type="range"], [role="slider"]')
    assert handle.count() == 1, f"expected one thumb in the {label!r} slider, found {handle.count()}"
    return handle


THUMB_VALUE_JS = "el => Number(el.getAttribute('aria-valuenow') ?? el.value)"


def slider_value(page, label: str) -> int:
    return int(thumb(page, label).evaluate(THUMB_VALUE_JS))


def press_on_slider(page, label: str, *keys: str) -> tuple[int, int]:
    """Focus a slider's thumb, press keys, wait for the rerun; return (before, after)."""
    handle = thumb(page, label)
    before = slider_value(page, label)
    handle.focus()
    for key in keys:
        handle.press(key)
    page.wait_for_function(
        f"([el, before]) => ({THUMB_VALUE_JS})(el) !== before",
        arg=[handle.element_handle(), before], timeout=10_000)
    wait_idle(page)
    return before, slider_value(page, label)


def displayed_value(page, label: str) -> str:
    return slider(page, label).locator('[data-testid="stSliderThumbValue"]').inner_text().strip()


def progress_text(page) -> str:
    bar = page.locator(PROGRESS_TEXT)
    return bar.first.inner_text() if bar.count() else ""


def wait_progress(page, pattern: str, timeout_s: float) -> str:
    """Wait until the progress bar's text matches `pattern` (a regex); return the text."""
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        text = progress_text(page)
        if re.search(pattern, text):
            return text
        time.sleep(0.25)
    raise AssertionError(f"progress text never matched {pattern!r} within {timeout_s} s; last: {text!r}")


def open_scenario(page, app_url: str) -> None:
    page.goto(app_url + SCENARIO_PATH)
    page.get_by_role("heading", name="Vanishing gradients").first.wait_for()
    page.locator(f'{SIDEBAR} [data-testid="stSlider"]').first.wait_for()
    wait_idle(page)


# --- tests --------------------------------------------------------------------------------

def test_gallery_to_finished_run(page, app_url):
    page.goto(app_url)
    page.get_by_role("heading", name="Training Dynamics Explorer").wait_for()
    card_title = page.get_by_role("heading", name="Vanishing gradients")
    card_title.first.wait_for()
    page.get_by_role("link", name="Open Vanishing gradients →").click()
    page.wait_for_url(re.compile(re.escape(SCENARIO_PATH) + r"/?$"))
    page.locator(f'{SIDEBAR} [data-testid="stSlider"]').first.wait_for()
    wait_idle(page)

    # Move "depth" down three notches with the keyboard (default 10 -> 7).
    before, after = press_on_slider(page, "depth", "ArrowLeft", "ArrowLeft", "ArrowLeft")
    assert after == before - 3, f"depth went {before} -> {after}, expected {before - 3}"
    assert displayed_value(page, "depth") == str(after)
    # And "steps" to its minimum, so the run is short.
    before, after = press_on_slider(page, "steps", "Home")
    assert after < before and after == 10, f"steps went {before} -> {after}"

    button(page, "Run").click()
    text = wait_progress(page, r"^Finished", RUN_TIMEOUT_S)
    assert "after 10 steps" in text, text

    heatmap = page.locator(PLOT).filter(has_text="layer × step")
    heatmap.first.wait_for(timeout=RUN_TIMEOUT_S * 1000)
    assert page.locator(PLOT).filter(has_text="Training loss").count() >= 1
    assert page.get_by_text("What to look for", exact=False).count() >= 1


def test_stop_keeps_partial_plots(page, app_url):
    open_scenario(page, app_url)
    before, after = press_on_slider(page, "steps", "End")
    assert after == 3000 and after > before, f"steps went {before} -> {after}"

    button(page, "Run").click()
    wait_progress(page, r"^Running", RUN_TIMEOUT_S)
    page.locator(PLOT).first.wait_for(timeout=RUN_TIMEOUT_S * 1000)
    assert re.search(r"^Running", progress_text(page)), "the run ended before it could be stopped"

    button(page, "Stop").click()
    text = wait_progress(page, r"^Stopped", 15)
    steps = int(re.search(r"after (\d+) steps", text).group(1))
    assert 0 < steps < 3000, text
    wait_idle(page)
    assert page.locator(PLOT).count() >= 1, "the partial plots disappeared after Stop"
    assert page.locator(PLOT).filter(has_text="layer × step").count() >= 1
    from playwright.sync_api import expect
    expect(button(page, "Run")).to_be_enabled(timeout=10_000)
    expect(button(page, "Stop")).to_be_disabled(timeout=10_000)
