"""Training Dynamics Explorer — `streamlit run app.py`. Pages come from the scenario registry."""
import streamlit as st

from explorer.pages import build_navigation

st.set_page_config(page_title="Training Dynamics Explorer", layout="wide")
st.navigation(build_navigation()).run()
