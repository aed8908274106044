"""A scenario page, generated from the registry: the same page for every scenario.

Order of a rerun: read the URL (a shared link seeds the widgets before they are drawn),
draw the controls from the Config, mirror the config back to the URL, then presets,
Run/Stop, the live view fragment (run, overlays, seed bands), Compare, Export, and the
mechanism. Training runs in the run manager's threads, never here.
"""
import functools
from typing import Any

import streamlit as st

from explorer import url
from explorer.compare_panel import compare_panel, selected_overlays
from explorer.controls import config_controls, widget_key
from explorer.export_panel import export_panel
from explorer.live import POLL_S, handle_key, live_view
from explorer.runs import RunHandle
from explorer.seeds import BANDS, SeedGroup
from explorer.session import run_store, start_or_load, stored_handle
from scenarios.base import ConfigError, Scenario, ScenarioConfig

FIRST_POINT_WAIT_S = 0.5  # on Run, wait this long for the first record so the first draw has points
MAX_SEEDS = 10


def render_scenario(scenario: Scenario, glossary_page: st.Page | None = None) -> None:
    restored = url.restore(scenario)  # before any widget is drawn
    st.title(scenario.title)
    st.markdown(f"_{scenario.question}_")
    with st.sidebar:
        st.header("Settings")
        values = config_controls(scenario)
        repeat, band = seed_controls(scenario)
    try:
        config, config_error = scenario.validate(values), None
    except ConfigError as error:
        config, config_error = None, str(error)
    if config is not None:
        url.mirror(scenario, config)
    url.show_warnings(scenario, config)
    if restored is not None and config is not None:
        show_stored(scenario, config)

    preset_buttons(scenario, config)
    key = handle_key(scenario)
    handle: RunHandle | SeedGroup | None = st.session_state.get(key)
    running = handle is not None and handle.snapshot().running
    run_col, stop_col, note_col = st.columns([1, 1, 5], vertical_alignment="center")
    if run_col.button("Run", key="run", type="primary", disabled=config is None or running,
                      use_container_width=True):
        handle = start(scenario, config, repeat, fresh=False)
        running = handle.snapshot().running
    if stop_col.button("Stop", key="stop", disabled=not running, use_container_width=True):
        handle.stop()
        handle.join(timeout=2.0)
        running = False
    if config_error:
        st.error(config_error)
    if handle is not None and config is not None and (handle.config != config or _seed_count(handle) != repeat):
        note_col.caption("Settings changed since this run started. Press Run to run them.")
    if handle is not None and not running and handle.snapshot().from_store:
        if note_col.button("Retrain instead of using the stored result", key="retrain"):
            handle = start(scenario, config or handle.config, repeat, fresh=True)
            running = True

    overlays = selected_overlays(scenario, handle)
    st.fragment(run_every=POLL_S if running else None)(live_view)(scenario, overlays, band)
    if handle is not None and not running and not handle.snapshot().frame.empty:
        compare_panel(scenario, handle)
        export_panel(scenario, handle, overlays, band)

    with st.expander("The mechanism", expanded=handle is None):
        st.latex(scenario.formula)
        st.markdown(_doc(scenario))
    st.caption("Glossary: " + " · ".join(scenario.terms))
    if glossary_page is not None:
        st.page_link(glossary_page, label="What these terms mean →")


def start(scenario: Scenario, config: ScenarioConfig, repeat: int, *, fresh: bool) -> RunHandle | SeedGroup:
    """Start one run, or a group of `repeat` seeds; keep its handle in the session."""
    if repeat > 1:
        starter = functools.partial(start_or_load, fresh=fresh, store=run_store())
        handle = SeedGroup.start(scenario, config, repeat, starter)
    else:
        handle = start_or_load(scenario, config, fresh=fresh)
    st.session_state[handle_key(scenario)] = handle
    handle.wait_for_first_record(FIRST_POINT_WAIT_S)
    return handle


def show_stored(scenario: Scenario, config: ScenarioConfig) -> None:
    """After a link was opened: show the run it names (from the Runs page) or the stored run of its config."""
    key = handle_key(scenario)
    current = st.session_state.get(key)
    if current is not None and current.snapshot().running:
        return  # never replace a run in progress
    run_id = st.session_state.pop(f"open-run:{scenario.id}", None)
    stored = run_store().get(run_id) if run_id else None
    if stored is not None and stored.scenario == scenario.id:
        st.session_state[key] = RunHandle.from_stored(scenario, stored, run_store())
    else:
        handle = stored_handle(scenario, config)
        if handle is not None:
            st.session_state[key] = handle


def seed_controls(scenario: Scenario) -> tuple[int, str]:
    """'Repeat over seeds' and the band to draw: page options, not Config fields (not in the URL)."""
    st.divider()
    repeat = st.number_input("repeat over seeds", min_value=1, max_value=MAX_SEEDS, value=1, step=1,
                             key=f"seeds:{scenario.id}",
                             help="Run seeds s … s+N−1 of these settings (each run is stored) and draw the "
                                  "mean over seeds with a band, to tell an effect from noise.")
    band = "min–max"
    if repeat > 1:
        band = st.radio("band", list(BANDS), horizontal=True, key=f"band:{scenario.id}",
                        help="min–max: the figure drawn from the smallest and largest value over seeds at "
                             "every point; mean ± std: from the mean minus and plus one standard deviation.")
    return int(repeat), band


def _seed_count(handle: RunHandle | SeedGroup) -> int:
    return len(handle.seeds) if isinstance(handle, SeedGroup) else 1


def preset_values(scenario: Scenario, name: str) -> dict[str, Any]:
    """Every field's value under a preset: the preset's values, everything else at its default."""
    return scenario.validate(scenario.presets[name]).model_dump()


def apply_preset(scenario: Scenario, name: str) -> None:
    """Button callback (runs before the widgets are drawn, so their state may be set)."""
    for field, value in preset_values(scenario, name).items():
        st.session_state[widget_key(scenario, field)] = value


def preset_buttons(scenario: Scenario, config: ScenarioConfig | None) -> None:
    if not scenario.presets:
        return
    row = st.container(horizontal=True, vertical_alignment="center")
    row.markdown("**Presets**")
    for name, values in scenario.presets.items():
        active = config is not None and config.model_dump() == preset_values(scenario, name)
        changes = ", ".join(f"{k}={v}" for k, v in values.items()) or "the defaults"
        row.button(name, key=f"preset:{scenario.id}:{name}", on_click=apply_preset, args=(scenario, name),
                   icon=":material/check:" if active else None,
                   help=f"{changes}; every other setting at its default.")


def _doc(scenario: Scenario) -> str:
    import sys
    doc = sys.modules[type(scenario).__module__].__doc__ or ""
    return "\n\n".join(doc.strip().split("\n\n")[1:])  # the first paragraph is the title line
