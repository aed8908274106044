"""Training Dynamics Explorer, as an installed package serves it: `tdx app` runs this file with
the server settings of explorer/server.py. A checkout's app.py is the same two statements.

`app` is the server (Streamlit's `st.App`, found by `streamlit run`): it refuses requests whose
Host is not a local name and forbids framing by other sites (explorer/page/hosts.py), and serves
running pages their live feed. Each page view runs this file as `__main__`.
"""
import streamlit as st

from explorer.page.main import page, server_middleware, server_routes

app = st.App(__file__, routes=server_routes(), middleware=server_middleware())

if __name__ == "__main__":
    page()
