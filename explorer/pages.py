"""The navigation: a gallery home, a Runs page, the Glossary, and one page per registered scenario.

Every scenario page is the same generated page (`explorer.scenario_page`), so a new
scenario module gets its page, URL, presets, overlays, seeds and exports without UI code.
"""
import streamlit as st

from explorer.glossary_page import render_glossary
from explorer.runs_page import render_runs
from explorer.scenario_page import render_scenario
from explorer.url import mark_page
from scenarios import all_scenarios
from scenarios.base import Scenario

__all__ = ["build_navigation", "render_home", "render_scenario"]


def build_navigation(default: str = "home") -> dict[str, list[st.Page]]:
    """Sections of `st.navigation`: the explorer's own pages, then the scenarios in gallery order.

    `default` names the page a bare URL opens ("home", "runs" or "glossary")."""
    pages: dict[str, st.Page] = {}

    def home() -> None:
        mark_page("home")
        render_home(scenario_pages, pages)

    def runs() -> None:
        mark_page("runs")
        render_runs(scenario_pages)

    def glossary() -> None:
        mark_page("glossary")
        render_glossary(scenario_pages)

    for name, function, title, icon in (("home", home, "Home", "home"), ("runs", runs, "Runs", "history"),
                                        ("glossary", glossary, "Glossary", "menu_book")):
        pages[name] = st.Page(function, title=title, icon=f":material/{icon}:", url_path=name, default=name == default)
    scenario_pages = {s.id: st.Page(_page_function(s, pages["glossary"]), title=s.title, url_path=s.id)
                      for s in all_scenarios()}
    return {"Explorer": list(pages.values()), "Scenarios": list(scenario_pages.values())}


def _page_function(scenario: Scenario, glossary_page: st.Page):
    def page() -> None:
        render_scenario(scenario, glossary_page)
    page.__name__ = "page_" + scenario.id.replace("-", "_")
    return page


def render_home(scenario_pages: dict[str, st.Page], pages: dict[str, st.Page]) -> None:
    st.title("Training Dynamics Explorer")
    st.markdown("Pick a question, move a slider, and watch real PyTorch training answer it as it runs: "
                "loss curves, per-layer gradients and more, measured live from the run, never drawn from a formula.")
    links = st.container(horizontal=True)
    links.page_link(pages["runs"], label="Stored runs: open, compare, delete", icon=":material/history:")
    links.page_link(pages["glossary"], label="Glossary: every term and where to see it", icon=":material/menu_book:")
    columns = st.columns(2)
    for i, scenario in enumerate(all_scenarios()):
        with columns[i % 2].container(border=True):
            st.subheader(scenario.title)
            st.markdown(f"_{scenario.question}_")
            st.caption("Glossary: " + " · ".join(scenario.terms))
            st.page_link(scenario_pages[scenario.id], label=f"Open {scenario.title} →")
