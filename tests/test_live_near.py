"""While a run goes on the live view builds only the charts in view (a page of seven shows two to
four); the others keep what they showed or wait as placeholders; the final view builds them all."""
from explorer.runs.handle import Snapshot
from explorer.view import chart, feed, live
from scenarios import get_scenario
from tests.test_live import Growing
from tests.tiny_runs import tiny_result

SCENARIO = "contrastive"  # seven charts; the seventh, the embeddings, takes the whole width


class Ended(Growing):
    running = False

    def snapshot(self, with_frame: bool = True) -> Snapshot:
        return Snapshot(self.frame.iloc[:self.rows], "finished", 1.0, [], None, 1.0, None)


def handle_of(kind=Growing):
    scenario = get_scenario(SCENARIO)
    frame = tiny_result(SCENARIO).frame
    handle = kind(frame, scenario.validate(scenario.tiny))
    handle.rows = len(frame) // 2
    return scenario, handle, list(scenario.figures(frame, handle.config))


def build(scenario, handle, state: dict, near, waited: bool = True) -> live.Drawn:
    """The live view's next build, with the budget's wait over (`waited`) or just built."""
    kept = state.get(live.drawn_key(scenario.id))
    if kept is not None and waited:
        kept.next_at = kept.built_at = 0.0
    return live.built(scenario, handle, [], "min–max", None, state, near)


def built_names(drawn: live.Drawn) -> list[str]:
    return [name for name, payload in drawn.charts.items() if not payload.get("pending")]


def test_a_running_view_builds_the_first_rows_then_the_charts_in_view() -> None:
    scenario, handle, names = handle_of()
    state: dict = {}
    first = build(scenario, handle, state, None)
    assert list(first.charts) == names, "every chart has its place on the page"
    assert built_names(first) == names[:live.FIRST_CHARTS], "no chart on the page yet: the first two rows"
    waiting = [first.charts[name] for name in names[live.FIRST_CHARTS:]]
    assert all(p["version"] == "pending" and not p["figure"] and not chart.shows_data(p) for p in waiting)

    handle.rows += 5
    scrolled = build(scenario, handle, state, [names[5], names[6]])
    assert built_names(scrolled) == names[:live.FIRST_CHARTS] + names[5:7], "the two in view built; the first kept"
    assert scrolled.charts[names[0]] is first.charts[names[0]], "a chart out of view keeps what it showed"
    assert scrolled.charts[names[4]]["pending"], "never in view: still a placeholder"

    handle.rows = len(handle.frame)
    again = build(scenario, handle, state, None)  # the page's own rerun: no word of what is in view
    assert built_names(again) == built_names(scrolled)
    assert all(again.charts[name] is not scrolled.charts[name] for name in built_names(again)), \
        "the page's rerun rebuilds what was built before, from the newer records"
    assert again.charts["loss"]["version"] != scrolled.charts["loss"]["version"]


def test_a_placeholder_scrolled_into_view_is_built_at_the_next_poll_not_sooner_than_the_fastest_rate() -> None:
    scenario, handle, names = handle_of()
    state: dict = {}
    first = build(scenario, handle, state, None)
    first.next_at = first.built_at + 60.0  # a long wait of the budget
    assert build(scenario, handle, state, [names[4]], waited=False) is first, \
        "built just now: not again within MIN_REBUILD_S"
    first.built_at -= live.MIN_REBUILD_S
    assert build(scenario, handle, state, [names[4]], waited=False) is not first, \
        "a placeholder in view is built without waiting for the budget"
    kept = state[live.drawn_key(scenario.id)]
    kept.built_at -= live.MIN_REBUILD_S
    assert build(scenario, handle, state, [names[0]], waited=False) is kept, \
        "a built chart in view waits for the budget, as before"


def test_nothing_in_view_builds_nothing_and_the_final_view_builds_every_chart() -> None:
    scenario, handle, names = handle_of()
    state: dict = {}
    first = build(scenario, handle, state, None)
    handle.rows += 5
    hidden = build(scenario, handle, state, [])  # scrolled past every chart, or the charts in a closed tab
    assert all(hidden.charts[name] is first.charts[name] for name in names), "every chart as it was"

    scenario, ended, names = handle_of(Ended)
    final = live.built(scenario, ended, [], "min–max", None, {}, [names[0]])
    assert built_names(final) == names and final.markdown.startswith("**What to look for**")
    assert final.full_width == {"embeddings"}


def test_the_feed_asks_the_page_to_lay_out_again_when_a_placeholder_turns_out_full_width() -> None:
    scenario, handle, names = handle_of()
    key = live.drawn_key(scenario.id)
    subscription = feed.Feed(scenario, handle, [], "min–max", None, chart_prefix=scenario.id)
    token = feed.register(subscription)
    page: dict = {}
    feed.adopt(token, key, build(scenario, handle, page, None))
    assert subscription.laid_out == set(), "the page drew every chart half width"
    subscription.state[key].next_at = subscription.state[key].built_at = 0.0
    handle.rows += 5
    message = feed.answer(subscription, [chart.chart_key(scenario.id, name) for name in names[5:]])
    assert message["relayout"] and "embeddings" in message["charts"], "built in view, and it takes the whole width"
    assert subscription.state[key].full_width == {"embeddings"}
    feed.adopt(token, key, subscription.state[key])  # the page's rerun drew it full width
    handle.rows += 5
    subscription.state[key].next_at = 0.0
    assert not feed.answer(subscription, [chart.chart_key(scenario.id, "embeddings")])["relayout"]


def test_a_new_runs_placeholders_take_the_sizes_the_last_run_built() -> None:
    """The page's feeds share its chart sizes: a placeholder of a chart built before has its width and height."""
    scenario, handle, names = handle_of()
    shapes: dict = {}
    build(scenario, handle, {live.shapes_key(scenario.id): shapes}, names)  # the last run, every chart in view
    scenario, again, names = handle_of()
    first = build(scenario, again, {live.shapes_key(scenario.id): shapes}, None)
    assert first.charts["embeddings"]["pending"] and first.full_width == {"embeddings"}
    assert first.charts["embeddings"]["height"] == shapes["embeddings"][1]
