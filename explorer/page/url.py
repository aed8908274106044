"""The shareable URL: a scenario page's config lives in its query string.

Every rerun writes each Config field (seed included) to `st.query_params`, so the address
bar always reproduces the page (a page still at its defaults keeps its bare URL, which says
the same). When a page is entered with settings in its URL (a shared link, a reload, "Open"
on the Runs page), each value is checked through the scenario's pydantic Config; a bad one
gets a warning that names the field and what is allowed, and the field keeps its default.
Beside the config, a comparison's page state (the overlaid runs, seed repeat, band and
isolated setting: explorer/page/share.py) rides along, so a comparison's link restores it; nothing
else goes into the URL. A warning quotes what the link said, so it is one line of
plain text (explorer/plaintext.py): a crafted link shows its characters, never a link,
an image or styled text inside the app's own warning.
"""
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from explorer.page import share
from explorer.page.controls import widget_key
from explorer.page.session import run_store
from explorer.plaintext import cut, one_line, plain
from scenarios.base import ConfigError, Scenario, ScenarioConfig


@dataclass(frozen=True)
class Restored:
    """What a page load read from its URL."""
    values: dict[str, Any]                 # field -> valid value, ready for the widgets
    warnings: list[str] = field(default_factory=list)  # plain text, one line each (not markdown)


def to_query(value: Any) -> str:
    """One config value as URL text that the Config parses back to the same value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def config_query(config: ScenarioConfig) -> dict[str, str]:
    """Every field of a config as query parameters (in field order)."""
    return {name: to_query(value) for name, value in config.model_dump(mode="json").items()}


def parse_query(scenario: Scenario, params: Mapping[str, str]) -> Restored:
    """Validate URL parameters field by field; a bad or unknown one becomes a warning."""
    specs = scenario.field_specs()
    values: dict[str, Any] = {}
    warnings: list[str] = []
    unknown: list[str] = []
    for name, raw in params.items():
        if name in share.PARAMS:
            continue  # page state, not a setting (explorer/page/share.py)
        if name not in specs:
            unknown.append(name)
            continue
        spec = specs[name]
        try:
            values[name] = scenario.validate_field(name, _coerce(spec, raw))  # alone; together below
        except ConfigError as error:
            warnings.append(one_line(f"The link's {name} was not used: {error}. Using the default, "
                                     f"{spec['default']!r}."))
    if unknown:  # one line for all of them, the first few named
        named = ", ".join(repr(cut(name, 40)) for name in unknown[:3]) + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else "")
        warnings.insert(0, one_line(f"The link's {'parameter' if len(unknown) == 1 else 'parameters'} {named} "
                                    f"{'is not a setting' if len(unknown) == 1 else 'are not settings'} of this page "
                                    f"and {'was' if len(unknown) == 1 else 'were'} ignored (settings: {', '.join(specs)})."))
    try:
        scenario.validate(values)
    except ConfigError as error:  # each value fine alone, the combination refused by the Config
        warnings.append(one_line(f"The link's settings were not used together: {error}. Using the defaults."))
        values = {}
    return Restored(values, warnings)


def _coerce(spec: dict[str, Any], raw: str) -> Any:
    """A choice is matched by its text (so a Literal of numbers works); the rest pydantic parses."""
    if spec["kind"] == "choice":
        return next((c for c in spec["choices"] if str(c) == raw), raw)
    return raw


def _query() -> dict[str, str]:
    """The URL's parameters (all of them: unknown ones are reported, then dropped)."""
    return {name: st.query_params[name] for name in st.query_params.keys()}


PAGE_KEY = "url-page"  # the page the last script run drew


def entering(name: str) -> bool:
    """True when the last page run drew another page than `name` (or none): this run enters it."""
    return st.session_state.get(PAGE_KEY) != name


def mark_page(name: str) -> None:
    """Record which page this run draws (`entering` reads it)."""
    st.session_state[PAGE_KEY] = name


def restore(scenario: Scenario) -> Restored | None:
    """Before the widgets are drawn: seed their state from the URL the page was opened with.

    Only when the page is entered (a new session on a shared link, a reload, "Open" on the
    Runs page), never on a rerun of the same page: then the widgets hold the truth, and the
    URL may lag behind them by a rerun that was interrupted before its own write arrived.
    Returns what was read, or None.
    """
    params = _query()
    if not entering(scenario.id) or not params:
        mark_page(scenario.id)
        return None
    restored = parse_query(scenario, params)
    for name, spec in scenario.field_specs().items():
        st.session_state[widget_key(scenario, name)] = restored.values.get(name, spec["default"])
    restored.warnings.extend(share.restore_page(scenario, params, run_store()))
    if restored.warnings:
        shown_for = config_query(scenario.validate(restored.values))
        st.session_state[_warnings_key(scenario)] = (restored.warnings, shown_for)
    mark_page(scenario.id)  # last: a run cut short at a session-state access before here restores again
    return restored


def mirror(scenario: Scenario, config: ScenarioConfig) -> None:
    """Write the page's config, and its comparison state, to the URL (only when it changed, to keep
    reruns quiet).

    A bare URL already means "the defaults", so it stays bare until a setting moves; from
    then on every field is written, so the link keeps meaning the same if defaults change.
    """
    extra = share.page_query(scenario, config)
    params, current = {**config_query(config), **extra}, _query()
    if not current and config == scenario.validate({}) and not extra:
        return
    if current != params:
        st.query_params.from_dict(params)


def _warnings_key(scenario: Scenario) -> str:
    return f"url-warnings:{scenario.id}"


def show_warnings(scenario: Scenario, config: ScenarioConfig | None) -> None:
    """The link's problems, shown until the person changes a setting."""
    warnings, shown_for = st.session_state.get(_warnings_key(scenario), ([], None))
    if config is None or config_query(config) != shown_for:
        st.session_state.pop(_warnings_key(scenario), None)
        return
    for message in warnings:
        st.warning(plain(message), icon=":material/link_off:")
