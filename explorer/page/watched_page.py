"""The "Your runs" page: runs watched in a person's own training script, live and diagnosed.

A watched run is stored under the unlisted pseudo-scenario `watched` (scenarios/watched/) while
it goes (explorer/runs/growing.py). This page picks one (the URL's `run`, else the newest), holds
a `WatchedHandle` on it (explorer/runs/watched.py: a run handle that reads the store instead of a
worker) and draws it with the scenario page's own parts: the status line and the live feed while
it runs, the charts, "what to look for" (the diagnosis), other watched runs overlaid, the exports.
`?run=ID&compare=ID,ID` restores a view, as on a scenario page. Nothing trains here.
"""
import datetime

import streamlit as st

from explorer.page.export_panel import export_panel
from explorer.page.scenario_page import live, live_feed
from explorer.page.session import run_store, stored_frame
from explorer.page.share import COMPARE, RUN, overlay_key
from explorer.plaintext import plain, raised_powers
from explorer.runs.store import StoredRun
from explorer.runs.watched import WatchedHandle
from explorer.view import feed
from explorer.view.compare import Overlay, differences, short_label
from explorer.view.line_controls import line_controls
from explorer.view.live import charts_view, drawn_key, handle_key, status_view
from scenarios import get_scenario

SHOWN = 200      # the newest watched runs offered
BAND = "min–max"  # (a watched run is one seed: no band is drawn)
SNIPPET = '''from explorer import watch

run = watch(model, optimizer, name="my-run", every=10, config={"lr": 3e-4})
for batch in data:
    loss = model(batch).loss
    loss.backward(); optimizer.step(); optimizer.zero_grad()
    run.log(loss=loss)        # optional: the hooks measure every layer without it
run.finish()                  # also at exit, on an exception (failed), on Ctrl-C (stopped)'''


def render_watched() -> None:
    scenario = get_scenario("watched")
    st.title("Your runs")
    st.markdown("_What happened inside your own training run, layer by layer?_ Two lines in your script put the "
                "explorer's hooks on your model and optimizer; the run appears here at once and is followed live.")
    runs = run_store().list_runs(scenario.id, limit=SHOWN)
    if not runs:
        st.info("No watched runs in this store yet. Add two lines to a training script (below), run it, and it "
                "shows here. `python examples/mlp_gone_wrong.py` makes one in seconds.")
        st.code(SNIPPET, language="python")
        return
    stored = pick_run(runs)
    key = handle_key(scenario)
    handle = st.session_state.get(key)
    if not isinstance(handle, WatchedHandle) or handle.run_id != stored.run_id:
        handle = st.session_state[key] = WatchedHandle(scenario, stored, run_store())
    with st.sidebar:
        lines = line_controls(scenario)
    overlays = chosen_overlays(scenario, handle, runs)
    running = handle.running
    token = live_feed(scenario, handle, overlays, BAND, lines) if running else None
    status_view(scenario, feed_url=feed.url(token) if token else None)
    if token:
        feed.catch_up(token, drawn_key(scenario.id), st.session_state)
    live(charts_view, None)(scenario, overlays, BAND, lines=lines)
    if token:
        feed.adopt(token, drawn_key(scenario.id), st.session_state.get(drawn_key(scenario.id)))
        with st.expander("What to look for, so far"):
            st.markdown(raised_powers(scenario.explain(handle.snapshot().frame, handle.config).markdown()))
            st.caption("Read from the records when this page was drawn; the full diagnosis comes when the run ends. "
                       "Press R to read it again.")
    overlay_picker(scenario, handle, runs)
    if not running and handle.rows_count():
        export_panel(scenario, handle, overlays, BAND)
    with st.expander("Watch your own run", expanded=False):
        st.code(SNIPPET, language="python")
        st.markdown(scenario_doc(scenario))


def describe(stored: StoredRun) -> str:
    when = datetime.datetime.fromtimestamp(stored.created_at).strftime("%Y-%m-%d %H:%M")
    return f"{stored.name or 'unnamed'} · {stored.status} · {when} · {stored.run_id}"


def pick_run(runs: list[StoredRun]) -> StoredRun:
    """The run the URL names (once, when the page is entered with it), else the one picked, else the newest."""
    by_id = {r.run_id: r for r in runs}
    asked = st.query_params.get(RUN)
    if asked and asked != st.session_state.get("watched:asked"):
        if asked in by_id:
            st.session_state["watched:run"] = asked
            compared = [r for r in st.query_params.get(COMPARE, "").split(",") if r in by_id and r != asked]
            st.session_state[overlay_key(get_scenario("watched"))] = compared
        else:
            st.warning(plain(f"The link names run {asked}, which this run store does not hold; showing the newest."))
        st.session_state["watched:asked"] = asked  # last: a page run cut short before here (autorun.py) does it again
    if st.session_state.get("watched:run") not in by_id:
        st.session_state["watched:run"] = runs[0].run_id
    chosen = st.selectbox("Run", list(by_id), format_func=lambda rid: describe(by_id[rid]), key="watched:run")
    st.query_params[RUN] = chosen
    return by_id[chosen]


def chosen_overlays(scenario, handle: WatchedHandle, runs: list[StoredRun]) -> list[Overlay]:
    by_id = {r.run_id: r for r in runs}
    picked = [rid for rid in st.session_state.get(overlay_key(scenario), []) if rid in by_id and rid != handle.run_id]
    if picked:
        st.query_params[COMPARE] = ",".join(picked)
    else:
        st.query_params.pop(COMPARE, None)
    current = own_settings(handle.config.model_dump(mode="json"))
    # named by what differs in the person's own settings (the arm is already the run's name)
    return [Overlay(rid, short_label(differences(current, own_settings(by_id[rid].config)), rid), stored_frame(rid),
                    by_id[rid].config) for rid in picked]


def own_settings(config: dict) -> dict:
    """The settings given to `watch(config=...)`, without the module lists watch adds."""
    return {k: v for k, v in config.items() if not k.startswith("watch_") and k != "seed"}


def overlay_picker(scenario, handle: WatchedHandle, runs: list[StoredRun]) -> None:
    options = [r.run_id for r in runs if r.run_id != handle.run_id]
    key = overlay_key(scenario)
    st.session_state[key] = [rid for rid in st.session_state.get(key, []) if rid in options]
    by_id = {r.run_id: r for r in runs}
    with st.expander("Compare with your other runs", expanded=bool(st.session_state[key])):
        st.multiselect("Overlay other watched runs on the curves above", options, key=key,
                       format_func=lambda rid: describe(by_id[rid]),
                       placeholder="Pick watched runs" if options else "No other watched runs yet")


def scenario_doc(scenario) -> str:
    import sys
    doc = sys.modules[type(scenario).__module__].__doc__ or ""
    return "\n\n".join(doc.strip().split("\n\n")[1:])
