"""The home and the navigation: every scenario under its topic, each card's picture from a real stored run."""
import json
import re
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer.page.bench_times import DEFAULT_RUN_S, run_time, seconds_label
from explorer.page.pictures import PICTURE_NAME, PictureRuns, key_figure, picture_source
from explorer.page.topics import TOPICS, by_topic, first_scenario
from explorer.runs.pool import WorkerPool
from explorer.runs.serving import save_result
from explorer.runs.store import COMPLETE, RunStore
from scenarios import all_scenarios, get_scenario
from tests.tiny_runs import tiny_result

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = all_scenarios()


def home_app() -> None:
    import streamlit as st
    from explorer.page.pages import build_navigation
    sections = build_navigation()
    st.session_state["sections"] = {name: [page.title for page in pages] for name, pages in sections.items()}
    st.navigation(sections, position="top").run()


def walk(node):
    """Every node of the page, in the order it is drawn."""
    yield node
    for child in getattr(node, "children", {}).values():
        yield from walk(child)


def cards(at: AppTest) -> dict[str, dict]:
    """scenario id -> its card: the topic heading above it, its picture's figure (or None), its captions."""
    found, topic, current = {}, None, None
    for node in walk(at.main):
        kind = getattr(node, "type", None)
        if kind == "subheader":
            topic = node.value
        block_id = getattr(getattr(node, "proto", None), "id", "") if kind == "flex_container" else ""
        if "-card-" in block_id:
            current = found.setdefault(block_id.split("-card-", 1)[1], {"topic": topic, "figure": None, "captions": []})
        elif current is not None and kind == "plotly_chart":
            current["figure"] = json.loads(node.proto.spec)
        elif current is not None and kind == "caption":
            current["captions"].append(node.value)
    return found


def test_the_navigation_has_a_section_per_topic_with_every_scenario() -> None:
    at = AppTest.from_function(home_app, default_timeout=60).run()
    assert not at.exception
    sections = at.session_state["sections"]
    assert sections[""] == ["Home", "Runs", "Your runs", "Glossary", "Will it fit?"], "the explorer's own pages come first, ungrouped"
    topics = [name for name in sections if name]
    assert topics == [t for t in TOPICS if any(s.topic == t for s in SCENARIOS)], topics
    for scenario in SCENARIOS:
        holding = [name for name, titles in sections.items() if scenario.title in titles]
        assert holding == [scenario.topic], f"{scenario.id} is under {holding}, not {scenario.topic!r}"


def test_every_card_sits_under_its_topic_with_a_picture_from_its_stored_run() -> None:
    """With a stored run of each scenario, the home draws every card's key figure from it at once."""
    store = RunStore()
    for scenario in SCENARIOS:
        result = tiny_result(scenario.id)
        save_result(store, scenario, scenario.validate(scenario.tiny), result.status, result.frame, result.summary,
                    [], result.duration_s)
    at = AppTest.from_function(home_app, default_timeout=120).run()
    assert not at.exception
    found = cards(at)
    reading_order = [s.id for members in by_topic(SCENARIOS).values() for s in members]
    assert list(found) == reading_order, "cards grouped by topic, in gallery order"
    for scenario in SCENARIOS:
        card = found[scenario.id]
        assert card["topic"] == scenario.topic, f"{scenario.id} is drawn under {card['topic']!r}"
        assert card["figure"] is not None, f"{scenario.id} has no picture: {card['captions']}"
        meta = card["figure"]["layout"]["meta"]
        stored = store.get(meta["run_id"])
        assert stored is not None and stored.scenario == scenario.id and stored.status in COMPLETE, meta
        assert any(meta["run_id"] in c for c in card["captions"]), "the card names the run its picture shows"
        declared = scenario.picture or next(e.figure for e in scenario.terms.values() if e.figure)
        assert meta["figure"] == declared, f"{scenario.id}: picture {meta['figure']!r}, declared {declared!r}"
    assert not any("Pictures:" in c.value for c in at.caption), "no picture run is needed"


@pytest.mark.slow
def test_a_home_without_stored_runs_shows_placeholders_and_starts_one_picture_run() -> None:
    at = AppTest.from_function(home_app, default_timeout=120).run()
    assert not at.exception
    start = first_scenario(SCENARIOS)
    line = next(el for el in walk(at.main) if getattr(getattr(el, "proto", None), "id", "").endswith("start-here"))
    assert any(getattr(el, "type", None) == "page_link" and start.title in el.proto.label for el in walk(line))
    assert any(f"Pictures: 0 of {len(SCENARIOS)}" in c.value for c in at.caption)
    found = cards(at)
    assert set(found) == {s.id for s in SCENARIOS} and not any(c["figure"] for c in found.values())
    assert any("Training a tiny run" in c for c in found[start.id]["captions"])
    assert all(any("waits for the one before it" in c for c in found[s.id]["captions"])
               for s in SCENARIOS if s.id != start.id), "one picture run at a time"
    from explorer.page.pictures import picture_runs
    from explorer.page.session import run_store
    handle = picture_runs(str(run_store().path)).run_of(start)
    assert handle is not None and handle.config == start.validate(start.tiny)
    handle.stop(keep=False)  # the pool is the test process's: free it for the next test
    assert handle.join(10)


@pytest.mark.slow
def test_picture_runs_go_one_at_a_time_through_the_pool_and_are_stored() -> None:
    store = RunStore()
    first, second = get_scenario("vanishing-gradients"), get_scenario("warmup")
    runs, pool = PictureRuns(), WorkerPool(size=2)
    try:
        runs.advance([first, second], store, pool)
        runs.advance([first, second], store, pool)
        assert runs.run_of(first) is not None and runs.run_of(second) is None, "the second waits for the first"
        assert runs.run_of(first).join(120)
        source = picture_source(store, first)
        assert source is not None and source.settings == "tiny settings"
        assert source.run.run_id == runs.run_of(first).snapshot().run_id, "the picture run is the stored run"
        runs.advance([second], store, pool)
        assert runs.run_of(second) is not None and runs.run_of(second).join(120)
        runs.advance([first, second], store, pool)
        assert store.count() == 2, "each scenario is tried once per server"
        names = [store.get(runs.run_of(s).snapshot().run_id).name for s in (first, second)]
        assert names == [PICTURE_NAME] * 2, f"picture runs are named so Runs says why they are there: {names}"
    finally:
        pool.shutdown()


def test_a_stored_default_run_is_preferred_to_a_tiny_one() -> None:
    scenario = get_scenario("vanishing-gradients")
    store = RunStore()
    result = tiny_result(scenario.id)
    tiny = save_result(store, scenario, scenario.validate(scenario.tiny), "finished", result.frame, result.summary, [], 1.0)
    assert picture_source(store, scenario).run.run_id == tiny
    time.sleep(0.01)  # the default run is newer, and it is the default
    default = save_result(store, scenario, scenario.validate({}), "finished", result.frame, result.summary, [], 1.0)
    assert picture_source(store, scenario).run.run_id == default
    assert picture_source(store, scenario).settings == "default settings"
    assert key_figure(scenario, ["loss", "backprop_profile"]) == "backprop_profile"
    assert key_figure(scenario, ["loss"]) == "loss", "a figure these records did not draw falls back to the first"


def test_bench_times_are_the_readmes_speed_table() -> None:
    """The cards' "default run ~1 s" is bench/bench.py's number as the README quotes it, or the estimate."""
    speed = (ROOT / "README.md").read_text().split("`python bench/bench.py`", 1)[1].split("**The page row.**")[0]
    rows = re.findall(r"^\| ([a-z0-9-]+)\s+\| ([0-9.]+)\s+\|", speed, re.MULTILINE)  # bench.py's table only
    assert {sid: float(seconds) for sid, seconds in rows} == DEFAULT_RUN_S
    assert seconds_label(0.84) == "~1 s" and seconds_label(4.61) == "~5 s" and seconds_label(300) == "~5 min"
    assert run_time(get_scenario("dead-relu")) == f"default run {seconds_label(DEFAULT_RUN_S['dead-relu'])}"
    unmeasured = [s for s in SCENARIOS if s.id not in DEFAULT_RUN_S]
    for scenario in unmeasured:
        said = run_time(scenario)
        assert (said is None) == (scenario.estimate(scenario.validate({})) is None), (scenario.id, said)
        assert said is None or said.endswith("(estimated)")


def test_a_cards_picture_drops_point_labels_that_would_pile_up() -> None:
    """autodiff's graph names every node: at 150 px its labels ran into each other. The card keeps
    the markers and lines, not the text."""
    from explorer.page.pictures import small
    scenario = get_scenario("autodiff")
    result = tiny_result("autodiff")
    figures = scenario.figures(result.frame, scenario.validate(scenario.tiny))
    labelled = [name for name in figures if any("text" in (getattr(t, "mode", None) or "") for t in figures[name].data)]
    assert labelled, "autodiff draws a figure with point labels"
    for name in labelled:
        modes = [getattr(t, "mode", None) for t in small(figures[name], "autodiff", "run", name).data]
        assert not any(m and "text" in m and m != "text" for m in modes), (name, modes)


def test_a_cards_bar_picture_drops_value_labels_and_wraps_category_names() -> None:
    """qlora's memory bars at card size: the "128.0 bits" totals were clipped at the top edge and the
    two-line category names ran into each other. The card hides the labels and wraps the names on
    short lines; a marker on the axis edge is drawn whole."""
    from explorer.page.pictures import small
    scenario = get_scenario("qlora")
    figures = scenario.figures(tiny_result("qlora").frame, scenario.validate(scenario.tiny))
    card = small(figures["memory"], "qlora", "run", "memory")
    bars = [t for t in card.data if t.type == "bar"]
    assert bars and all(t.text is None and not t.texttemplate for t in bars), [t.text for t in bars]
    labels = [t for t in card.data if getattr(t, "mode", None) == "text"]
    assert labels and all(t.visible is False for t in labels), "the totals written above the bars are hidden"
    names = list(card.layout.xaxis.ticktext)
    assert all(len(line) <= 10 for name in names for line in name.split("<br>")), names
    assert [name.replace("<br>", " ") for name in names] == [n.replace("<br>", " ") for n in
                                                              figures["memory"].layout.xaxis.ticktext], names
    lines = small(figures["memory"], "qlora", "run", "memory")
    assert all(t.cliponaxis is False for t in lines.data if t.type == "scatter")


def test_a_cards_axis_keeps_at_most_four_of_a_figures_listed_ticks() -> None:
    """flash-attention's SRAM sizes 16…1024 as ticks: at card width "128 192 256" ran together."""
    from explorer.page.pictures import MAX_CARD_TICKS, small
    scenario = get_scenario("flash-attention")
    figures = scenario.figures(tiny_result("flash-attention").frame, scenario.validate(scenario.tiny))
    full = figures["hbm_traffic"]
    card = small(full, "flash-attention", "run", "hbm_traffic")
    assert full.layout.xaxis.tickvals is not None and len(full.layout.xaxis.tickvals) > MAX_CARD_TICKS, full.layout.xaxis
    for axis in (card.layout.xaxis, card.layout.yaxis):
        assert axis.tickvals is None or len(axis.tickvals) <= MAX_CARD_TICKS, axis.tickvals
    assert card.layout.xaxis.tickvals[0] == full.layout.xaxis.tickvals[0], "thinned, not replaced"


@pytest.mark.parametrize("scenario_id, figure", [("dead-relu", "dead_units"), ("attention", "attention_maps")])
def test_a_cards_panels_lose_their_titles_and_keep_their_labels_to_the_left_panel(scenario_id, figure) -> None:
    """dead-relu's "ReLU / LeakyReLU / GELU" panel titles were cut by the card's top edge (an empty
    `annotations` list left them), and attention's second map drew its query labels over the first map."""
    from explorer.page.pictures import small
    scenario = get_scenario(scenario_id)
    figures = scenario.figures(tiny_result(scenario_id).frame, scenario.validate(scenario.tiny))
    assert len(figures[figure].layout.annotations) >= 2, "the full figure has its panel titles"
    card = small(figures[figure], scenario_id, "run", figure)
    assert not card.layout.annotations, [a.text for a in card.layout.annotations]
    labelled = sorted(name for name in card.layout if name.startswith("yaxis") and card.layout[name].showticklabels
                      is not False)
    assert labelled and all(card.layout["xaxis" + name[5:]].domain[0] < 0.05 for name in labelled), labelled

class _Stored:
    """A picture run that has ended and is stored (what PictureRuns reads of a RunHandle)."""
    running = False

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def snapshot(self, with_frame: bool = True):
        return self


def _progress_once(scenario_id: str) -> None:
    import streamlit as st
    from explorer.page.home import picture_progress
    from scenarios import get_scenario
    if not st.session_state.get("drawn"):  # its st.rerun() would draw it again: once is the test
        st.session_state["drawn"] = True
        picture_progress([get_scenario(scenario_id)], 1)


def test_the_last_picture_run_stored_is_named_though_no_card_waits_any_more() -> None:
    """The page reran as soon as the last picture was stored, before naming it: Runs listed that run
    with no name for good (collectives' in a review). It is named before the rerun."""
    from explorer.page.pictures import picture_runs
    from explorer.page.session import run_store
    scenario, store = get_scenario("vanishing-gradients"), run_store()
    result = tiny_result(scenario.id)
    run_id = save_result(store, scenario, scenario.validate(scenario.tiny), "finished", result.frame,
                         result.summary, [], 1.0)
    picture_runs(str(store.path))._runs[(scenario.id, scenario.code_version())] = _Stored(run_id)
    AppTest.from_function(_progress_once, args=(scenario.id,), default_timeout=60).run()
    assert store.get(run_id).name == PICTURE_NAME, f"the last picture run is named {store.get(run_id).name!r}"
