"""Installed anywhere: the wheel, installed into a fresh virtual environment, serves the same app with
`tdx app` from another directory (a real Chromium loads its home page), and `explorer.run` works there.

The venv sees this machine's packages (--system-site-packages: torch is not installed again) but
the project only through its wheel: the server and the API must run from the installed copy.
"""
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from conftest import _free_port, _healthy

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "explorer", "scenarios", "engines")
START_S = 120


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A venv with the project's wheel in it; returns its bin folder."""
    tmp = tmp_path_factory.mktemp("install")
    source = tmp / "source"  # a copy: building leaves build/ and *.egg-info beside the sources
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    run = dict(check=True, capture_output=True, text=True, timeout=600)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"),
                    str(source)], **run)
    wheel, = (tmp / "dist").glob("training_dynamics_explorer-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(tmp / "venv")], **run)
    bin_dir = tmp / "venv" / ("Scripts" if os.name == "nt" else "bin")
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)], **run)
    return bin_dir


def clean_env(tmp: Path) -> dict[str, str]:
    """No PYTHONPATH: the project comes from the wheel only."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "EXPLORER_STORE": str(tmp / "runs.sqlite3"), "PYTHONUNBUFFERED": "1"}


def test_tdx_app_from_another_directory_serves_the_app(installed, browser, tmp_path) -> None:
    """The server runs the wheel's explorer/app.py with the app's settings; Chromium gets the gallery."""
    port = _free_port()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with open(tmp_path / "server.log", "wb") as log:
        server = subprocess.Popen([str(installed / "tdx"), "app", "--port", str(port)], cwd=elsewhere,
                                  env=clean_env(tmp_path), stdout=log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + START_S
        while not _healthy(f"http://localhost:{port}"):
            assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()[-3000:]
            time.sleep(0.3)
        command = " ".join(psutil.Process(server.pid).cmdline())  # tdx became the server (exec)
        site = str(installed.parent / "lib")
        assert f"{site}" in command and "explorer/app.py" in command and "--server.address=localhost" in command, command
        assert "--server.enableXsrfProtection=true" in command and "--server.allowedHosts=127.0.0.1" in command, command
        page = browser.new_page()
        try:
            answer = page.goto(f"http://localhost:{port}/")
            assert answer.headers.get("x-frame-options") == "SAMEORIGIN", answer.headers
            page.get_by_role("heading", name="Training Dynamics Explorer").wait_for(timeout=60_000)
            page.get_by_role("heading", name="Core mechanics").wait_for()
            assert page.title() == "Training Dynamics Explorer", page.title()
            card = page.locator(".st-key-card-vanishing-gradients").get_by_role("link", name="Vanishing gradients")
            assert card.count() == 1
        finally:
            page.close()
        with urllib.request.urlopen(f"http://localhost:{port}/_stcore/health", timeout=5) as health:
            assert health.status == 200
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_the_api_runs_from_another_directory(installed, tmp_path) -> None:
    """`import explorer; explorer.run(...)` in the venv, outside the checkout: the installed package trains;
    it ships py.typed."""
    code = ("import explorer; r = explorer.run('vanishing-gradients', depth=4, width=16, steps=12, progress=False); "
            "print(explorer.__file__); print(r.status, len(r.frame), r.run_id is not None)")
    done = subprocess.run([str(installed / "python"), "-c", code], cwd=tmp_path, env=clean_env(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    where, result = done.stdout.splitlines()
    assert where.startswith(str(installed.parent)) and result.startswith("finished ") and result.endswith(" True"), \
        done.stdout
    assert (Path(where).parent / "py.typed").is_file(), "the wheel marks the package typed (PEP 561)"
