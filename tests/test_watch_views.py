"""A watched run, seen: the "Your runs" page (live while it runs), the Runs table, the exports and the
command line read it like a scenario's run."""
import json

import pytest
import torch
from streamlit.testing.v1 import AppTest
from torch import nn

from explorer import watch
from explorer.cli.main import main
from explorer.runs import watched as watched_handle
from explorer.runs.store import RunStore
from explorer.runs.watched import WatchedHandle
from scenarios import get_scenario

WATCHED = get_scenario("watched")


def start(name: str = "alpha", steps: int = 8, lr: float = 0.05):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    run = watch(model, optimizer, name=name, every=2, config={"lr": lr})
    generator = torch.Generator().manual_seed(0)

    def train(count: int) -> None:
        for _ in range(count):
            x = torch.randn(32, 8, generator=generator)
            loss = nn.functional.cross_entropy(model(x), (x[:, 0] > 0).long())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            run.log(loss=loss)
        run.rows()  # in the store now

    train(steps)
    return run, train


def page(run_id: str) -> None:
    import streamlit as st
    from explorer.page.watched_page import render_watched
    st.query_params["run"] = run_id
    render_watched()


def test_your_runs_page_draws_a_finished_watched_run_with_what_to_look_for() -> None:
    """Opened by its id: the run is picked, its status line, "what to look for" and every figure are drawn."""
    run, _ = start()
    run.finish()
    other, _ = start("beta")
    at = AppTest.from_function(page, args=(run.run_id,), default_timeout=60).run()
    assert not at.exception, at.exception
    assert at.selectbox(key="watched:run").value == run.run_id
    text = "\n".join(m.value for m in at.markdown)
    assert "**What to look for**" in text and "alpha: the loss" in text, text[:600]
    assert "Across depth" in text
    other.finish()


def test_a_running_watched_run_is_followed_as_its_records_arrive(monkeypatch) -> None:
    """The page's handle reads the rows the script adds while it runs, and sees it end."""
    monkeypatch.setattr(watched_handle, "POLL_S", 0.0)
    run, train = start(steps=4)
    handle = WatchedHandle(WATCHED, RunStore().get(run.run_id), RunStore())
    first = handle.rows_count()
    assert handle.running and first > 0
    train(4)
    assert handle.rows_count() > first and handle.snapshot().steps == 8
    run.finish()
    assert not handle.running and handle.snapshot().status == "finished"
    assert len(handle.snapshot().frame) == len(RunStore().frame(run.run_id))


def test_the_runs_table_opens_a_watched_run_on_your_runs_described_by_its_own_settings() -> None:
    from explorer.page.runs_table import run_row
    run, _ = start()
    run.finish()
    row = run_row(RunStore().get(run.run_id), {"watched": WATCHED})
    assert row.query == {"run": run.run_id} and row.differs == "lr=0.05" and row.name == "alpha", row


def test_a_watched_runs_export_names_the_command_that_prints_it_not_one_that_would_retrain(tmp_path) -> None:
    from explorer.exports.bundle import bundle_files
    from explorer.page.export_panel import commands
    from explorer.view.content import build_view
    run, _ = start()
    run.finish()
    handle = WatchedHandle(WATCHED, RunStore().get(run.run_id), RunStore())
    config = handle.config.model_dump(mode="json")
    files = bundle_files(WATCHED, config, build_view(WATCHED, handle, []), commands(WATCHED, handle, []),
                         formats=("html",), plotlyjs="file")
    readme = files["README.txt"].decode()
    assert f"python -m explorer show {run.run_id}" in readme and "--set" not in readme, readme
    assert sum(name.endswith(".html") for name in files) == len(WATCHED.figures(handle.snapshot().frame, handle.config))


def test_the_command_line_lists_watched_runs_by_name_shows_their_diagnosis_and_will_not_run_one(capsys) -> None:
    run, _ = start()
    run.finish()
    assert main(["runs", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(r["run_id"], r["scenario"], r["name"]) for r in listed] == [(run.run_id, "watched", "alpha")]
    assert main(["show", run.run_id]) == 0
    shown = capsys.readouterr().out
    assert "(alpha): watched, finished" in shown and "Across depth" in shown, shown
    assert main(["run", "watched"]) == 2
    error = capsys.readouterr().err.strip()
    assert "from explorer import watch" in error and "\n" not in error, error


@pytest.mark.parametrize("status", ["running", "incomplete"])
def test_runs_status_filters_on_how_a_watched_run_reads_now(status: str, capsys) -> None:
    """`runs --status running` lists the run while its writer lives; `incomplete`, none of it."""
    run, _ = start()
    assert main(["runs", "--status", status, "--json"]) == 0
    found = [r["run_id"] for r in json.loads(capsys.readouterr().out)]
    run.finish()
    assert found == ([run.run_id] if status == "running" else []), found
