"""The Runs page: stored runs with what differs from the defaults, status and duration;
filter by scenario, delete a run, open it on its page (served from the store)."""
from streamlit.testing.v1 import AppTest

from explorer.runs_page import run_row
from explorer.store import RunStore
from scenarios import all_scenarios, get_scenario

SCENARIO = get_scenario("vanishing-gradients")


def save(overrides: dict, status: str = "finished") -> str:
    config = SCENARIO.validate({**SCENARIO.tiny, **overrides})
    result = SCENARIO.run(config)
    return RunStore().save(SCENARIO.id, config.model_dump(mode="json"), SCENARIO.code_version(), status,
                           result.frame, result.summary, duration_s=1.25)


def runs_app() -> None:
    import streamlit as st
    from explorer.pages import build_navigation
    st.navigation(build_navigation(default="runs")).run()


def test_a_row_says_what_differs_from_the_defaults() -> None:
    run_id = save({"depth": 6})
    stored = RunStore().get(run_id)
    row = run_row(stored, {s.id: s for s in all_scenarios()})
    assert row.differs == "depth=6, width=16, steps=12" and row.status == "finished" and row.current_code
    assert row.query["depth"] == "6" and row.duration_s == 1.25

    broken = stored.__class__(**{**stored.__dict__, "config": {**stored.config, "depth": 999}})
    assert run_row(broken, {SCENARIO.id: SCENARIO}).query is None, "a run whose settings are no longer valid cannot be opened"


def test_runs_page_lists_filters_deletes_and_opens() -> None:
    kept = save({"depth": 6})
    doomed = save({"depth": 5}, status="stopped")
    at = AppTest.from_function(runs_app, default_timeout=60).run()
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "depth=6, width=16, steps=12" in text and ":green-badge[finished]" in text and ":gray-badge[stopped]" in text
    assert "1.2 s" in text or "1.3 s" in text

    at.selectbox(key="runs:scenario").set_value(SCENARIO.id).run()
    assert at.button(key=f"open:{kept}") is not None

    at.button(key=f"delete:{doomed}").click().run()
    assert RunStore().get(doomed) is None
    assert kept in " ".join(m.value for m in at.markdown) and doomed not in " ".join(m.value for m in at.markdown)

    at.button(key=f"open:{kept}").click().run()
    assert not at.exception
    assert at.get("progress")[0].proto.text.startswith(f"Served from the run store: run {kept}")
    assert at.query_params["depth"] == "6" and at.sidebar.slider(key=f"{SCENARIO.id}.depth").value == 6


def test_an_empty_store_says_how_to_fill_it() -> None:
    at = AppTest.from_function(runs_app, default_timeout=60).run()
    assert any("No stored runs yet" in i.value for i in at.info)
