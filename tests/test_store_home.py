"""Where runs live: the platform's user data folder (not a cache), an old store copied there once,
EXPLORER_STORE first; and a stored run is current only under the torch and peft it ran with."""
import sys
from importlib import metadata
from pathlib import Path

import pandas as pd
import pytest

from explorer.runs import store_home
from explorer.runs.serving import save_result, stored_result
from explorer.runs.store import RunStore
from scenarios import code_version, get_scenario

FRAME = pd.DataFrame({"arm": ["a"], "step": [0], "metric": ["loss"], "value": [0.5]})


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A fresh home folder with XDG's data folder inside it, and no EXPLORER_STORE."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home" / "data"))
    monkeypatch.delenv("EXPLORER_STORE")
    return tmp_path / "home"


@pytest.mark.skipif(sys.platform != "linux", reason="the folder names below are Linux's (XDG)")
def test_the_store_lives_in_the_user_data_folder_not_a_cache(home) -> None:
    """XDG_DATA_HOME is honoured: the default store is $XDG_DATA_HOME/training-dynamics-explorer/runs.sqlite3."""
    store = RunStore()
    assert store.path == home / "data" / "training-dynamics-explorer" / "runs.sqlite3", store.path
    assert store.path.is_file() and not (home / ".cache").exists()


def test_explorer_store_wins_over_the_default(home, tmp_path, monkeypatch) -> None:
    """With EXPLORER_STORE set, the default folder is neither created nor migrated into."""
    old = store_home.old_path()
    old.parent.mkdir(parents=True)
    RunStore(old).save("demo", {"a": 1}, "v1", "finished", FRAME, {})
    monkeypatch.setenv("EXPLORER_STORE", str(tmp_path / "mine.sqlite3"))
    assert RunStore().path == tmp_path / "mine.sqlite3"
    assert not store_home.default_path().exists(), "nothing migrated while EXPLORER_STORE names the store"


def test_an_old_store_is_copied_once_and_said_in_one_line(home, capsys) -> None:
    """A store in ~/.cache (named runs included) reaches the data folder on first use, with one line on
    stderr; the next opening says nothing, and runs saved since stay in the new store."""
    old = RunStore(store_home.old_path())
    run_id = old.save("demo", {"a": 1}, "v1", "finished", FRAME, {"x": 1})
    old.rename(run_id, "my baseline")
    capsys.readouterr()
    moved = RunStore()
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and str(moved.path) in said[0] and str(old.path) in said[0], said
    assert moved.path == store_home.default_path() and moved.get(run_id).name == "my baseline"
    pd.testing.assert_frame_equal(moved.frame(run_id), FRAME)
    moved.save("demo", {"a": 2}, "v1", "finished", FRAME, {})
    again = RunStore()
    assert capsys.readouterr().err == "", "migrated once"
    assert again.count() == 2 and old.count() == 1, (again.count(), old.count())


def test_a_store_under_another_torch_is_not_served_as_current(monkeypatch) -> None:
    """The installed torch (and peft) version is part of every code version: a run stored under
    torch 2.13 is not served once torch is another version, and is again under 2.13."""
    scenario = get_scenario("vanishing-gradients")
    config = scenario.validate(scenario.tiny)
    store = RunStore()
    save_result(store, scenario, config, "finished", FRAME, {}, [], 0.1)
    assert stored_result(store, scenario, config) is not None
    real = metadata.version

    def other_torch(name: str) -> str:
        return "9.9.9" if name == "torch" else real(name)

    for version in (other_torch, real):
        monkeypatch.setattr(metadata, "version", version)
        code_version.code_version.cache_clear()
        code_version.library_versions.cache_clear()
        served = stored_result(store, scenario, config)
        assert (served is not None) == (version is real), f"torch {version('torch')}: served {served}"
    assert "torch==" in code_version.library_versions() and "peft==" in code_version.library_versions()
