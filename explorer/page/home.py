"""The home: where to start, then a gallery of every scenario, grouped by topic in reading order.

Each card, as tall as the tallest in its row (never clipped: a narrow window makes a row taller), holds the scenario's question, a small picture
of its key figure drawn from a real stored run (explorer/page/pictures.py), how long its default
run takes (explorer/page/bench_times.py) and its glossary terms, each a link to its entry.
Cards whose picture is still being trained show a placeholder; a fragment starts their
tiny runs one at a time and redraws the page when one is stored.
"""
import streamlit as st

from explorer.page.bench_times import run_time
from explorer.page.glossary_page import term_links
from explorer.page.pictures import PICTURE_PX, PictureRuns, Source, picture, picture_runs, picture_source, waiting_words
from explorer.page.session import run_store, worker_pool
from explorer.page.topics import by_topic, first_scenario
from scenarios import all_scenarios
from scenarios.base import Scenario

PER_ROW = 3
WAIT_TICK_S = 1.0  # how often the home looks for newly stored pictures
# A card's title wraps instead of ending in "…" (a page link is one line by default): the longest
# titles ("Pretraining, then fine-tuning: ULMFiT, SFT and instruction tuning") lost their ends.
WRAPPED_TITLES = ("<style>[class*='st-key-card-'] [data-testid='stPageLink-NavLink'] span, "
                  "[class*='st-key-card-'] [data-testid='stPageLink-NavLink'] p "
                  "{white-space: normal; overflow: visible; text-overflow: clip;}</style>")


def render_home(scenario_pages: dict[str, st.Page], pages: dict[str, st.Page]) -> None:
    scenarios = all_scenarios()
    store = run_store()
    runs = picture_runs(str(store.path))
    sources = {s.id: picture_source(store, s) for s in scenarios}

    st.html(WRAPPED_TITLES)
    st.title("Training Dynamics Explorer")
    st.markdown("Pick a question, move a setting, and watch real PyTorch training answer it as it runs: "
                "loss curves, per-layer gradients and more, measured from the run, never drawn from a formula.")
    start_here(first_scenario(scenarios), scenario_pages)
    links = st.container(horizontal=True)
    links.page_link(pages["runs"], label="Stored runs: open, compare, delete", icon=":material/history:")
    links.page_link(pages["glossary"], label="Glossary: every term and where to see it", icon=":material/menu_book:")
    reading_order = [s for members in by_topic(scenarios).values() for s in members]
    missing = [s for s in reading_order if sources[s.id] is None]  # their pictures are made in this order
    if missing:
        st.fragment(run_every=WAIT_TICK_S if any(not runs.gave_up(s) for s in missing) else None)(
            picture_progress)(missing, len(scenarios))
    for topic, members in by_topic(scenarios).items():
        st.subheader(topic, anchor=topic_anchor(topic))
        for start in range(0, len(members), PER_ROW):
            for column, scenario in zip(st.columns(PER_ROW), members[start:start + PER_ROW]):
                with column.container(border=True, height="stretch", gap="xsmall", key=f"card-{scenario.id}"):
                    card(scenario, sources[scenario.id], runs, scenario_pages[scenario.id], pages["glossary"])


def topic_anchor(topic: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in topic.lower()).strip("-")


def start_here(scenario: Scenario, scenario_pages: dict[str, st.Page]) -> None:
    """One line: the first page to open, and what a run looks like."""
    row = st.container(horizontal=True, vertical_alignment="center", gap="xsmall", key="start-here")
    row.markdown("**New here? Start with**", width="content")
    row.page_link(scenario_pages[scenario.id], label=f"**{scenario.title}**", icon=":material/play_circle:")
    row.markdown("— move a setting or press **Run**: a worker trains it, the plots fill in within seconds, "
                 "and the run is stored.", width="content")


def card(scenario: Scenario, source: Source | None, runs: PictureRuns, page: st.Page,
         glossary_page: st.Page) -> None:
    st.page_link(page, label=f"**{scenario.title}**", icon=":material/science:")
    st.markdown(f"_{scenario.question}_")
    figure = picture(scenario, source) if source is not None else None
    if figure is not None:
        st.plotly_chart(figure, config={"staticPlot": True}, height=PICTURE_PX)
    else:
        box = st.container(height=PICTURE_PX, border=True, vertical_alignment="center", horizontal_alignment="center")
        box.caption("This stored run cannot be drawn by the current code." if source is not None
                    else waiting_words(scenario, runs))
    facts = [run_time(scenario)]
    if source is not None:
        facts.append(f"picture: run `{source.run.run_id}`, {source.settings}")
    st.caption(" · ".join(fact for fact in facts if fact))
    term_links(scenario.terms, glossary_page)


def picture_progress(missing: list[Scenario], total: int) -> None:
    """While cards wait for pictures: start the next tiny run, say what trains, and redraw the
    page once one is stored."""
    store = run_store()
    if store.read_only:  # a card's picture is drawn from a stored run: none can be stored here (the banner says why)
        return
    runs = picture_runs(str(store.path))
    still = [s for s in missing if picture_source(store, s) is None]
    runs.advance(still, store, worker_pool())  # before the rerun: the last picture run stored is named too
    if len(still) < len(missing):
        st.rerun()
    training = next((s for s in still if (h := runs.run_of(s)) is not None and h.running), None)
    ready = total - len(still)
    line = f"Pictures: {ready} of {total} drawn from stored runs."
    if training is not None:
        line += f" Training a tiny run of “{training.title}” for its card (stored like any run)…"
    st.caption(line)
