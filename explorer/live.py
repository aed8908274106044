"""The live view: a fragment that redraws a run (or a group of seeds) from its handle.

While a run is going the fragment reruns every `POLL_S`; each time it builds the page's
`View` (the run, the overlaid stored runs, the seed bands) and draws every figure with
the Streamlit theme. When the run ends it reruns the whole page so Run/Stop change state.
"""
import datetime

import streamlit as st

from explorer.compare import Overlay
from explorer.runs import RunHandle, Snapshot
from explorer.seeds import SeedGroup
from explorer.view import build_view
from scenarios.base import Scenario
from scenarios.plotting import is_full_width

# Each redraw builds every figure in Python (~0.2 s for the default run), and that competes
# with training for the GIL and the two cores: measured on the default run, 0.5 s polling
# stretched it from 2.7 s to 6.2 s, 1.0 s to 3.0 s.
POLL_S = 1.0
PLOTLY_CONFIG = {"displaylogo": False}


def handle_key(scenario: Scenario) -> str:
    return f"run:{scenario.id}"


def live_view(scenario: Scenario, overlays: list[Overlay], band: str) -> None:
    key = handle_key(scenario)
    handle: RunHandle | SeedGroup | None = st.session_state.get(key)
    if handle is None:
        st.info("Press **Run** to train with the settings on the left. The plots fill in as training runs.")
        return
    snap = handle.snapshot()
    st.progress(snap.progress, text=status_line(snap, handle))
    if snap.error:
        st.error(f"The run failed: {snap.error}")
        if handle.traceback:
            with st.expander("Traceback"):
                st.code(handle.traceback)
    for event in snap.events:
        if event["kind"] == "diverged":
            st.warning(f"{event['arm']}: {event['message']}")
    if not snap.frame.empty:
        view = build_view(scenario, handle, overlays, band)
        qualifiers = (["so far"] if snap.running else []) + (
            [f"mean over {len(handle.snapshots())} seeds"] if isinstance(handle, SeedGroup) else [])
        st.markdown("**What to look for**" + (f" ({', '.join(qualifiers)})" if qualifiers else ""))
        st.markdown(scenario.explain(view.base, handle.config).markdown())
        for note in view.notes:
            st.caption(note)
        draw_figures(scenario.id, view.figures)
    if not snap.running and st.session_state.get(key + ":was_running"):
        st.session_state[key + ":was_running"] = False
        st.rerun()  # the run just ended: redraw the whole page so Run/Stop change state
    st.session_state[key + ":was_running"] = snap.running


def draw_figures(scenario_id: str, figures: dict) -> None:
    """Figures two to a row, in the scenario's order; a full-width one takes a row of its own."""
    pair: list = []

    def draw(name: str, figure) -> None:
        st.plotly_chart(figure, key=f"{scenario_id}-{name}", config=PLOTLY_CONFIG, theme="streamlit")

    def flush() -> None:
        for column, (name, figure) in zip(st.columns(2) if pair else [], pair):
            with column:
                draw(name, figure)
        pair.clear()

    for name, figure in figures.items():
        if is_full_width(figure):
            flush()
            draw(name, figure)
            continue
        pair.append((name, figure))
        if len(pair) == 2:
            flush()
    flush()


def steps_per_arm(frame) -> str:
    """"10 steps" when every arm reached the same step, else "up to 400 steps": arms may count
    different things (a teacher and its students, a sweep indexed by bit width), or a Stop
    caught them at different points."""
    if frame.empty:
        return "0 steps"
    last = frame.groupby("arm", sort=False)["step"].max() + 1
    low, high = int(last.min()), int(last.max())
    return f"{high} steps" if low == high else f"up to {high} steps"


def status_line(snap: Snapshot, handle: RunHandle | SeedGroup | None = None) -> str:
    if isinstance(handle, SeedGroup):
        return group_status_line(snap, handle)
    steps = int(snap.frame["step"].max()) + 1 if not snap.frame.empty else 0
    if snap.running:
        return f"Running… {snap.progress:.0%} (step {steps}, {snap.elapsed_s:.1f} s)"
    if snap.from_store:
        when = datetime.datetime.fromtimestamp(snap.created_at).strftime("%Y-%m-%d %H:%M")
        return (f"Served from the run store: run {snap.run_id} ({snap.status}), trained {when} in "
                f"{snap.elapsed_s:.1f} s — no retraining")
    words = {"finished": "Finished", "diverged": "Finished — an arm diverged", "stopped": "Stopped — partial result",
             "failed": "Failed"}
    line = f"{words.get(snap.status, snap.status)} after {steps_per_arm(snap.frame)} in {snap.elapsed_s:.1f} s"
    return line + (f" · stored as run {snap.run_id}" if snap.run_id else "")


def group_status_line(snap: Snapshot, group: SeedGroup) -> str:
    snaps = group.snapshots()
    seeds = f"seeds {group.seeds[0]}–{group.seeds[-1]}"
    if snap.running:
        return f"Running… {snap.progress:.0%} — seed {group.seeds[len(snaps) - 1]} ({len(snaps)} of {len(group.seeds)}, {seeds}), {snap.elapsed_s:.1f} s"
    served = sum(s.from_store for s in snaps)
    words = {"finished": "Finished", "diverged": "Finished — an arm diverged", "stopped": "Stopped — partial result",
             "failed": "Failed"}
    ids = ", ".join(s.run_id for s in snaps if s.run_id)
    return (f"{words.get(snap.status, snap.status)}: {len(snaps)} of {len(group.seeds)} {seeds} in "
            f"{snap.elapsed_s:.1f} s ({len(snaps) - served} trained, {served} from the run store) · runs {ids}")
