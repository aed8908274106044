"""The live view: a run (or a group of seeds) drawn from its handle, within a budget.

While a run goes on the page is drawn once, and a status component follows the run's live
feed (explorer/feed.py), one answer every `TICK_S` (at once when the run ends): the progress line, the run's warnings, and the
figures whose data changed, which their chart components update in place (explorer/chart.py).
No script reruns meanwhile (each would make the browser re-render the whole app). The
figures are rebuilt at the rate their rebuilds cost: one that took c seconds of the server's
CPU, and whose drawing took the browser b seconds (reported with the next poll), is followed by
the next no sooner than (c + b) / `VIEW_CPU_SHARE`, so the view takes at most that share of a
core from training, once every chart shows something (until then, for 0.4 s of
CPU at most, they are rebuilt at the fastest rate: the first curves are not kept waiting; while
no chart shows anything, at `BLANK_CPU_SHARE`); a poll whose inputs did not change rebuilds nothing.
When the run ends (or its first figures appear) the component asks for one rerun, and the
page draws the final view: the status line, "what to look for" and the charts, each chart
in the element it had.
"""
import dataclasses
import datetime
import time
from collections.abc import MutableMapping
from dataclasses import dataclass, field

import streamlit as st

from explorer.chart import chart_key, draw, payload, shows_data
from explorer.compare import Overlay
from explorer.line_controls import LineSettings, apply_lines
from explorer.live_status import live_status
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
BLANK_CPU_SHARE = 0.25   # the share of a core rebuilds may take while no chart shows anything yet
QUICK_CPU_S = 0.4        # the most server CPU the rebuilds at the fastest rate may take, while charts are still empty
STORED_DRAWN = 16        # built views of stored runs a session keeps


@dataclass
class Drawn:
    """What the live view last built, and when it may build again."""

    signature: tuple = ()
    markdown: str = ""
    notes: list[str] = field(default_factory=list)
    charts: dict[str, dict] = field(default_factory=dict)   # name -> chart payload
    full_width: set[str] = field(default_factory=set)
    next_at: float = 0.0
    cost_s: float = FIRST_COST_S
    quick_left: float = QUICK_CPU_S   # CPU seconds left for rebuilds at the fastest rate; 0 once every chart shows something

    @property
    def rows(self) -> int:
        """How many records it was built from (0 before any build)."""
        return self.signature[2] if self.signature else 0

    def due(self, rows: int) -> bool:
        """Whether charts still filling in could be rebuilt now: new records, and the wait is over."""
        return self.quick_left > 0 and rows > self.rows and time.monotonic() >= self.next_at


def charge_drawing(state: MutableMapping, scenario_id: str, seconds: float) -> None:
    """Drawing the figures sent took the browser `seconds` (explorer/chart.py times each
    `Plotly.react`): once every chart shows something, the next rebuild waits that / VIEW_CPU_SHARE
    longer. Charts still filling in are not held back (their rebuilds are bounded by `QUICK_CPU_S`)."""
    drawn: Drawn | None = state.get(drawn_key(scenario_id))
    if drawn is None or seconds <= 0 or drawn.quick_left > 0:
        return
    drawn.next_at += 0.8 * seconds / VIEW_CPU_SHARE  # 0.8 as in `built`: a tick may come early


def handle_key(scenario: Scenario) -> str:
    return f"run:{scenario.id}"


def drawn_key(scenario_id: str) -> str:
    """Where `built` keeps what it last built for a scenario's page (in the state it is given)."""
    return f"drawn:{scenario_id}"


def warnings(snap: Snapshot) -> list[str]:
    """The run's warnings, one line each: the arms that diverged. Plain text, as the status component
    paints it (its textContent); `plain()` them for a markdown element."""
    return [f"{event['arm']}: {event['message']}" for event in snap.events if event["kind"] == "diverged"]


def live_state(handle: RunHandle | SeedGroup) -> dict:
    """What the status line shows of a handle (the page's first paint, and every feed message); once
    the run has ended, its final line, which the feed's last message paints before the page reruns."""
    snap = handle.snapshot(with_frame=False)
    if not snap.running:  # the final line counts the steps of each arm: read from the frame
        snap = handle.snapshot()
    return line_state(snap, handle)


def line_state(snap: Snapshot, handle: RunHandle | SeedGroup) -> dict:
    """What the status component paints of `snap` (for an ended run, a snapshot with its frame)."""
    return {"running": snap.running, "text": status_line(snap, handle), "progress": snap.progress, "warnings": warnings(snap)}


def status_view(scenario: Scenario, waiting: str | None = None, feed_url: str | None = None,
                in_fragment: bool = False) -> None:
    """Progress and messages. `waiting` names a pending auto-run. `feed_url`: a running handle's feed
    (the line is then the live status component); `in_fragment`: drawn by a ticking fragment, which
    reruns the whole page once the run has ended (so Run/Stop change state)."""
    key = handle_key(scenario)
    handle: RunHandle | SeedGroup | None = st.session_state.get(key)
    if handle is None:
        if waiting:
            st.progress(0.0, text=waiting)
        else:
            st.info("Move a setting on the left (or press **Run**) to train. The plots fill in as training runs.")
        return
    if handle.running and feed_url is not None and not waiting:
        live_status(f"status-{scenario.id}", feed_url, int(TICK_S * 1000), live_state(handle))
        st.session_state[key + ":was_running"] = True
        return
    snap = handle.snapshot(with_frame=not handle.running)  # the frame only for the final line
    ended = not snap.running and not waiting
    if ended:  # the same component as the live line: the rerun at a run's end swaps no element (no blank)
        live_status(f"status-{scenario.id}", None, 0, line_state(snap, handle))
    else:
        st.progress(snap.progress, text=waiting or status_line(snap, handle))
    if snap.error and snap.status == "refused":
        st.error(plain(snap.error))
    elif snap.error:
        st.error(plain(f"The run failed: {snap.error}"))
        if handle.traceback:
            with st.expander("Traceback"):
                st.code(handle.traceback)
    for line in warnings(snap) if not ended else []:  # the component paints them
        st.warning(plain(line))
    if not snap.running and st.session_state.get(key + ":was_running") and in_fragment:
        st.session_state[key + ":was_running"] = False
        st.rerun()  # the run just ended: redraw the whole page so Run/Stop change state
    st.session_state[key + ":was_running"] = snap.running


def charts_view(scenario: Scenario, overlays: list[Overlay], band: str, hold: bool = False,
                lines: LineSettings | None = None) -> None:
    """"What to look for" (once the run has ended) and the figures, rebuilt within the budget.
    `hold`: a new run is about to replace this one; show what was drawn, build nothing.
    `lines`: smoothing and scale of the curves (explorer/line_controls.py), for the page only."""
    handle: RunHandle | SeedGroup | None = st.session_state.get(handle_key(scenario))
    if handle is None:
        return
    held: Drawn | None = st.session_state.get(drawn_key(scenario.id)) if hold else None
    drawn = held if held is not None and held.charts else built(scenario, handle, overlays, band, lines, st.session_state)
    if drawn is None:  # refused: nothing to draw
        return
    with st.container():  # one element whatever it holds: the charts below keep their place, and elements
        if drawn.markdown:  # "what to look for" once the run has ended, or why nothing could be drawn
            st.markdown(drawn.markdown)
        for note in drawn.notes:
            st.caption(note)
    draw_charts(scenario.id, drawn)


def built(scenario: Scenario, handle, overlays: list[Overlay], band: str, lines: LineSettings | None,
          state: MutableMapping) -> Drawn | None:
    """The built view, rebuilt when its inputs changed and the budget allows (see the module doc).
    `state` keeps what was built: the session's state for the page, a feed's own for the feed."""
    state_key = drawn_key(scenario.id)
    drawn: Drawn = state.get(state_key) or Drawn()
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
    by_run = state.setdefault(f"drawn-by-run:{scenario.id}", {})
    stored_key = (snap.run_id, *signature[3:]) if snap.run_id and not running else None
    if stored_key in by_run:
        drawn = dataclasses.replace(by_run[stored_key], signature=signature)
        state[state_key] = drawn
        return drawn
    started = time.thread_time()
    if snap.frame.empty:  # nothing recorded yet (queued, starting): nothing to draw
        drawn = Drawn(signature)
        state[state_key] = drawn
        return drawn
    try:
        view = build_view(scenario, handle, overlays, band)
        qualifiers = [f"mean over {len(handle.snapshots())} seeds"] if isinstance(handle, SeedGroup) else []
        markdown = "" if snap.running else (  # read from the whole run: not drawn while it goes on
            "**What to look for**" + (f" ({', '.join(qualifiers)})" if qualifiers else "") + "\n\n"
            + scenario.explain(view.base, handle.config).markdown())
        charts = {name: payload(name, figure) for name, figure in apply_lines(view.figures, lines).items()}
    except Exception as error:  # figures that cannot draw these records must not take the page down
        drawn = Drawn(signature, f"The figures could not be drawn from these records: {type(error).__name__}: {error}")
        state[state_key] = drawn
        return drawn
    cost = time.thread_time() - started
    # The first records are often what few charts draw yet (a probe before training, one point of a
    # line): until every chart shows something they are rebuilt as often as `MIN_REBUILD_S` allows,
    # for `QUICK_CPU_S` of CPU at most, so the first curves come at once and a chart that stays
    # empty costs no more than that. While none shows anything (a teacher trained first), the
    # rebuilds take `BLANK_CPU_SHARE` of a core at most and leave that CPU alone.
    showing = sum(map(shows_data, charts.values()))
    left = QUICK_CPU_S if fresh else drawn.quick_left
    budget_s = cost / VIEW_CPU_SHARE
    if showing == len(charts):
        quick, every_s = 0.0, budget_s
    elif not showing:
        quick, every_s = left, cost / BLANK_CPU_SHARE if left else budget_s
    else:
        quick = max(left - cost, 0.0)
        every_s = 0.0 if quick else budget_s
    wait_s = 0.8 * max(MIN_REBUILD_S, every_s)  # 0.8: a tick may come early
    drawn = Drawn(signature, markdown, list(view.notes), charts,
                  {name for name, figure in view.figures.items() if is_full_width(figure)},
                  now + wait_s, cost, quick)
    state[state_key] = drawn
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
                draw(chart_key(scenario_id, name), drawn.charts[name])
        pair.clear()

    for name in drawn.charts:
        if name in drawn.full_width:
            flush()
            draw(chart_key(scenario_id, name), drawn.charts[name])
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
