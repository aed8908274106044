"""The Runs page: every stored run — what it was, how it ended — to open or delete.

"Open" goes to the scenario's page with the run's config in the URL, so the page restores
those settings and shows the stored run at once (no retraining), exactly like a shared link.
"""
import datetime
from dataclasses import dataclass
from typing import Any

import streamlit as st

from explorer.compare import differences
from explorer.session import run_store
from explorer.store import StoredRun
from explorer.url import config_query
from scenarios import all_scenarios
from scenarios.base import ConfigError, Scenario

SHOWN = 100  # newest runs listed; older ones stay in the store
STATUS_COLORS = {"finished": "green", "diverged": "orange", "stopped": "gray", "failed": "red"}


@dataclass(frozen=True)
class RunRow:
    run_id: str
    scenario_id: str
    title: str
    differs: str             # "depth=30, activation=relu", or "defaults"
    when: str
    status: str
    duration_s: float
    current_code: bool
    query: dict[str, str] | None  # the URL parameters that open it; None when it cannot be opened
    problem: str | None = None


def run_row(stored: StoredRun, scenarios: dict[str, Scenario]) -> RunRow:
    when = datetime.datetime.fromtimestamp(stored.created_at).strftime("%Y-%m-%d %H:%M")
    scenario = scenarios.get(stored.scenario)
    if scenario is None:
        return RunRow(stored.run_id, stored.scenario, stored.scenario, _describe(stored.config), when, stored.status,
                      stored.duration_s, False, None, "no such scenario in this version")
    defaults = scenario.validate({}).model_dump(mode="json")
    diff = _describe(differences(defaults, stored.config))
    current = stored.code_version == scenario.code_version()
    try:
        query = config_query(scenario.validate(stored.config))
    except ConfigError as error:
        return RunRow(stored.run_id, scenario.id, scenario.title, diff, when, stored.status, stored.duration_s,
                      current, None, f"its settings are no longer valid: {error}")
    return RunRow(stored.run_id, scenario.id, scenario.title, diff, when, stored.status, stored.duration_s,
                  current, query)


def _describe(diff: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in diff.items()) or "defaults"


def render_runs(scenario_pages: dict[str, st.Page]) -> None:
    st.title("Runs")
    store = run_store()
    st.markdown(f"Every run trained here, newest first, from the run store `{store.path}`. **Open** shows a run "
                "on its page from the store (no retraining) with its settings in the URL; from there you can "
                "overlay other runs on it.")
    scenarios = {s.id: s for s in all_scenarios()}
    choice = st.selectbox("Scenario", ["all", *scenarios], key="runs:scenario",
                          format_func=lambda sid: "All scenarios" if sid == "all" else scenarios[sid].title)
    scenario_id = None if choice == "all" else choice
    total = store.count(scenario_id)
    if total == 0:
        st.info("No stored runs yet. Open a scenario and press **Run**: every run is stored here.")
        return
    rows = [run_row(stored, scenarios) for stored in store.list_runs(scenario_id, limit=SHOWN)]
    st.caption(f"{total} stored run{'s' * (total != 1)}" + (f"; the newest {SHOWN} are listed." if total > SHOWN else "."))
    widths = [1.7, 1.5, 2.9, 1.0, 0.9, 1.9]
    header = st.columns(widths)
    for column, title in zip(header, ["when", "scenario", "settings that differ from the defaults", "status",
                                      "duration", ""]):
        if title:
            column.markdown(f"**{title}**")
    for row in rows:
        draw_row(row, widths, scenario_pages)


def draw_row(row: RunRow, widths: list[float], scenario_pages: dict[str, st.Page]) -> None:
    cols = st.columns(widths, vertical_alignment="center")
    cols[0].markdown(f"{row.when}  \n`{row.run_id}`")
    cols[1].markdown(row.title + ("" if row.current_code else "  \n:gray[older code]"))
    cols[2].markdown(row.differs)
    cols[3].markdown(f":{STATUS_COLORS.get(row.status, 'gray')}-badge[{row.status}]")
    cols[4].markdown(f"{row.duration_s:.1f} s")
    can_open = row.query is not None and row.scenario_id in scenario_pages
    actions = cols[5].container(horizontal=True, gap="small")
    if actions.button("Open", key=f"open:{row.run_id}", disabled=not can_open,
                      help=row.problem or "Show this run on its page, from the store"):
        st.session_state[f"open-run:{row.scenario_id}"] = row.run_id
        st.switch_page(scenario_pages[row.scenario_id], query_params=row.query)
    with actions.popover("Delete", key=f"delete-menu:{row.run_id}"):
        st.markdown(f"Delete run `{row.run_id}` ({row.title}, {row.status}) from the store?")
        st.button("Delete for good", key=f"delete:{row.run_id}", type="primary",
                  on_click=lambda: run_store().delete(row.run_id))
