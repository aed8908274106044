"""The Compare panel of a scenario page: overlay stored runs, and the isolation view."""
import datetime
from typing import Any

import streamlit as st

from explorer.page.session import run_store, stored_frame
from explorer.page.share import MAX_COMPARED, choose_isolate, isolate_key, isolate_open_key, overlay_key
from explorer.runs.handle import RunHandle
from explorer.runs.store import COMPLETE, StoredRun
from explorer.view.compare import Overlay, differences, field_label, isolation_figure, isolation_table, short_label
from explorer.view.seeds import SeedGroup
from scenarios.base import ConfigError, Scenario
from scenarios.plotting import arms_in_order


def comparable_runs(scenario: Scenario) -> list[StoredRun]:
    """Stored runs of this scenario whose config the current code still accepts, newest first."""
    runs = []
    for stored in run_store().list_runs(scenario.id):
        try:
            scenario.validate(stored.config)
        except ConfigError:
            continue
        runs.append(stored)
    return runs


def selected_overlays(scenario: Scenario, handle: RunHandle | SeedGroup | None) -> list[Overlay]:
    """The stored runs picked for overlay (by the multiselect, drawn later on the page); never the
    current run itself."""
    if handle is None:
        return []
    current = handle.config.model_dump(mode="json")
    own = _own_run_ids(handle)
    overlays = []
    for run_id in st.session_state.get(overlay_key(scenario), []):
        stored = run_store().get(run_id) if run_id not in own else None
        if stored is None or stored.scenario != scenario.id:
            continue  # deleted meanwhile, or the run on the page
        label = short_label(differences(current, stored.config), run_id)
        overlays.append(Overlay(run_id, label, stored_frame(run_id), stored.config))
    return overlays


def _own_run_ids(handle: RunHandle | SeedGroup) -> set[str]:
    snaps = handle.snapshots() if isinstance(handle, SeedGroup) else [handle.snapshot()]
    return {s.run_id for s in snaps if s.run_id}


def compare_panel(scenario: Scenario, handle: RunHandle | SeedGroup) -> None:
    current = handle.config.model_dump(mode="json")
    runs = comparable_runs(scenario)
    by_id = {r.run_id: r for r in runs}
    own = _own_run_ids(handle)
    options = [r.run_id for r in runs if r.run_id not in own]
    key = overlay_key(scenario)
    st.session_state[key] = [v for v in st.session_state.get(key, []) if v in options]  # drop deleted runs
    code = scenario.code_version()

    def describe(run_id: str) -> str:
        stored = by_id[run_id]
        diff = short_label(differences(current, stored.config), run_id)
        when = datetime.datetime.fromtimestamp(stored.created_at).strftime("%m-%d %H:%M")
        older = " · older code" if stored.code_version != code else ""
        return f"{diff} · {stored.status} · {when} · {run_id}{older}"

    with st.expander("Compare with stored runs", expanded=bool(st.session_state[key])):
        st.multiselect("Overlay stored runs on the figures above", options, format_func=describe, key=key,
                       max_selections=MAX_COMPARED,
                       placeholder="Pick runs of this scenario from the run store" if options else
                       "No other stored runs yet: change a setting and press Run",
                       help="Each overlaid run joins every figure as “arm [what differs]”, in the arm's colour but "
                            "lighter, its lines broken (a solid one into long dashes), with hollow markers and hatched bars, "
                            "grouped by run in the legend.")
    # Built only while open: reading every comparable run's records and drawing the figure took
    # ~60 ms of each page run, and the browser drew the figure even when nobody could see it.
    isolate = st.expander("Isolate one setting", key=isolate_open_key(scenario), on_change="rerun")
    if not isolate.open:
        for kept in (isolate_key(scenario), isolate_metric_key(scenario)):  # not drawn: keep their choices
            if kept in st.session_state:
                st.session_state[kept] = st.session_state[kept]
        return
    with isolate:
        st.markdown("The final value of a metric across stored runs that differ from these settings in that one "
                    "field only (this code version, finished or diverged runs).")
        isolation_view(scenario, handle, current, [r for r in runs if r.code_version == code and r.status in COMPLETE])


def _default_field(current: dict[str, Any], runs: list[StoredRun]) -> int:
    """The field with the most stored values that differ from the current config in it alone."""
    counts = {name: 0 for name in current}
    for stored in runs:
        diff = differences(current, stored.config)
        if len(diff) == 1:
            counts[next(iter(diff))] += 1
    names = list(current)
    return names.index(max(names, key=lambda n: counts[n])) if names else 0


def isolate_metric_key(scenario: Scenario) -> str:
    return f"isolate-metric:{scenario.id}"


def isolation_view(scenario: Scenario, handle: RunHandle | SeedGroup, current: dict[str, Any],
                   runs: list[StoredRun]) -> None:
    frame = handle.snapshot().frame
    metrics = sorted(m for m in frame["metric"].unique() if m != "diverged")
    if not metrics:
        return
    names = list(current)
    left, right = st.columns(2)
    key = isolate_key(scenario)
    if st.session_state.get(key) not in names:  # not chosen yet (or a link named it): the likeliest field
        st.session_state[key] = names[_default_field(current, runs)]
    field = left.selectbox("Setting", names, key=key, on_change=choose_isolate, args=(scenario,),
                         format_func=lambda name: field_label(name, scenario.field_specs()[name]))
    metric = right.selectbox("Metric", metrics, index=metrics.index("loss") if "loss" in metrics else 0,
                             key=isolate_metric_key(scenario))
    candidates = [r for r in runs if set(differences(current, r.config)) <= {field}]
    table = isolation_table(current, [(r.run_id, r.config, stored_frame(r.run_id)) for r in candidates], field, metric)
    if table["value"].nunique() < 2:
        label = field_label(field, scenario.field_specs()[field])
        st.info(f"{table['value'].nunique()} stored value of “{label}” with everything else as set here. "
                f"Change “{label}” on the left and press Run (every run is stored) to add points.")
        return
    figure = isolation_figure(scenario, table, field, metric, arms_in_order(frame))
    st.plotly_chart(figure, key=f"{scenario.id}-isolation", config={"displaylogo": False}, theme="streamlit")
