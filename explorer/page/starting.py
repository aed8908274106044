"""Starting a page's run, and keeping its handle where a page run cut short cannot lose it.

A page run may be cut short at any `st.session_state` access (explorer/page/autorun.py). `start`
puts the handle first into a plain dict kept in the session (`LAUNCHED`; a dict's own item is no
such point), then into the session under the page's key. A run cut short between the two leaves
it in the dict, and the next page run takes it from there (`adopt_launched`), where it would
otherwise train unseen while the page showed the run before.
"""
import functools

import streamlit as st

from explorer.page.session import run_store, session_id, start_or_load, worker_pool
from explorer.runs.handle import RunHandle
from explorer.runs.seeded import start_seeds_or_load
from explorer.view.live import handle_key
from explorer.view.seeds import SeedGroup
from scenarios.base import Scenario, ScenarioConfig

FIRST_POINT_WAIT_S = 0.5  # on Run, wait this long at most for the first records, so the first draw has points
FIRST_STEPS = 2           # ... of two steps: one point of a line shows nothing (and the first build then
                          # spent the quick rebuilds' CPU on charts that stayed empty)
LAUNCHED = "launched"     # scenario id -> the handle of a run started but not yet kept by the session (start)


def start(scenario: Scenario, config: ScenarioConfig, repeat: int, *, fresh: bool) -> RunHandle | SeedGroup:
    """Start one run, or a group of `repeat` seeds; keep its handle in the session (the module doc)."""
    launched = st.session_state.setdefault(LAUNCHED, {})  # before anything starts
    pool = worker_pool()
    if repeat > 1:
        session = session_id()
        starter = functools.partial(start_or_load, fresh=fresh, store=run_store(), pool=pool, session=session)
        together = functools.partial(start_seeds_or_load, fresh=fresh, store=run_store(), pool=pool, session=session)
        handle = SeedGroup.start(scenario, config, repeat, starter, together)
    else:
        handle = start_or_load(scenario, config, fresh=fresh, pool=pool)
    launched[scenario.id] = handle
    st.session_state[handle_key(scenario)] = handle
    launched.pop(scenario.id, None)
    handle.wait_for_first_record(FIRST_POINT_WAIT_S, FIRST_STEPS)
    return handle


def adopt_launched(scenario: Scenario) -> None:
    """At the start of a page run: the handle of a run that `start` began in a page run cut short before
    the session kept it becomes the page's run (then a moved setting supersedes it as any other)."""
    launched = st.session_state.get(LAUNCHED)
    handle = launched.get(scenario.id) if launched else None
    if handle is not None:
        st.session_state[handle_key(scenario)] = handle
        launched.pop(scenario.id, None)  # only once the session has it
