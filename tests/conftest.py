"""Every test gets its own empty run store, so no test reads another's results; every random input is seeded."""
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# Every random test input is seeded: Hypothesis draws its examples from a fixed seed (derandomize)
# and keeps no example database between runs, so a run fails or passes the same way each time.
settings.register_profile("seeded", derandomize=True, database=None)
settings.load_profile("seeded")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(autouse=True)
def isolated_store(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "runs.sqlite3"
    monkeypatch.setenv("EXPLORER_STORE", str(path))
    return path


def pytest_configure(config) -> None:
    """Train as a worker does: one intra-op thread (engines.loop.runtime), set by whoever trains."""
    from engines.loop.runtime import configure
    configure()
