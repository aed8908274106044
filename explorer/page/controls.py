"""Widgets generated from a scenario's pydantic Config — no per-scenario UI code.

bounded number -> slider (a 1-2-5 select-slider when the field asks for a log scale),
Literal -> select, bool -> toggle, field description -> help. Each widget's value lives
in `st.session_state` under `<scenario>.<field>`, seeded with the field's default.
"""
import math
from typing import Any

import streamlit as st

from explorer.view.compare import field_label
from scenarios.base import Scenario
from scenarios.config import unused_because

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


SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def log_label(value: float) -> str:
    """A log slider's value as a person reads it: `0.001`, `3e-05`; a power of two that would print
    as a long decimal (0.00012207) as `2⁻¹³ ≈ 0.000122`, as the presets name it."""
    text = f"{value:g}"
    if value > 0 and (exponent := math.log2(value)).is_integer() and abs(exponent) >= 4 and len(text) > 6:
        return f"2{str(int(exponent)).translate(SUPERSCRIPT)} ≈ {value:.3g}"
    return text


def config_controls(scenario: Scenario) -> dict[str, Any]:
    """Draw one widget per Config field (in the current container); return the values. Each widget is
    also given its current value as its default: a browser that mounts it afresh (its state dropped
    between page runs) then shows that value, not a slider's minimum or a toggle off (see `seed_state`)."""
    values: dict[str, Any] = {}
    for name, spec in scenario.field_specs().items():
        key = widget_key(scenario, name)
        current = seed_state(key, spec["default"])
        label, help_text = field_label(name, spec), spec["description"] or None
        unused = unused_because(spec, values)  # greyed out where it would do nothing (a warmup length, no warmup)
        if unused:
            help_text = f"{help_text or ''} Not used while {unused}.".strip()
        disabled = {"disabled": True} if unused else {}
        kind = spec["kind"]
        if kind == "choice":
            index = spec["choices"].index(current) if current in spec["choices"] else 0
            values[name] = st.selectbox(label, spec["choices"], index=index, key=key, help=help_text, **disabled)
        elif kind == "bool":
            values[name] = st.toggle(label, value=bool(current), key=key, help=help_text, **disabled)
        elif kind in ("int", "float") and "ge" in spec and "le" in spec:
            low, high = spec["ge"], spec["le"]
            shown = {"value": current} if within_bounds(current, low, high) else {}
            if spec["scale"] == "log":  # the grid also holds the current value (a link may carry 3e-4)
                options = log_grid(low, high, spec["default"], current)
                values[name] = st.select_slider(label, options=options, key=key, **shown,
                                                help=help_text, format_func=log_label, **disabled)
            elif kind == "int" and high - low > SLIDER_MAX_VALUES:
                values[name] = st.number_input(label, min_value=low, max_value=high, step=1, key=key, **shown,
                                               help=help_text, **disabled)
            else:
                values[name] = st.slider(label, min_value=low, max_value=high, key=key, **shown, help=help_text,
                                         **disabled)
        else:
            values[name] = st.text_input(label, value=str(current), key=key, help=help_text, **disabled)
    return values


def within_bounds(value: Any, low: float, high: float) -> bool:
    """`value` can be a number widget's default: of its bounds' type (Streamlit asks one type of all
    three) and between them."""
    return type(value) is type(low) is type(high) and low <= value <= high


def seed_state(key: str, default: Any) -> Any:
    """Give the widget `key` its session value (`default` when it has none) until a page run that
    drew the widget has completed (`widgets_shown`). A run cut short by a rerun may never deliver
    what it drew (the next run's start drops what was not yet sent), and the browser would then
    draw the widget's own default (a slider's minimum, a toggle off) and send that back; so the
    value is written again until then. Not after: every write is sent to the browser as the
    widget's value, and one that arrived after the next key press would undo that press."""
    if key not in st.session_state or not st.session_state.get(f"drawn-widget:{key}"):
        st.session_state[key] = st.session_state.get(key, default)
    st.session_state.setdefault("widgets-drawing", set()).add(key)
    return st.session_state[key]


def page_entered(page_id: str) -> None:
    """A run of page `page_id`: when the last one drawn was another page, its widgets were
    unmounted, so every widget is seeded again until drawn (see `seed_state`)."""
    if st.session_state.get("page-drawn") != page_id:
        for key in [k for k in st.session_state if str(k).startswith("drawn-widget:")]:
            del st.session_state[key]
        st.session_state["page-drawn"] = page_id  # last: a run cut short before here (explorer/page/autorun.py) does it again


def widgets_shown() -> None:
    """The page run that drew the seeded widgets has reached its end: they are on the page with their
    values, and are not written again (see `seed_state`)."""
    drawing = st.session_state.get("widgets-drawing", set())
    for key in drawing:
        st.session_state[f"drawn-widget:{key}"] = True
    st.session_state.pop("widgets-drawing", None)  # last, as above
