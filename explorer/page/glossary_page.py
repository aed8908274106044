"""The Glossary page: every term, our one-line definition, and the figure that shows it live.

Coverage is counted from the scenarios' declared evidence (a figure plus the metrics a real
run records), over the course glossary's 66 terms and, apart, the further terms. Below the
terms, the seed's 23 training methods, each linked to the page that shows it or "not yet".

A term's entry has an address: the page opened with `?term=<name>` (what `term_links` link
to, from the home's cards and under a scenario's figures) shows that entry first, framed.
"""
import functools
from collections.abc import Iterable

import pandas as pd
import streamlit as st

from explorer.glossary import (BY_NAME, METHODS, SECTIONS, TERMS, Term, coverage, method_coverage, scenarios_by_method,
                               scenarios_by_term)
from explorer.plaintext import plain
from scenarios import all_scenarios, get_scenario
from scenarios.base import COLUMNS


def render_glossary(scenario_pages: dict[str, st.Page]) -> None:
    st.title("Glossary")
    scenarios = all_scenarios()
    shown, total = coverage(scenarios)
    extra_shown, extra_total = (a - b for a, b in zip(coverage(scenarios, None), (shown, total)))
    by_term = scenarios_by_term(scenarios)
    st.markdown(f"**{shown} of {total} terms of the course glossary have a live experiment** "
                f"(and {extra_shown} of the {extra_total} further terms). A term counts only where a scenario "
                "records the metrics and draws the figure that show it; each links to that figure's page.")
    st.progress(shown / total if total else 0.0)
    focused_entry(by_term, scenario_pages)
    left, right = st.columns([3, 2], vertical_alignment="bottom")
    needle = left.text_input("Find a term", key="glossary:find", placeholder="e.g. warmup, LoRA, all-reduce")
    only_live = right.toggle("Only terms with a live experiment", key="glossary:live")
    needle = needle.strip().lower()
    for section in SECTIONS:
        terms = [t for t in TERMS if t.section == section
                 and (not needle or needle in t.name.lower() or needle in t.definition.lower())
                 and (not only_live or by_term[t.name])]
        if not terms:
            continue
        live = sum(1 for t in terms if by_term[t.name])
        st.subheader(section)
        st.caption(f"{live} of {len(terms)} with a live experiment")
        for term in terms:
            with st.container(border=True):  # one frame a term: its links read as its own, not its neighbour's
                entry(term, by_term, scenario_pages)
    methods_index(scenarios, scenario_pages, needle, only_live)


def methods_index(scenarios: list, scenario_pages: dict[str, st.Page], needle: str, only_live: bool) -> None:
    """The seed's 23 training methods: each links to the pages whose evidence shows it, or says not yet."""
    full, part, total = method_coverage(scenarios)
    by_method = scenarios_by_method(scenarios)
    st.header("Training methods")
    st.markdown(f"**{full} of {total} training methods have a live experiment** (and {part} more in part), "
                "counted from the evidence the scenarios declare, like the terms above.")
    for name, meaning in METHODS:
        if (needle and needle not in name.lower() and needle not in meaning.lower()) or (only_live and not by_method[name]):
            continue
        name_col, link_col = st.container(border=True).columns([3, 2], vertical_alignment="top")
        name_col.markdown(f"**{name}** — {meaning}")
        with link_col:
            if not by_method[name]:
                st.caption("Not yet")
            for scenario in by_method[name]:
                evidence = scenario.methods[name]
                st.page_link(scenario_pages[scenario.id], label=scenario.title, icon=":material/science:")
                title = figure_title(scenario.id, evidence.figure)
                st.caption(("in part: " if evidence.partial else "") + (f"figure “{title}”" if title else "")
                           + (f" — {evidence.how}" if evidence.how else ""))


TERM_PARAM = "term"  # the query parameter that opens the Glossary on one entry


def term_links(terms: Iterable[str], glossary_page: st.Page) -> None:
    """Each term as a link to its entry on the Glossary page, in one wrapping row."""
    row = st.container(horizontal=True, gap="xxsmall")
    for name in terms:
        row.page_link(glossary_page, label=name, query_params={TERM_PARAM: name},
                      help=BY_NAME[name].definition if name in BY_NAME else None)


def focused_entry(by_term: dict[str, list], scenario_pages: dict[str, st.Page]) -> None:
    """The entry the URL names (`?term=`), framed above the list."""
    wanted = st.query_params.get(TERM_PARAM)
    if not wanted:
        return
    if wanted not in BY_NAME:
        st.warning(plain(f"The link names a term the glossary does not have: {wanted}"))
        return
    with st.container(border=True, key="glossary-focus"):
        entry(BY_NAME[wanted], by_term, scenario_pages)


def entry(term: Term, by_term: dict[str, list], scenario_pages: dict[str, st.Page]) -> None:
    """One term: its definition, and each page whose figure shows it."""
    name_col, link_col = st.columns([3, 2], vertical_alignment="top")
    name_col.markdown(f"**{term.name}** — {term.definition}")
    with link_col:
        if not by_term[term.name]:
            st.caption("No live experiment yet")
        for scenario in by_term[term.name]:
            evidence = scenario.terms[term.name]
            st.page_link(scenario_pages[scenario.id], label=scenario.title, icon=":material/science:")
            title = figure_title(scenario.id, evidence.figure)
            st.caption((f"figure “{title}”" if title else "") + (f" — {evidence.how}" if evidence.how else ""))


@functools.cache
def figure_title(scenario_id: str, figure: str | None) -> str:
    """The title of a scenario's figure, drawn once per process from an empty frame."""
    if figure is None:
        return ""
    scenario = get_scenario(scenario_id)
    figures = scenario.figures(pd.DataFrame(columns=COLUMNS), scenario.validate({}))
    return str(figures[figure].layout.title.text or figure) if figure in figures else figure
