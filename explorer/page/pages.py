"""The navigation: a gallery home, a Runs page, "Your runs" (runs watched in a person's own script,
explorer/page/watched_page.py), the Glossary, "Will it fit?" (explorer/page/fit_page.py), and one
page per listed scenario.

Every scenario page is the same generated page (`explorer.page.scenario_page`), so a new
scenario module gets its page, URL, presets, overlays, seeds and exports without UI code.
The scenario pages are grouped by topic (explorer/page/topics.py), one section each, in the
home gallery's order; app.py shows the sections along the top, so the sidebar holds only
a page's settings.
"""
import streamlit as st

from explorer.page.fit_page import render_fit
from explorer.page.glossary_page import render_glossary
from explorer.page.home import render_home
from explorer.page.runs_page import render_runs
from explorer.page.scenario_page import render_scenario
from explorer.page.session import store_banner
from explorer.page.topics import by_topic
from explorer.page.url import mark_page
from explorer.page.watched_page import render_watched
from scenarios import all_scenarios
from scenarios.base import Scenario

__all__ = ["build_navigation", "render_home", "render_scenario"]


def build_navigation(default: str = "home") -> dict[str, list[st.Page]]:
    """Sections of `st.navigation`: the explorer's own pages (section "", shown first and
    ungrouped along the top), then one section per topic with its scenarios in gallery order.

    `default` names the page a bare URL opens ("home", "runs" or "glossary")."""
    pages: dict[str, st.Page] = {}

    def home() -> None:
        mark_page("home")
        store_banner()
        render_home(scenario_pages, pages)

    def runs() -> None:
        mark_page("runs")
        store_banner()
        render_runs({**scenario_pages, "watched": pages["your-runs"]})  # a watched run opens on "Your runs"

    def your_runs() -> None:
        mark_page("your-runs")
        store_banner()
        render_watched()

    def glossary() -> None:
        mark_page("glossary")
        store_banner()
        render_glossary(scenario_pages)

    def fit() -> None:
        mark_page("fit")
        render_fit()

    for name, function, title, icon in (("home", home, "Home", "home"), ("runs", runs, "Runs", "history"),
                                        ("your-runs", your_runs, "Your runs", "monitoring"),
                                        ("glossary", glossary, "Glossary", "menu_book"),
                                        ("fit", fit, "Will it fit?", "memory")):
        pages[name] = st.Page(function, title=title, icon=f":material/{icon}:", url_path=name, default=name == default)
    scenario_pages = {s.id: st.Page(_page_function(s, pages["glossary"]), title=s.title, url_path=s.id)
                      for s in all_scenarios()}
    return {"": list(pages.values()),
            **{topic: [scenario_pages[s.id] for s in members] for topic, members in by_topic(all_scenarios()).items()}}


def _page_function(scenario: Scenario, glossary_page: st.Page):
    def page() -> None:
        store_banner()
        render_scenario(scenario, glossary_page)
    page.__name__ = "page_" + scenario.id.replace("-", "_")
    return page

