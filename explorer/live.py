"""The live view: two fragments that draw a run (or a group of seeds) from its handle, within a budget.

The status fragment ticks every `TICK_S` while a run is going, and each tick is cheap: the
progress line and the run's messages. The charts fragment (the figures and "what to look
for") ticks at the rate its rebuilds cost: a rebuild that took c seconds of this process's
CPU is followed by the next no sooner than c / `VIEW_CPU_SHARE`, so drawing takes at most
that share of a core from training; a tick whose inputs did not change rebuilds nothing.
A chart keeps its element between redraws (explorer/chart.py) and the browser redraws
only the figures whose data changed. When the run ends the whole page reruns (Run/Stop
change state) and the charts are rebuilt once more.
"""
import dataclasses
import datetime
import time
from dataclasses import dataclass, field

import streamlit as st

from explorer.chart import draw, payload
from explorer.compare import Overlay
from explorer.line_controls import LineSettings, apply_lines
from explorer.plaintext import plain
from explorer.runs import RunHandle, Snapshot
from explorer.seeds import SeedGroup
from explorer.view import build_view
from scenarios.base import Scenario
from scenarios.plotting import is_full_width

TICK_S = 0.3             # how often a running page's status line looks at its run
VIEW_CPU_SHARE = 0.10    # the share of a core the charts' rebuilds may average while a run is going
MIN_REBUILD_S = 0.5      # never rebuild the charts more often than this
FIRST_COST_S = 0.1       # a page's first rebuild is assumed to cost this much
STORED_DRAWN = 16        # built views of stored runs a session keeps


@dataclass
class Drawn:
    """What the charts fragment last built, and when it may build again."""

    signature: tuple = ()
    markdown: str = ""
    notes: list[str] = field(default_factory=list)
    charts: dict[str, dict] = field(default_factory=dict)   # name -> chart payload
    full_width: set[str] = field(default_factory=set)
    next_at: float = 0.0
    cost_s: float = FIRST_COST_S


def handle_key(scenario: Scenario) -> str:
    return f"run:{scenario.id}"


def charts_interval(scenario: Scenario) -> float:
    """Seconds between the charts fragment's ticks: what its last rebuild cost allows."""
    drawn: Drawn | None = st.session_state.get(f"drawn:{scenario.id}")
    return max(MIN_REBUILD_S, (drawn.cost_s if drawn else FIRST_COST_S) / VIEW_CPU_SHARE)


def status_view(scenario: Scenario, waiting: str | None = None) -> None:
    """The status fragment: progress and messages. `waiting` names a pending auto-run."""
    key = handle_key(scenario)
    handle: RunHandle | SeedGroup | None = st.session_state.get(key)
    if handle is None:
        if waiting:
            st.progress(0.0, text=waiting)
        else:
            st.info("Move a setting on the left (or press **Run**) to train. The plots fill in as training runs.")
        return
    snap = handle.snapshot(with_frame=not handle.running)  # the frame only for the final line
    st.progress(snap.progress, text=waiting or status_line(snap, handle))
    if snap.error and snap.status == "refused":
        st.error(plain(snap.error))
    elif snap.error:
        st.error(plain(f"The run failed: {snap.error}"))
        if handle.traceback:
            with st.expander("Traceback"):
                st.code(handle.traceback)
    for event in snap.events:
        if event["kind"] == "diverged":
            st.warning(plain(f"{event['arm']}: {event['message']}"))
    if not snap.running and st.session_state.get(key + ":was_running"):
        st.session_state[key + ":was_running"] = False
        st.rerun()  # the run just ended: redraw the whole page so Run/Stop change state
    st.session_state[key + ":was_running"] = snap.running


def charts_view(scenario: Scenario, overlays: list[Overlay], band: str, hold: bool = False,
                lines: LineSettings | None = None) -> None:
    """The charts fragment: "what to look for" and the figures, rebuilt within the budget.
    `hold`: a new run is about to replace this one; show what was drawn, build nothing.
    `lines`: smoothing and scale of the curves (explorer/line_controls.py), for the page only."""
    handle: RunHandle | SeedGroup | None = st.session_state.get(handle_key(scenario))
    if handle is None:
        return
    held: Drawn | None = st.session_state.get(f"drawn:{scenario.id}") if hold else None
    drawn = held if held is not None and held.charts else _drawn(scenario, handle, overlays, band, lines)
    if drawn is None:  # refused: nothing to draw
        return
    if drawn.markdown:
        st.markdown(drawn.markdown)
    for note in drawn.notes:
        st.caption(note)
    draw_charts(scenario.id, drawn)


def _drawn(scenario: Scenario, handle, overlays: list[Overlay], band: str, lines: LineSettings | None = None
           ) -> Drawn | None:
    """The built view, rebuilt when its inputs changed and the budget allows (see the module doc)."""
    state_key = f"drawn:{scenario.id}"
    drawn: Drawn = st.session_state.get(state_key) or Drawn()
    running = handle.running
    signature = (id(handle), running, handle.rows_count(), handle.config, tuple(o.run_id for o in overlays), band,
                 lines)
    now = time.monotonic()
    fresh = not drawn.signature or drawn.signature[0] != id(handle)
    if signature == drawn.signature or (running and not fresh and now < drawn.next_at):
        return drawn
    snap = handle.snapshot()
    if snap.status == "refused":
        return None
    # A stored run never changes: what was built for it (when it ended, or shown before) is reused,
    # so moving back to a stored config redraws at once.
    by_run = st.session_state.setdefault(f"drawn-by-run:{scenario.id}", {})
    stored_key = (snap.run_id, *signature[3:]) if snap.run_id and not running else None
    if stored_key in by_run:
        drawn = dataclasses.replace(by_run[stored_key], signature=signature)
        st.session_state[state_key] = drawn
        return drawn
    started = time.thread_time()
    if snap.frame.empty:  # nothing recorded yet (queued, starting): nothing to draw
        drawn = Drawn(signature)
        st.session_state[state_key] = drawn
        return drawn
    try:
        view = build_view(scenario, handle, overlays, band)
        qualifiers = (["so far"] if snap.running else []) + (
            [f"mean over {len(handle.snapshots())} seeds"] if isinstance(handle, SeedGroup) else [])
        markdown = ("**What to look for**" + (f" ({', '.join(qualifiers)})" if qualifiers else "") + "\n\n"
                    + scenario.explain(view.base, handle.config).markdown())
        charts = {name: payload(name, figure) for name, figure in apply_lines(view.figures, lines).items()}
    except Exception as error:  # figures that cannot draw these records must not take the page down
        drawn = Drawn(signature, f"The figures could not be drawn from these records: {type(error).__name__}: {error}")
        st.session_state[state_key] = drawn
        return drawn
    cost = time.thread_time() - started
    drawn = Drawn(signature, markdown, list(view.notes), charts,
                  {name for name, figure in view.figures.items() if is_full_width(figure)},
                  now + 0.8 * max(MIN_REBUILD_S, cost / VIEW_CPU_SHARE), cost)  # 0.8: a tick may come early
    st.session_state[state_key] = drawn
    if stored_key is not None:
        by_run[stored_key] = drawn
        while len(by_run) > STORED_DRAWN:
            del by_run[next(iter(by_run))]
    return drawn


def draw_charts(scenario_id: str, drawn: Drawn) -> None:
    """Charts two to a row, in the scenario's order; a full-width one takes a row of its own."""
    pair: list[str] = []

    def flush() -> None:
        for column, name in zip(st.columns(2) if pair else [], pair):
            with column:
                draw(f"{scenario_id}-{name}", drawn.charts[name])
        pair.clear()

    for name in drawn.charts:
        if name in drawn.full_width:
            flush()
            draw(f"{scenario_id}-{name}", drawn.charts[name])
            continue
        pair.append(name)
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


WORDS = {"finished": "Finished", "diverged": "Finished — an arm diverged", "stopped": "Stopped — partial result",
         "failed": "Failed", "refused": "Not run"}


def status_line(snap: Snapshot, handle: RunHandle | SeedGroup | None = None) -> str:
    if isinstance(handle, SeedGroup):
        return group_status_line(snap, handle)
    steps = snap.steps
    if snap.running and snap.waiting and not steps:
        return f"Waiting: {snap.waiting} ({snap.elapsed_s:.1f} s)"
    if snap.running and snap.waiting:
        return f"Running… {snap.progress:.0%} — {snap.waiting} ({snap.elapsed_s:.1f} s)"
    if snap.running:
        return f"Running… {snap.progress:.0%} (step {steps}, {snap.elapsed_s:.1f} s)"
    if snap.from_store:
        when = datetime.datetime.fromtimestamp(snap.created_at).strftime("%Y-%m-%d %H:%M")
        return (f"Served from the run store: run {snap.run_id} ({snap.status}), trained {when} in "
                f"{snap.elapsed_s:.1f} s — no retraining")
    if snap.status == "refused":
        return "Not run: this machine cannot run these settings"
    line = f"{WORDS.get(snap.status, snap.status)} after {steps_per_arm(snap.frame)} in {snap.elapsed_s:.1f} s"
    if snap.status == "stopped" and not snap.run_id:
        return line + " · not stored"
    return line + (f" · stored as run {snap.run_id}" if snap.run_id else "")


def group_status_line(snap: Snapshot, group: SeedGroup) -> str:
    snaps = group.snapshots()
    seeds = f"seeds {group.seeds[0]}–{group.seeds[-1]}"
    if snap.running:
        current = f"seed {group.seeds[max(0, len(snaps) - 1)]} ({max(1, len(snaps))} of {len(group.seeds)}, {seeds})"
        return f"Running… {snap.progress:.0%} — {snap.waiting or current}, {snap.elapsed_s:.1f} s"
    served = sum(s.from_store for s in snaps)
    ids = ", ".join(s.run_id for s in snaps if s.run_id)
    return (f"{WORDS.get(snap.status, snap.status)}: {len(snaps)} of {len(group.seeds)} {seeds} in "
            f"{snap.elapsed_s:.1f} s ({len(snaps) - served} trained, {served} from the run store) · runs {ids}")
