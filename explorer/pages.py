"""The pages: a gallery home and one generated page per registered scenario.

A scenario page draws its controls from the Config, starts runs through the run manager
(`explorer.runs`), and redraws a live fragment from the handle a few times a second.
Every figure comes from `scenario.figures(frame, config)`.
"""
import datetime
import time

import streamlit as st

from explorer.runs import RunHandle, Snapshot
from explorer.controls import config_controls
from explorer.store import RunStore
from scenarios import all_scenarios
from scenarios.base import ConfigError, Scenario

# Live view redraw period while a run is going. Each redraw builds every figure in Python
# (~0.2 s for the default run), and that competes with training for the GIL and the two
# cores: measured on the default run, 0.5 s polling stretched it from 2.7 s to 6.2 s,
# 1.0 s to 3.0 s.
POLL_S = 1.0
FIRST_POINT_WAIT_S = 0.5  # on Run, wait this long for the first record so the first draw has points


@st.cache_resource
def run_store() -> RunStore:
    """One store object per server process: it holds only a path; connections are per call."""
    return RunStore()


def build_pages() -> tuple[st.Page, dict[str, st.Page]]:
    scenario_pages = {s.id: st.Page(_page_function(s), title=s.title, url_path=s.id) for s in all_scenarios()}

    def home() -> None:
        render_home(scenario_pages)

    return st.Page(home, title="Home", url_path="home", default=True), scenario_pages


def _page_function(scenario: Scenario):
    def page() -> None:
        render_scenario(scenario)
    page.__name__ = "page_" + scenario.id.replace("-", "_")
    return page


def render_home(scenario_pages: dict[str, st.Page]) -> None:
    st.title("Training Dynamics Explorer")
    st.markdown("Pick a question, move a slider, press **Run**, and watch real PyTorch training answer it: "
                "loss curves, per-layer gradients and more, measured live from the run, never drawn from a formula.")
    columns = st.columns(2)
    for i, scenario in enumerate(all_scenarios()):
        with columns[i % 2].container(border=True):
            st.subheader(scenario.title)
            st.markdown(f"_{scenario.question}_")
            st.caption("Glossary: " + " · ".join(scenario.terms))
            st.page_link(scenario_pages[scenario.id], label=f"Open {scenario.title} →")


def render_scenario(scenario: Scenario) -> None:
    handle_key = f"run:{scenario.id}"
    st.title(scenario.title)
    st.markdown(f"_{scenario.question}_")

    with st.sidebar:
        st.header("Settings")
        values = config_controls(scenario)
    try:
        config, config_error = scenario.validate(values), None
    except ConfigError as error:
        config, config_error = None, str(error)

    handle: RunHandle | None = st.session_state.get(handle_key)
    running = handle is not None and handle.snapshot().running
    run_col, stop_col, note_col = st.columns([1, 1, 5], vertical_alignment="center")
    if run_col.button("Run", type="primary", disabled=config is None or running, use_container_width=True):
        handle = start_or_load(scenario, config, fresh=False)
        st.session_state[handle_key] = handle
        handle.wait_for_first_record(FIRST_POINT_WAIT_S)
        running = handle.snapshot().running
    if stop_col.button("Stop", disabled=not running, use_container_width=True):
        handle.stop()
        handle.join(timeout=2.0)
        running = False
    if config_error:
        st.error(config_error)
    if handle is not None and config is not None and handle.config != config:
        note_col.caption("Settings changed since this run started. Press Run to run them.")
    if handle is not None and not running and handle.snapshot().from_store:
        if note_col.button("Retrain instead of using the stored result"):
            handle = start_or_load(scenario, config or handle.config, fresh=True)
            st.session_state[handle_key] = handle
            handle.wait_for_first_record(FIRST_POINT_WAIT_S)
            running = True

    fragment = st.fragment(run_every=POLL_S if running else None)(live_view)
    fragment(scenario, handle_key)

    with st.expander("The mechanism", expanded=handle is None):
        st.latex(scenario.formula)
        st.markdown(type(scenario).__module__ and _doc(scenario))
    st.caption("Glossary: " + " · ".join(scenario.terms))


def start_or_load(scenario: Scenario, config, *, fresh: bool) -> RunHandle:
    """Serve a complete stored run of exactly this config and code, or start training it."""
    store = run_store()
    if not fresh:
        stored = store.lookup(scenario.id, config.model_dump(mode="json"), scenario.code_version())
        if stored is not None:
            return RunHandle.from_stored(scenario, stored, store)
    return RunHandle.start(scenario, config, store)


def live_view(scenario: Scenario, handle_key: str) -> None:
    handle: RunHandle | None = st.session_state.get(handle_key)
    if handle is None:
        st.info("Press **Run** to train with the settings on the left. The plots fill in as training runs.")
        return
    snap = handle.snapshot()
    st.progress(snap.progress, text=status_line(snap))
    if snap.error:
        st.error(f"The run failed: {snap.error}")
        if handle.traceback:
            with st.expander("Traceback"):
                st.code(handle.traceback)
    for event in snap.events:
        if event["kind"] == "diverged":
            st.warning(f"{event['arm']}: {event['message']}")
    if not snap.frame.empty:
        summary = scenario.summarize(snap.frame, handle.config)
        st.markdown("**What to look for**" + (" (so far)" if snap.running else ""))
        st.markdown(scenario.explain(summary, handle.config))
        figures = scenario.figures(snap.frame, handle.config)
        columns = st.columns(2)
        for i, (name, figure) in enumerate(figures.items()):
            with columns[i % 2]:
                st.plotly_chart(figure, key=f"{scenario.id}-{name}", config={"displaylogo": False})
    if not snap.running and st.session_state.get(handle_key + ":was_running"):
        st.session_state[handle_key + ":was_running"] = False
        st.rerun()  # the run just ended: redraw the whole page so Run/Stop change state
    st.session_state[handle_key + ":was_running"] = snap.running


def status_line(snap: Snapshot) -> str:
    steps = int(snap.frame["step"].max()) + 1 if not snap.frame.empty else 0
    if snap.running:
        return f"Running… {snap.progress:.0%} (step {steps}, {snap.elapsed_s:.1f} s)"
    if snap.from_store:
        when = datetime.datetime.fromtimestamp(snap.created_at).strftime("%Y-%m-%d %H:%M")
        return f"Served from the run store: run {snap.run_id}, trained {when} in {snap.elapsed_s:.1f} s — no retraining"
    words = {"finished": "Finished", "diverged": "Finished — an arm diverged", "stopped": "Stopped — partial result",
             "failed": "Failed"}
    line = f"{words.get(snap.status, snap.status)} after {steps} steps in {snap.elapsed_s:.1f} s"
    return line + (f" · stored as run {snap.run_id}" if snap.run_id else "")


def _doc(scenario: Scenario) -> str:
    import sys
    doc = sys.modules[type(scenario).__module__].__doc__ or ""
    return "\n\n".join(doc.strip().split("\n\n")[1:])  # the first paragraph is the title line
