"""A run store that cannot be used fails politely: one line saying what is wrong and what to do, at
open (a missing column, a damaged page), on a later read (damage after open), for a read-only store
(read as it is by the reading commands, refused for writing), and on every page (an error at the top,
the scenario pages still usable without storing)."""
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from explorer.cli.main import main
from explorer.runs.store import RunStore, StoreError

FRAME = pd.DataFrame({"arm": ["a"] * 20_000, "step": range(20_000), "metric": ["loss"] * 20_000,
                      "value": [0.5] * 20_000})  # ~120 pages of records: one in the middle is a records page


def stored_run(path: Path) -> str:
    return RunStore(path).save("vanishing-gradients", {"steps": 10}, "v1", "finished", FRAME, {"headline": {}})


def damage_a_middle_page(path: Path) -> None:
    sqlite3.connect(path).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()  # every page in the main file
    data = bytearray(path.read_bytes())
    middle = len(data) // 4096 // 2
    data[middle * 4096:(middle + 1) * 4096] = b"\xde\xad" * 2048
    path.write_bytes(bytes(data))


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_a_store_missing_a_column_is_refused_at_open_in_one_line(isolated_store) -> None:
    stored_run(isolated_store)
    db = sqlite3.connect(isolated_store)
    db.execute("ALTER TABLE runs DROP COLUMN name")
    db.commit()
    db.close()
    with pytest.raises(StoreError) as error:
        RunStore(isolated_store)
    message = str(error.value)
    assert "lacks the column name" in message and "EXPLORER_STORE" in message and "\n" not in message, message


def test_a_damaged_page_is_found_at_open_and_show_says_so_in_one_line(isolated_store, capsys) -> None:
    run_id = stored_run(isolated_store)
    damage_a_middle_page(isolated_store)
    with pytest.raises(StoreError, match="damaged"):
        RunStore(isolated_store)
    assert main(["show", run_id]) == 2
    err = one_line_error(capsys)
    assert "damaged" in err and "move it aside" in err and "EXPLORER_STORE" in err, err


def test_damage_met_after_open_is_a_store_error_not_a_traceback(isolated_store) -> None:
    run_id = stored_run(isolated_store)
    store = RunStore(isolated_store)  # opened whole
    damage_a_middle_page(isolated_store)
    store._frames.clear()  # read from the file, not the records kept in memory
    with pytest.raises(StoreError) as error:
        store.frame(run_id)
    assert "damaged" in str(error.value) and "\n" not in str(error.value), error.value


def read_only(path: Path):
    """Make the store and its folder read-only for this process (chmod, or as root `chattr +i`)."""
    targets = [path, path.parent]
    if os.geteuid() != 0:
        path.chmod(0o444)
        path.parent.chmod(0o555)
        return lambda: (path.parent.chmod(0o755), path.chmod(0o644))
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", *map(str, targets)]).returncode != 0:
        pytest.skip("root here, and no chattr to make a file read-only")
    return lambda: subprocess.run(["chattr", "-i", *map(str, targets)], check=True)


def test_a_read_only_store_is_read_by_runs_and_show_and_refused_for_a_run(tmp_path, monkeypatch, capsys) -> None:
    path = tmp_path / "store" / "runs.sqlite3"
    path.parent.mkdir()
    run_id = stored_run(path)
    sqlite3.connect(path).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
    monkeypatch.setenv("EXPLORER_STORE", str(path))
    undo = read_only(path)
    try:
        assert main(["runs"]) == 0
        out, err = capsys.readouterr()
        assert run_id in out and "read-only" in err, (out, err)
        assert main(["show", run_id, "--json"]) == 0 and run_id in capsys.readouterr().out
        assert main(["run", "vanishing-gradients", "--set", "steps=10"]) == 2
        err = one_line_error(capsys)
        assert "read-only" in err and "--no-store" in err, err
        with pytest.raises(StoreError, match="read-only"):
            RunStore(path, reading=True).save("demo", {}, "v1", "finished", FRAME, {})
    finally:
        undo()


def page(function_name: str) -> None:
    """A page as the navigation builds it: the store's banner, then the page."""
    import streamlit as st
    from explorer.page.pages import build_navigation
    pages = {p.url_path: p for section in build_navigation().values() for p in section}
    st.session_state["autorun:vanishing-gradients"] = False
    pages[function_name]._page()  # noqa: SLF001 (the page's own function, without navigating to it)


@pytest.mark.parametrize("name", ["vanishing-gradients", "runs", "glossary"])
def test_every_page_says_a_broken_store_once_and_works_without_it(isolated_store, name) -> None:
    isolated_store.write_text("not a run store\n" * 100)
    at = AppTest.from_function(page, args=(name,), default_timeout=60).run()
    assert not at.exception, at.exception
    errors = [e.value.replace("\\", "") for e in at.error]  # the banner is escaped markdown
    assert len(errors) == 1 and "EXPLORER_STORE" in errors[0] and "no run is stored" in errors[0], errors
    if name == "vanishing-gradients":
        assert at.button(key="run") is not None, "the scenario page draws its controls and Run"
