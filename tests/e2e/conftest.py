"""Browser-test fixtures: one `streamlit run app.py` per session on a free localhost port
with its own empty run store, one headless Chromium, a fresh context per test.

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

ROOT = Path(__file__).resolve().parents[2]  # the repo root: tests/e2e/ -> tests/ -> root
SERVER_START_S = 60
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


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


@pytest.fixture(scope="session")
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


@pytest.fixture(scope="session")
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

@pytest.fixture(scope="session")
def browser(chromium_exe):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_exe, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def _context(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(30_000)
    return context


def _screenshot_on_failure(page, request, tmp_path, failures_before: int) -> None:
    if request.session.testsfailed > failures_before:  # this test's call phase failed
        shot = tmp_path / "failure.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"\nfailure screenshot: {shot}")


@pytest.fixture
def page(browser, app_url, request, tmp_path):
    context = _context(browser)
    page = context.new_page()
    failures_before = request.session.testsfailed
    yield page
    try:
        _screenshot_on_failure(page, request, tmp_path, failures_before)
    finally:
        context.close()


@pytest.fixture(scope="module")
def _module_page(browser, app_url):
    context = _context(browser)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def reused_page(_module_page, request, tmp_path):
    """One browser tab for a whole module, each test going to its own URL (a new Streamlit session):
    a tab that loads the app again reuses its scripts, ~0.5 s less a page than a fresh context.
    For tests that only open a page, run it and read it (no cookies, storage or downloads)."""
    failures_before = request.session.testsfailed
    yield _module_page
    _screenshot_on_failure(_module_page, request, tmp_path, failures_before)
