"""The Runs page: every stored run in one table — what it was, how it ended, its headline numbers —
to sort (click a header), filter, name, open, compare or delete.

"Open" goes to the scenario's page with the run's config in the URL, so the page restores
those settings and shows the stored run at once (no retraining), exactly like a shared link.
"Open compared" does the same for the first selected run and overlays the others on it; their
ids go in the URL too (explorer/page/share.py), so the comparison's link restores it.
"""
import streamlit as st

from explorer.page import share
from explorer.page.runs_table import RunRow, compared, run_row, table, visible
from explorer.page.session import run_store
from scenarios import registered
from scenarios.base import LIVE_STATUSES, STATUSES

SHOWN = 500  # newest runs listed; older ones stay in the store
TABLE_KEY = "runs:table"

__all__ = ["render_runs", "run_row"]


def render_runs(scenario_pages: dict[str, st.Page]) -> None:
    st.title("Runs")
    store = run_store()
    st.markdown(f"Every run trained here, newest first, from the run store `{store.path}`. Click a column to sort; "
                "tick runs to open one, or several of one scenario **compared** (overlaid on one page).")
    scenarios = {s.id: s for s in registered()}  # "Your runs" (watched) too
    # the six status chips get a row of their own: beside the scenario box they were cut at 1000 px
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    choice = left.selectbox("Scenario", ["all", *scenarios], key="runs:scenario",
                            format_func=lambda sid: "All scenarios" if sid == "all" else scenarios[sid].title)
    show_empty = right.toggle("empty stopped runs", key="runs:empty",
                              help="Runs stopped before their first record: hidden unless this is on.")
    statuses = st.multiselect("Status", [*STATUSES, *LIVE_STATUSES], default=[*STATUSES, *LIVE_STATUSES],
                              key="runs:status")
    scenario_id = None if choice == "all" else choice
    total = store.count(scenario_id)
    if total == 0:
        st.info("No stored runs yet. Open a scenario and press **Run**: every run is stored here.")
        return
    stored = store.list_runs(scenario_id, limit=SHOWN)
    counts = store.record_counts([s.run_id for s in stored])
    everything = [run_row(s, scenarios, counts.get(s.run_id)) for s in stored]
    rows = visible(everything, statuses, show_empty)
    hidden = len(everything) - len(rows)
    st.caption(f"{total} stored run{'s' * (total != 1)}" + (f"; the newest {SHOWN} are listed" if total > SHOWN else "")
               + (f"; {hidden} hidden by the filters." if hidden else "."))
    if not rows:
        st.info("No run passes these filters.")
        return
    picked = run_table(rows, one_scenario=scenario_id is not None)
    actions(picked, scenario_pages)


def run_table(rows: list[RunRow], one_scenario: bool) -> list[RunRow]:
    """The table; the rows ticked in it."""
    frame = table(rows, one_scenario)
    numbers = {name: st.column_config.NumberColumn(name, format="%.4g") for name in frame.columns
               if name not in ("duration (s)",) and frame[name].dtype.kind == "f"}
    event = st.dataframe(frame, key=TABLE_KEY, on_select="rerun", selection_mode="multi-row", hide_index=True,
                         column_config={
                             **numbers, "duration (s)": st.column_config.NumberColumn(format="%.1f"),
                             "run": st.column_config.TextColumn(help="the run's id in the store"),
                             "settings that differ": st.column_config.TextColumn(width="medium"),
                             "headline": st.column_config.TextColumn(width="large",
                                                                     help="the scenario's headline numbers"),
                             "name": st.column_config.TextColumn(width=110, help="give a run a name below the table")})
    picked = [rows[i] for i in event.selection.rows if i < len(rows)]
    if not one_scenario and len({r.scenario_id for r in picked}) == 1 and picked:
        st.caption("Pick one scenario above to see its headline numbers as columns.")
    return picked


def actions(picked: list[RunRow], scenario_pages: dict[str, st.Page]) -> None:
    """What can be done with the ticked runs: open, compare, name, delete."""
    row = st.container(horizontal=True, vertical_alignment="bottom")
    one = picked[0] if len(picked) == 1 else None
    can_open = one is not None and one.query is not None and one.scenario_id in scenario_pages
    if row.button("Open", key="runs:open", disabled=not can_open, type="primary" if one else "secondary",
                  help=(one.problem if one is not None and one.problem else "Show the ticked run on its page, "
                        "from the store (tick exactly one)")):
        open_run(one, [], scenario_pages)
    plan = compared(picked)
    if row.button("Open compared", key="runs:compare", disabled=isinstance(plan, str),
                  type="primary" if len(picked) > 1 else "secondary",
                  help=plan if isinstance(plan, str) else f"Show run {plan[0].run_id} with the other "
                  f"{len(plan[1])} overlaid on it"):
        open_run(plan[0], plan[1], scenario_pages)
    writable = not run_store().read_only  # else shown as it is: the banner at the top says why
    if one is not None and writable:
        row.text_input("Name", value=one.name, key=f"runs:name:{one.run_id}", max_chars=80,
                       placeholder="e.g. the baseline")
        row.button("Save name", key="runs:rename", on_click=save_name, args=(one.run_id,))
    if picked and writable:
        with row.popover(f"Delete {len(picked)}", key="runs:delete-menu"):
            st.markdown(f"Delete {len(picked)} run{'s' * (len(picked) != 1)} from the store for good? "
                        + ", ".join(f"`{r.run_id}`" for r in picked))
            st.button("Delete for good", key="runs:delete", type="primary", on_click=delete,
                      args=([r.run_id for r in picked],))
    if isinstance(plan, str) and len(picked) > 1:
        st.caption(plan)


def save_name(run_id: str) -> None:
    run_store().rename(run_id, st.session_state.get(f"runs:name:{run_id}"))


def delete(run_ids: list[str]) -> None:
    for run_id in run_ids:
        run_store().delete(run_id)
    st.session_state.pop(TABLE_KEY, None)  # the ticks pointed at rows that are gone


def open_run(base: RunRow, others: list[RunRow], scenario_pages: dict[str, st.Page]) -> None:
    """Switch to the base run's page with its config, and the others to overlay, in the URL."""
    st.session_state[f"open-run:{base.scenario_id}"] = base.run_id
    query = dict(base.query or {})
    if others:
        query.update({share.RUN: base.run_id, share.COMPARE: ",".join(r.run_id for r in others)})
    st.switch_page(scenario_pages[base.scenario_id], query_params=query)
