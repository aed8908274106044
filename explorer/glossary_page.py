"""The Glossary page: every term, our one-line definition, and the scenarios that show it live."""
import streamlit as st

from explorer.glossary import SECTIONS, TERMS, coverage, scenarios_by_term
from scenarios import all_scenarios


def render_glossary(scenario_pages: dict[str, st.Page]) -> None:
    st.title("Glossary")
    scenarios = all_scenarios()
    shown, total = coverage(scenarios)
    by_term = scenarios_by_term(scenarios)
    st.markdown(f"**{shown} of {total} terms have a live experiment.** Each term links to the scenarios whose "
                "runs show it; the rest are listed so you know what is not covered yet.")
    st.progress(shown / total if total else 0.0)
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
            name_col, link_col = st.columns([3, 2], vertical_alignment="center")
            name_col.markdown(f"**{term.name}** — {term.definition}")
            with link_col:
                if by_term[term.name]:
                    for scenario in by_term[term.name]:
                        st.page_link(scenario_pages[scenario.id], label=scenario.title, icon=":material/science:")
                else:
                    st.caption("No live experiment yet")
