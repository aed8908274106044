"""What a comparison adds to a scenario page's URL, beside the config: the overlaid runs, the
seed repeat, the band and the isolated setting.

`run=9a0978673aaf&compare=ab12cd34ef56,0f1e2d3c4b5a&seeds=3&band=mean ± std&isolate=depth`.
`run` pins the run the others are overlaid on (a run of older code is not found by its config
alone); it is written only beside `compare`, while the page shows that run. These are page
state, not Config fields: they never reach a run's key. Opening a link restores them into the
widgets' state before the widgets are drawn; a compared run the store does not hold (deleted,
or another machine's store) is named in one line and the rest are shown.
"""
from collections.abc import Mapping

import streamlit as st

from explorer.plaintext import cut, one_line
from explorer.runs.store import RunStore
from explorer.view.seeds import BANDS
from scenarios.base import Scenario, ScenarioConfig

RUN, COMPARE, SEEDS, BAND, ISOLATE = "run", "compare", "seeds", "band", "isolate"
PARAMS = (RUN, COMPARE, SEEDS, BAND, ISOLATE)
MAX_SEEDS = 10
MAX_COMPARED = 20  # runs a link may overlay: each is looked up on every load of the page


def overlay_key(scenario: Scenario) -> str:
    return f"overlay:{scenario.id}"


def seeds_key(scenario: Scenario) -> str:
    return f"seeds:{scenario.id}"


def band_key(scenario: Scenario) -> str:
    return f"band:{scenario.id}"


def isolate_key(scenario: Scenario) -> str:
    return f"isolate-field:{scenario.id}"


def isolate_chosen_key(scenario: Scenario) -> str:
    """Set once the person (or a link) chose the isolated setting; until then it is not in the URL."""
    return f"isolate-chosen:{scenario.id}"


def isolate_open_key(scenario: Scenario) -> str:
    """The "Isolate one setting" expander's state: its view is built only while it is open."""
    return f"isolate-open:{scenario.id}"


def choose_isolate(scenario: Scenario) -> None:
    """The isolation selectbox's on_change."""
    st.session_state[isolate_chosen_key(scenario)] = True


def open_run_key(scenario: Scenario) -> str:
    """A run to show on the page's next draw (from "Open" on the Runs page, or a link's `run`)."""
    return f"open-run:{scenario.id}"


def page_query(scenario: Scenario, config: ScenarioConfig) -> dict[str, str]:
    """The comparison part of the page's URL, from the widgets' state."""
    state, query = st.session_state, {}
    overlays = state.get(overlay_key(scenario)) or []
    if overlays:
        shown = state.get(open_run_key(scenario)) or _shown_run(scenario, config)
        query.update({RUN: shown} if shown else {})
        query[COMPARE] = ",".join(overlays)
    repeat = int(state.get(seeds_key(scenario)) or 1)
    if repeat > 1:
        query[SEEDS] = str(repeat)
        query[BAND] = state.get(band_key(scenario)) or next(iter(BANDS))
    if state.get(isolate_chosen_key(scenario)) and state.get(isolate_key(scenario)):
        query[ISOLATE] = state[isolate_key(scenario)]
    return query


def _shown_run(scenario: Scenario, config: ScenarioConfig) -> str | None:
    """The stored run the page shows now, if it is a run of these settings."""
    handle = st.session_state.get(f"run:{scenario.id}")  # explorer.view.live.handle_key
    if handle is None or handle.running or scenario.key_of(handle.config) != scenario.key_of(config):
        return None
    return handle.snapshot(with_frame=False).run_id


def restore_page(scenario: Scenario, params: Mapping[str, str], store: RunStore) -> list[str]:
    """Seed the comparison widgets' state from a link; the link's problems, one line each."""
    state, warnings = st.session_state, []
    if SEEDS in params:
        raw = params[SEEDS]
        if raw.isdigit() and 1 <= int(raw) <= MAX_SEEDS:
            state[seeds_key(scenario)] = int(raw)
        else:
            warnings.append(one_line(f"The link's seeds={cut(raw)!r} was not used: it must be a whole number from 1 "
                                     f"to {MAX_SEEDS}."))
    if BAND in params:
        if params[BAND] in BANDS:
            state[band_key(scenario)] = params[BAND]
        else:
            warnings.append(one_line(f"The link's band={cut(params[BAND])!r} was not used: it is one of "
                                     f"{', '.join(BANDS)}."))
    if ISOLATE in params:
        if params[ISOLATE] in scenario.field_specs():
            state[isolate_key(scenario)], state[isolate_chosen_key(scenario)] = params[ISOLATE], True
            state[isolate_open_key(scenario)] = True  # the link names it: show it
        else:
            warnings.append(one_line(f"The link's isolate={cut(params[ISOLATE])!r} is not a setting of this page."))
    if RUN in params:
        stored = store.get(params[RUN])
        if stored is not None and stored.scenario == scenario.id:
            state[open_run_key(scenario)] = stored.run_id
        else:
            warnings.append(one_line(f"The link's run {cut(params[RUN])!r} is not in this run store; showing the "
                                     "stored run of its settings, if there is one."))
    if COMPARE in params:
        ids = [i for i in dict.fromkeys(params[COMPARE].split(",")) if i]
        if len(ids) > MAX_COMPARED:  # looked up no further: each costs a query on every load
            warnings.append(one_line(f"The link compares {len(ids):,} runs; at most {MAX_COMPARED} are overlaid, "
                                     f"so only the first {MAX_COMPARED} were looked up."))
            ids = ids[:MAX_COMPARED]
        found = [i for i in ids if (stored := store.get(i)) is not None and stored.scenario == scenario.id]
        state[overlay_key(scenario)] = found
        missing = [i for i in ids if i not in found]
        if missing:
            named = ", ".join(cut(i, 20) for i in missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            warnings.append(one_line(f"The link compares {len(ids)} stored runs; not in this run store: "
                                     f"{named}. Showing the other {len(found)}."))
    return warnings
