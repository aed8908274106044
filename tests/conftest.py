"""Every test gets its own empty run store, so no test reads another's results."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(autouse=True)
def isolated_store(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "runs.sqlite3"
    monkeypatch.setenv("EXPLORER_STORE", str(path))
    return path


def pytest_configure(config) -> None:
    """Train as a worker does: one intra-op thread (engines.runtime), set by whoever trains."""
    from engines.runtime import configure
    configure()
