"""The app's one script body, shared by `streamlit run app.py` (a checkout) and `tdx app` (an
installed package, which runs explorer/app.py): the server's extra routes and middleware, and what
each page view draws. Pages come from the scenario registry, grouped by topic along the top, so
the sidebar is left to a page's settings.
"""
import streamlit as st
from starlette.routing import BaseRoute

from explorer import __version__
from explorer.page.controls import page_entered
from explorer.page.hosts import server_middleware
from explorer.page.pages import build_navigation
from explorer.view import feed, plotly_js

__all__ = ["page", "server_middleware", "server_routes"]


def server_routes() -> list[BaseRoute]:
    """Routes beside Streamlit's: running pages' live feed (explorer/view/feed.py) and plotly.js."""
    return [*feed.routes(), *plotly_js.routes()]


def page() -> None:
    """One page view: the navigation, the page chosen, the version in the footer."""
    st.set_page_config(page_title="Training Dynamics Explorer", layout="wide")
    chosen = st.navigation(build_navigation(), position="top")
    page_entered(chosen.url_path)  # a page entered anew seeds its widgets again (explorer/page/controls.py)
    chosen.run()
    st.caption(f"Training Dynamics Explorer {__version__}")
