"""Training Dynamics Explorer — `streamlit run app.py`. Pages come from the scenario registry,
grouped by topic along the top, so the sidebar is left to a page's settings.

`app` is the server (Streamlit's `st.App`, found by `streamlit run`): it refuses requests whose
Host is not a local name (explorer/page/hosts.py), and serves running pages their live feed
(explorer/view/feed.py). Each page view runs this file as `__main__`.
"""
import streamlit as st

from explorer import __version__
from explorer.page.controls import page_entered
from explorer.page.hosts import local_hosts_only
from explorer.page.pages import build_navigation
from explorer.view import feed

app = st.App(__file__, routes=feed.routes(), middleware=local_hosts_only())

if __name__ == "__main__":
    st.set_page_config(page_title="Training Dynamics Explorer", layout="wide")
    page = st.navigation(build_navigation(), position="top")
    page_entered(page.url_path)  # a page entered anew seeds its widgets again (explorer/page/controls.py)
    page.run()
    st.caption(f"Training Dynamics Explorer {__version__}")
