"""The Runs page: a table of stored runs with what differs from the defaults, status, duration and
the scenario's headline numbers; filter by scenario and status, hide empty stopped runs, name,
delete, open one, or open several compared (and the comparison's URL restores it)."""
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from explorer.page.runs_page import run_row
from explorer.runs.store import RunStore
from scenarios import all_scenarios, get_scenario
from scenarios.base import COLUMNS
from tests.test_app import progress_text

SCENARIO = get_scenario("vanishing-gradients")


def save(overrides: dict, status: str = "finished") -> str:
    config = SCENARIO.validate({**SCENARIO.tiny, **overrides})
    result = SCENARIO.run(config)
    return RunStore().save(SCENARIO.id, config.model_dump(mode="json"), SCENARIO.code_version(), status,
                           result.frame, result.summary, duration_s=1.25)


def runs_app() -> None:
    import streamlit as st
    from explorer.page.pages import build_navigation
    st.navigation(build_navigation(default="runs")).run()


def test_a_row_says_what_differs_from_the_defaults() -> None:
    run_id = save({"depth": 6})
    stored = RunStore().get(run_id)
    row = run_row(stored, {s.id: s for s in all_scenarios()})
    assert row.differs == "depth=6, width=16, steps=12" and row.status == "finished" and row.current_code
    assert row.query["depth"] == "6" and row.duration_s == 1.25

    broken = stored.__class__(**{**stored.__dict__, "config": {**stored.config, "depth": 999}})
    assert run_row(broken, {SCENARIO.id: SCENARIO}).query is None, "a run whose settings are no longer valid cannot be opened"


def table_of(at: AppTest):
    return at.dataframe(key="runs:table").value


def tick(at: AppTest, *rows: int) -> AppTest:
    at.session_state["runs:table"] = {"selection": {"rows": list(rows), "columns": []}}
    return at.run()


def test_runs_page_lists_filters_names_deletes_and_opens() -> None:
    kept = save({"depth": 6})
    doomed = save({"depth": 5}, status="stopped")
    empty = RunStore().save(SCENARIO.id, SCENARIO.validate(SCENARIO.tiny).model_dump(mode="json"),
                            SCENARIO.code_version(), "stopped", pd.DataFrame(columns=COLUMNS), {})
    at = AppTest.from_function(runs_app, default_timeout=60).run()
    assert not at.exception
    rows = table_of(at)
    assert list(rows["run"]) == [doomed, kept], "newest first; the empty stopped run is hidden by default"
    assert list(rows["settings that differ"]) == ["depth=5, width=16, steps=12", "depth=6, width=16, steps=12"]
    assert list(rows["status"]) == ["stopped", "finished"] and rows["duration (s)"].tolist() == [1.2, 1.2]
    at.toggle(key="runs:empty").set_value(True).run()
    assert empty in list(table_of(at)["run"])
    at.toggle(key="runs:empty").set_value(False).run()

    at.selectbox(key="runs:scenario").set_value(SCENARIO.id).run()
    headline = RunStore().get(kept).summary["headline"]
    assert set(headline) <= set(table_of(at).columns), "one scenario: a column per headline number"
    row = table_of(at).set_index("run").loc[kept]
    assert all(abs(row[name] - value) < 1e-9 for name, value in headline.items()), row
    at.multiselect(key="runs:status").set_value(["finished"]).run()
    assert list(table_of(at)["run"]) == [kept], "filtered by status"
    at.multiselect(key="runs:status").set_value(["finished", "stopped"]).run()

    tick(at, 1)  # the kept run
    at.text_input(key=f"runs:name:{kept}").input("the baseline")
    at.button(key="runs:rename").click().run()
    assert RunStore().get(kept).name == "the baseline" and table_of(at).set_index("run").loc[kept, "name"] == "the baseline"

    tick(at, 0)  # the stopped run
    at.button(key="runs:delete").click().run()
    assert RunStore().get(doomed) is None and list(table_of(at)["run"]) == [kept]

    tick(at, 0)
    at.button(key="runs:open").click().run()
    assert not at.exception
    assert progress_text(at).startswith(f"Served from the run store: run {kept}")
    assert at.query_params["depth"] == "6" and at.sidebar.slider(key=f"{SCENARIO.id}.depth").value == 6


@pytest.mark.slow
def test_three_runs_open_compared_and_their_url_restores_the_comparison() -> None:
    """Tick three runs -> Open compared: the first shown, the others overlaid; the URL alone (a new
    session) restores the same comparison; a run missing from the store is named in one line."""
    runs = [save({"depth": depth}) for depth in (4, 5, 6)][::-1]  # the table lists the newest first
    at = AppTest.from_function(runs_app, default_timeout=60).run()
    at.selectbox(key="runs:scenario").set_value(SCENARIO.id).run()
    tick(at, 0, 1, 2)
    at.button(key="runs:compare").click().run()
    assert not at.exception
    assert progress_text(at).startswith(f"Served from the run store: run {runs[0]}")
    assert at.session_state[f"overlay:{SCENARIO.id}"] == runs[1:]
    assert at.query_params["compare"] == ",".join(runs[1:]) and at.query_params["depth"] == "6"
    assert at.query_params["run"] == runs[0], "the run shown is pinned (a run of older code has no config match)"
    loss = next(c for c in at.get("bidi_component") if "Training loss" in c.proto.json)
    assert "[depth=5]" in loss.proto.json and "[depth=4]" in loss.proto.json

    link = dict(at.query_params)
    fresh = AppTest.from_function(scenario_page, default_timeout=60)
    fresh.query_params.update(link)
    fresh.run()
    assert not fresh.exception and not fresh.warning
    assert progress_text(fresh).startswith(f"Served from the run store: run {runs[0]}")
    assert fresh.multiselect(key=f"overlay:{SCENARIO.id}").value == runs[1:]
    assert dict(fresh.query_params) == link

    RunStore().delete(runs[2])
    gone = AppTest.from_function(scenario_page, default_timeout=60)
    gone.query_params.update(link)
    gone.run()
    warnings = [w.value for w in gone.warning]
    assert len(warnings) == 1 and runs[2] in warnings[0] and "Showing the other 1" in warnings[0], warnings
    assert gone.multiselect(key=f"overlay:{SCENARIO.id}").value == [runs[1]]


def scenario_page() -> None:
    from explorer.page.scenario_page import render_scenario
    from scenarios import get_scenario
    render_scenario(get_scenario("vanishing-gradients"))


def test_an_empty_store_says_how_to_fill_it() -> None:
    at = AppTest.from_function(runs_app, default_timeout=60).run()
    assert any("No stored runs yet" in i.value for i in at.info)
