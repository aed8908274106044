"""The live view's budget: charts still empty are rebuilt at once, filled ones within the budget."""
import time

import pandas as pd
import plotly.graph_objects as go
import pytest

from explorer.runs.handle import Snapshot
from explorer.view import chart, feed, live
from scenarios import get_scenario


class Growing:
    """A running handle whose records are the first `rows` of a real run's."""

    running = True

    def __init__(self, frame, config) -> None:
        self.frame, self.config, self.rows = frame, config, 0

    def rows_count(self) -> int:
        return self.rows

    def snapshot(self, with_frame: bool = True) -> Snapshot:
        return Snapshot(self.frame.iloc[:self.rows], "running", 0.5, [], None, 1.0, None)


@pytest.fixture(scope="module")
def run():
    scenario = get_scenario("vanishing-gradients")
    config = scenario.validate({"depth": 4, "width": 16, "steps": 40})
    return scenario, config, scenario.run(config).frame


def build(scenario, handle, state: dict, rows: int) -> live.Drawn:
    """The live view built from the first `rows` records, the budget's wait treated as over, every
    chart in view (tests/test_live_near.py: the view builds only those)."""
    handle.rows = rows
    kept = state.get(live.drawn_key(scenario.id))
    if kept is not None:
        kept.next_at = 0.0
    every = list(scenario.figures(handle.frame.iloc[:0], handle.config))
    return live.built(scenario, handle, [], "min–max", None, state, every)


def test_a_chart_shows_data_from_two_points_of_a_line_or_one_marker_bar_or_cell() -> None:
    def shows(*traces) -> bool:
        return chart.shows_data(chart.payload("figure", go.Figure(list(traces))))

    assert not shows() and not shows(go.Scatter(y=[1.0])), "one point of a line is not seen"
    assert shows(go.Scatter(y=[1.0, 2.0])) and shows(go.Scatter(y=[1.0]), go.Scatter(y=[1.0, 3.0]))
    assert shows(go.Scatter(y=[1.0], mode="lines+markers")) and shows(go.Bar(y=[3.0]))
    assert shows(go.Heatmap(z=[[1.0]])) and not shows(go.Heatmap(z=[]))


def test_charts_still_empty_are_rebuilt_at_the_next_records_and_filled_ones_within_the_budget(run) -> None:
    scenario, config, frame = run
    undrawn = frame[frame["metric"] == "accuracy"].reset_index(drop=True)  # records no chart draws
    handle, state = Growing(undrawn, config), {}
    before = time.monotonic()
    blank = build(scenario, handle, state, len(undrawn) // 2)
    assert blank.charts and not any(map(chart.shows_data, blank.charts.values()))
    assert blank.quick_left == live.QUICK_CPU_S, "no chart shows anything: the quick rebuilds' CPU is kept"
    assert blank.next_at >= before + 0.8 * max(live.MIN_REBUILD_S, blank.cost_s / live.BLANK_CPU_SHARE)
    blank.next_at = 0.0
    assert blank.due(len(undrawn) // 2 + 1) and not blank.due(len(undrawn) // 2), "at new records only"

    handle, state = Growing(frame, config), {}
    first = build(scenario, handle, state, 1)
    assert not all(map(chart.shows_data, first.charts.values()))
    assert first.quick_left == pytest.approx(max(live.QUICK_CPU_S - first.cost_s, 0.0))
    assert first.next_at <= time.monotonic() + 0.8 * live.MIN_REBUILD_S, "charts still empty: the fastest rate"
    first.next_at = 0.0
    assert first.due(2) and not first.due(1)

    before = time.monotonic()
    full = build(scenario, handle, state, len(frame))
    assert all(map(chart.shows_data, full.charts.values()))
    assert full.quick_left == 0 and not full.due(len(frame) + 100), "filled: the budget decides"
    assert full.next_at >= before + 0.8 * max(live.MIN_REBUILD_S, full.cost_s / live.VIEW_CPU_SHARE)


def test_a_chart_that_stays_empty_costs_a_little_quick_rebuilding_only(run) -> None:
    scenario, config, frame = run
    without_loss = frame[frame["metric"] != "loss"].reset_index(drop=True)
    handle, state, spent, lefts = Growing(without_loss, config), {}, [], []
    for rows in range(len(without_loss) // 2, len(without_loss), len(without_loss) // 32):
        drawn = build(scenario, handle, state, rows)
        spent.append(drawn.cost_s)
        lefts.append(drawn.quick_left)
    assert not chart.shows_data(drawn.charts["loss"]) and drawn.charts, "the loss chart stays empty"
    assert lefts[0] > 0 and lefts[-1] == 0, "quick rebuilds at first, then the budget decides"
    ended = lefts.index(0)
    assert sum(spent[:ended + 1]) >= live.QUICK_CPU_S > sum(spent[:ended]), "for QUICK_CPU_S of CPU"
    assert not drawn.due(len(without_loss))


def test_a_held_poll_is_answered_at_new_records_while_charts_fill_in(run) -> None:
    scenario, config, frame = run
    handle = Growing(frame, config)
    subscription = feed.Feed(scenario, handle, [], "min–max", None, chart_prefix=scenario.id)
    assert not feed.filling(subscription), "the page has not drawn it yet: nothing to answer early"
    build(scenario, handle, subscription.state, 1)
    assert not feed.filling(subscription), "no new records"
    handle.rows = 5
    assert not feed.filling(subscription), "new records, but the wait is not over"
    subscription.state[live.drawn_key(scenario.id)].next_at = 0.0
    assert feed.filling(subscription), "new records, charts empty, the wait over: answer now"
    build(scenario, handle, subscription.state, len(frame))
    handle.rows = len(frame) + 1
    assert not feed.filling(subscription), "every chart shows something: held for its tick"


def test_a_page_rerun_draws_what_its_feed_built_from_more_records(run) -> None:
    scenario, config, frame = run
    handle, page_state = Growing(frame, config), {}
    key = live.drawn_key(scenario.id)
    token = feed.register(feed.Feed(scenario, handle, [], "min–max", None, chart_prefix=scenario.id))
    build(scenario, handle, page_state, 1)
    feed.adopt(token, key, page_state[key])
    newer = build(scenario, handle, feed.get(token).state, len(frame))
    again = feed.register(feed.Feed(scenario, handle, [], "min–max", None, chart_prefix=scenario.id), token)
    assert again == token and feed.get(token).state[key] is newer, "a page rerun keeps what its feed built"
    feed.catch_up(token, key, page_state)
    assert page_state[key] is newer, "the page draws the feed's newer charts"
    other: dict = {}
    ours = build(scenario, handle, other, len(frame))
    feed.catch_up(token, key, other)
    assert other[key] is ours, "the page's own, built from as many records, stays"


def test_the_browsers_drawing_time_is_charged_to_the_budget(run) -> None:
    """Drawing took the browser b seconds: charts still filling in are not held back by it; once
    all show something the next rebuild waits b / VIEW_CPU_SHARE longer."""
    scenario, config, frame = run
    handle, state = Growing(frame, config), {}
    partial = build(scenario, handle, state, 3)
    assert 0 < partial.quick_left < live.QUICK_CPU_S, "some charts empty: rebuilt quickly"
    left, waits_until = partial.quick_left, partial.next_at
    live.charge_drawing(state, scenario.id, 0.5)
    assert (partial.quick_left, partial.next_at) == (left, waits_until), "filling in: nothing charged"
    full = build(scenario, handle, state, len(frame))
    assert full.quick_left == 0, "every chart shows something"
    waits_until = full.next_at
    live.charge_drawing(state, scenario.id, 0.2)
    pushed = full.next_at - waits_until
    assert pushed == pytest.approx(0.8 * 0.2 / live.VIEW_CPU_SHARE), f"the next rebuild waits {pushed:.2f} s more"
    live.charge_drawing(state, scenario.id, -1.0)
    assert full.next_at - waits_until == pushed, "nothing reported, nothing charged"


def test_a_poll_reports_the_drawing_time_within_bounds() -> None:
    assert feed._seconds("300", feed.MAX_DRAWN_MS) == 300.0
    assert feed._seconds(None, 2.0) == feed._seconds("x", 2.0) == feed._seconds("-5", 2.0) == 0.0
    assert feed._seconds("nan", 2.0) == 0.0 and feed._seconds("inf", 2.0) == 2.0


def test_a_poll_while_the_page_draws_its_charts_builds_nothing(run) -> None:
    """The page's run registers the feed, builds and draws the charts, then hands them over: a poll
    in between (the status line starts polling before the charts are built) builds no second set."""
    scenario, config, frame = run
    handle = Growing(frame, config)
    handle.rows = len(frame)
    token = feed.register(feed.Feed(scenario, handle, [], "min–max", None, chart_prefix=scenario.id))
    subscription = feed.get(token)
    message = feed.answer(subscription)
    assert message["running"] and message["charts"] == {} and message["names"] == []
    assert live.drawn_key(scenario.id) not in subscription.state, "nothing built beside the page"
    feed.adopt(token, live.drawn_key(scenario.id), None)  # the page drew nothing (no records yet)
    assert feed.answer(subscription)["charts"], "handed over: the feed builds"


def test_the_status_lines_warnings_are_plain_text_as_the_component_paints_them() -> None:
    """The status component paints each warning as text: markdown escapes would show as backslashes."""
    event = {"kind": "diverged", "arm": "no clipping", "step": 1, "message": "diverged at step 1: loss is nan"}
    snap = Snapshot(pd.DataFrame(), "diverged", 1.0, [event, {"kind": "note", "arm": "x", "message": "m"}], None, 1.0,
                    "r1")
    assert live.warnings(snap) == ["no clipping: diverged at step 1: loss is nan"]
