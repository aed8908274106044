"""The live view: a run (or a group of seeds) drawn from its handle, within a budget.

While a run goes on the page is drawn once, and a status component follows the run's live
feed (explorer/view/feed.py), one answer every `TICK_S` (at once when the run ends): the progress line, the run's warnings, and the
figures whose data changed, which their chart components update in place (explorer/view/chart.py).
No script reruns meanwhile (each would make the browser re-render the whole app). The
figures are rebuilt at the rate their rebuilds cost: one that took c seconds of the server's
CPU, and whose drawing took the browser b seconds (reported with the next poll), is followed by
the next no sooner than (c + b) / `VIEW_CPU_SHARE`, so the view takes at most that share of a
core from training, once every chart shows something (until then, for 0.4 s of
CPU at most, they are rebuilt at the fastest rate: the first curves are not kept waiting; while
no chart shows anything, at `BLANK_CPU_SHARE`); a poll whose inputs did not change rebuilds nothing.
A rebuild builds only the charts in view (the status component reports them with each poll; a
scenario's figures are built one by one when read, scenarios/plotting.py `Figures`): a page of
seven charts shows two to four, so a rebuild costs a half to a quarter of building them all, and
comes that much sooner within the same share. A chart never in view waits as a placeholder of its
size and is built when scrolled to; the final view builds every chart.
When the run ends (or its first figures appear) the component asks for one rerun, and the
page draws the final view: the status line, "what to look for" and the charts, each chart
in the element it had.
"""
import dataclasses
import time
from collections.abc import Collection, MutableMapping
from dataclasses import dataclass, field

import streamlit as st

from explorer.plaintext import plain, raised_powers
from explorer.runs.handle import RunHandle, Snapshot
from explorer.view.chart import chart_key, draw, payload, placeholder, shows_data
from explorer.view.compare import Overlay
from explorer.view.content import build_view
from explorer.view.line_controls import LineSettings, apply_lines
from explorer.view.live_status import live_status
from explorer.view.look import BASE_HEIGHT_PX
from explorer.view.seeds import SeedGroup
from explorer.view.status_words import status_line
from scenarios.base import Scenario
from scenarios.explanation import folded
from scenarios.plotting import is_full_width

TICK_S = 0.3             # how often a running page's status line looks at its run
VIEW_CPU_SHARE = 0.10    # the share of a core the charts' rebuilds may average while a run is going
MIN_REBUILD_S = 0.5      # never rebuild the charts more often than this
FIRST_COST_S = 0.1       # a page's first rebuild is assumed to cost this much
BLANK_CPU_SHARE = 0.25   # the share of a core rebuilds may take while no chart shows anything yet
QUICK_CPU_S = 0.4        # the most server CPU the rebuilds at the fastest rate may take, while charts are still empty
FIRST_CHARTS = 4         # the charts built while the page has shown none yet: the two rows Run brings into view
STORED_DRAWN = 16        # built views of stored runs a session keeps
SHOWN_DETAILS = 3        # "what to look for": the takeaway and this many details above the charts, the rest folded


@dataclass
class Drawn:
    """What the live view last built, and when it may build again."""

    signature: tuple = ()
    markdown: str = ""
    notes: list[str] = field(default_factory=list)
    charts: dict[str, dict] = field(default_factory=dict)   # name -> chart payload
    full_width: set[str] = field(default_factory=set)
    next_at: float = 0.0
    built_at: float = 0.0
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
    """Drawing the figures sent took the browser `seconds` (explorer/view/chart.py times each
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


def shapes_key(scenario_id: str) -> str:
    """Where `built` keeps each chart's width and height as last built (a placeholder takes them):
    a page's feeds share the page's, so a new run's placeholders have the sizes of the last run's charts."""
    return f"shapes:{scenario_id}"


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
    `lines`: smoothing and scale of the curves (explorer/view/line_controls.py), for the page only."""
    handle: RunHandle | SeedGroup | None = st.session_state.get(handle_key(scenario))
    if handle is None:
        return
    held: Drawn | None = st.session_state.get(drawn_key(scenario.id)) if hold else None
    drawn = held if held is not None and held.charts else built(scenario, handle, overlays, band, lines, st.session_state)
    if drawn is None:  # refused: nothing to draw
        return
    with st.container():  # one element whatever it holds: the charts below keep their place, and elements
        if drawn.markdown:  # "what to look for" once the run has ended, or why nothing could be drawn
            shown, more = folded(drawn.markdown, SHOWN_DETAILS)  # the charts stay near the top of the page
            st.markdown(shown)
            if more:
                st.expander(f"{len(more)} more to look for").markdown("\n".join(more))
        for note in drawn.notes:
            st.caption(note)
    draw_charts(scenario.id, drawn)


def built(scenario: Scenario, handle, overlays: list[Overlay], band: str, lines: LineSettings | None,
          state: MutableMapping, near: Collection[str] | None = None) -> Drawn | None:
    """The built view, rebuilt when its inputs changed and the budget allows (see the module doc).
    `state` keeps what was built: the session's state for the page, a feed's own for the feed.
    While the run goes on only the charts `near` the screen are built (the status component reports
    them; None: those built before, or the first `FIRST_CHARTS`); the others keep what they showed,
    or wait as a placeholder of their size. The final view builds every chart."""
    state_key = drawn_key(scenario.id)
    drawn: Drawn = state.get(state_key) or Drawn()
    running = handle.running
    signature = (id(handle), running, handle.rows_count(), handle.config, tuple(o.run_id for o in overlays), band,
                 lines)
    now = time.monotonic()
    fresh = not drawn.signature or drawn.signature[0] != id(handle)
    scrolled_to = running and not fresh and near is not None and now >= drawn.built_at + MIN_REBUILD_S and any(
        drawn.charts.get(name, {}).get("pending") for name in near)  # a placeholder came into view: build it now
    if not scrolled_to and (signature == drawn.signature or (running and not fresh and now < drawn.next_at)):
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
    shapes = state.setdefault(shapes_key(scenario.id), {})  # name -> (full width, height) when last built
    try:
        view = build_view(scenario, handle, overlays, band)
        figures = apply_lines(view.figures, lines)
        chosen = set(figures) if not running else chosen_charts(list(figures), near, None if fresh else drawn)
        charts = {}
        for name in figures:
            if name in chosen:
                charts[name] = payload(name, figures[name])
                shapes[name] = (is_full_width(figures[name]), charts[name]["height"])
            else:
                charts[name] = drawn.charts[name] if not fresh and name in drawn.charts else \
                    placeholder(name, shapes.get(name, (False, BASE_HEIGHT_PX))[1])
        qualifiers = [f"mean over {len(handle.snapshots())} seeds"] if isinstance(handle, SeedGroup) else []
        markdown = "" if snap.running else (  # read from the whole run: not drawn while it goes on
            "**What to look for**" + (f" ({', '.join(qualifiers)})" if qualifiers else "") + "\n\n"
            + raised_powers(scenario.explain(view.base, handle.config).markdown()))
    except Exception as error:  # figures that cannot draw these records must not take the page down
        drawn = Drawn(signature, f"The figures could not be drawn from these records: {type(error).__name__}: {error}")
        state[state_key] = drawn
        return drawn
    cost = time.thread_time() - started
    # The first records are often what few charts draw yet (a probe before training, one point of a
    # line): until every chart built shows something they are rebuilt as often as `MIN_REBUILD_S`
    # allows, for `QUICK_CPU_S` of CPU at most, so the first curves come at once and a chart that
    # stays empty costs no more than that. While none shows anything (a teacher trained first), the
    # rebuilds take `BLANK_CPU_SHARE` of a core at most and leave that CPU alone.
    showing = sum(shows_data(charts[name]) for name in chosen)
    left = QUICK_CPU_S if fresh else drawn.quick_left
    budget_s = cost / VIEW_CPU_SHARE
    if showing == len(chosen):
        quick, every_s = 0.0, budget_s
    elif not showing:
        quick, every_s = left, cost / BLANK_CPU_SHARE if left else budget_s
    else:
        quick = max(left - cost, 0.0)
        every_s = 0.0 if quick else budget_s
    wait_s = 0.8 * max(MIN_REBUILD_S, every_s)  # 0.8: a tick may come early
    drawn = Drawn(signature, markdown, view.notes, charts, {name for name in figures if shapes.get(name, (False,))[0]},
                  now + wait_s, now, cost, quick)
    state[state_key] = drawn
    if stored_key is not None:
        by_run[stored_key] = drawn
        while len(by_run) > STORED_DRAWN:
            del by_run[next(iter(by_run))]
    return drawn


def chosen_charts(names: list[str], near: Collection[str] | None, before: Drawn | None) -> set[str]:
    """The charts a running view builds: those near the screen; with no word of it, those it built
    before (the page's own rerun), or the first `FIRST_CHARTS` (the first build, before any is on the page)."""
    if near is not None:
        return set(near) & set(names)
    built_before = {name for name, chart in before.charts.items() if not chart.get("pending")} if before else set()
    return built_before & set(names) or set(names[:FIRST_CHARTS])


def draw_charts(scenario_id: str, drawn: Drawn) -> None:
    """Charts two to a row, in the scenario's order; a full-width one takes a row of its own. Where the
    grid is narrow the rows stack, one chart to a row (the `explorer-charts` rule in explorer/view/chart_browser.py)."""
    with st.container(key="explorer-charts"):
        _chart_rows(scenario_id, drawn)


def _chart_rows(scenario_id: str, drawn: Drawn) -> None:
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
