"""Widgets generated from a scenario's pydantic Config — no per-scenario UI code.

bounded number -> slider (a 1-2-5 select-slider when the field asks for a log scale),
Literal -> select, bool -> toggle, field description -> help. Each widget's value lives
in `st.session_state` under `<scenario>.<field>`, seeded with the field's default.
"""
import math
from typing import Any

import streamlit as st

from scenarios.base import Scenario

SLIDER_MAX_VALUES = 5000  # an int range wider than this gets a number box, not a slider


def widget_key(scenario: Scenario, name: str) -> str:
    return f"{scenario.id}.{name}"


def log_grid(low: float, high: float, *extra: float) -> list[float]:
    """1-2-5 steps per decade from low to high, plus the given values (the default, the current one)."""
    values = {low, high, *extra}
    for exponent in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        for mantissa in (1, 2, 5):
            value = float(f"{mantissa}e{exponent}")
            if low <= value <= high:
                values.add(value)
    return sorted(values)


def config_controls(scenario: Scenario) -> dict[str, Any]:
    """Draw one widget per Config field (in the current container); return the values."""
    values: dict[str, Any] = {}
    for name, spec in scenario.field_specs().items():
        key = widget_key(scenario, name)
        # Written every run, not only once: a value set in a run that ended before its widget
        # was drawn (a rerun came first) would reach the browser without it, and the browser
        # would draw the widget's own default (a slider's minimum) and send that back.
        st.session_state[key] = st.session_state.get(key, spec["default"])
        label, help_text = name.replace("_", " "), spec["description"] or None
        kind = spec["kind"]
        if kind == "choice":
            values[name] = st.selectbox(label, spec["choices"], key=key, help=help_text)
        elif kind == "bool":
            values[name] = st.toggle(label, key=key, help=help_text)
        elif kind in ("int", "float") and "ge" in spec and "le" in spec:
            low, high = spec["ge"], spec["le"]
            if spec["scale"] == "log":  # the grid also holds the current value (a link may carry 3e-4)
                options = log_grid(low, high, spec["default"], st.session_state[key])
                values[name] = st.select_slider(label, options=options, key=key,
                                                help=help_text, format_func=lambda v: f"{v:g}")
            elif kind == "int" and high - low > SLIDER_MAX_VALUES:
                values[name] = st.number_input(label, min_value=low, max_value=high, step=1, key=key, help=help_text)
            else:
                values[name] = st.slider(label, min_value=low, max_value=high, key=key, help=help_text)
        else:
            values[name] = st.text_input(label, key=key, help=help_text)
    return values
