"""Training Dynamics Explorer — `streamlit run app.py`. Pages come from the scenario registry."""
import streamlit as st

from explorer.pages import build_pages

st.set_page_config(page_title="Training Dynamics Explorer", layout="wide")
home, scenario_pages = build_pages()
st.navigation({"Explorer": [home], "Scenarios": list(scenario_pages.values())}).run()
