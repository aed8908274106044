"""What the page does when a setting moves: redraw, serve, or run the new config by itself.

Every full rerun of a scenario page compares the settings with those of the rerun before
(`seen`) and with the run on the page:

- the same run's key (only a view field moved): the run is redrawn with the new config —
  nothing trains, the records are the same;
- a config the store holds: shown at once (a run of the old config in progress is
  superseded: stopped, not stored);
- otherwise, with auto-run on: the old run is superseded and the new config starts after
  `DEBOUNCE_S` of no further change (the status fragment ticks until then, then reruns the
  page, which starts it). A large config (by the scenario's estimate of everything that would
  run, every seed of a repeat included: over `LARGE_SECONDS` or `LARGE_BYTES`) waits for Run.
- with auto-run off, nothing starts: the page says the settings changed since the run.

Before Run the page says the estimate (`estimate_note`); Run on a large config asks once
(`asks_first`): the first press says what it would cost, a second press of the same settings starts it.

Opening a page (a link, a reload, the Runs page) is not a move: it shows what the store
holds and waits.

A page run may be cut short at any access to `st.session_state` (Streamlit checks there for a newer
rerun request, e.g. the live status component's, and ends the run). So a move is marked as seen only
after everything it asks for is done (the old run stopped, the pending auto-run written, the new run
started), and a pending auto-run is dropped only after its run has started: a run cut short in between
leaves the move unseen, and the next run acts on it again. (Seen once in CI before this order: the old
run stopped, no pending auto-run written, the new settings never ran.)
"""
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from explorer.page.session import stored_handle
from explorer.view.live import handle_key
from explorer.view.seeds import SeedGroup
from scenarios.base import Estimate, Scenario, ScenarioConfig

DEBOUNCE_S = 0.3              # a config starts once its settings stayed still this long
LARGE_SECONDS = 60.0          # estimated time or memory past these is said before the run
LARGE_BYTES = 2e9


@dataclass(frozen=True)
class Pending:
    signature: str
    since: float

    def due(self) -> bool:
        return time.monotonic() - self.since >= DEBOUNCE_S


def signature(scenario: Scenario, config: ScenarioConfig, repeat: int) -> str:
    """What decides whether a run must train: the config's key and the number of seeds."""
    return json.dumps([scenario.key_of(config), repeat], sort_keys=True)


def seeds_of(handle) -> int:
    return len(handle.seeds) if isinstance(handle, SeedGroup) else 1


def pending_key(scenario: Scenario) -> str:
    return f"pending:{scenario.id}"


def run_estimate(scenario: Scenario, config: ScenarioConfig, repeat: int) -> Estimate | None:
    """What pressing Run would cost: `repeat` seeds run one after another, so their times add up."""
    estimate = scenario.estimate(config)
    return None if estimate is None else estimate.times(repeat)


def large(estimate: Estimate | None, repeat: int = 1) -> str | None:
    """A sentence for a run whose estimate is past the limits, else None."""
    if estimate is None:
        return None
    parts = []
    if estimate.seconds > LARGE_SECONDS:
        parts.append(f"about {duration(estimate.seconds)}")
    if estimate.bytes > LARGE_BYTES:
        parts.append(f"about {estimate.bytes / 1e9:.1f} GB of memory")
    what = "This run" if repeat == 1 else f"These {repeat} seeds, one after another,"
    return f"{what} would take {' and '.join(parts)}." if parts else None


def estimate_note(estimate: Estimate, repeat: int = 1) -> str:
    """The estimate of a run that is not large, said beside Run."""
    memory = f", {estimate.bytes / 1e6:,.0f} MB" if estimate.bytes >= 100e6 else ""
    seeds = f" for {repeat} seeds in turn" if repeat > 1 else ""
    return f"Estimated: about {duration(max(1.0, estimate.seconds))}{memory}{seeds}."


def confirm_key(scenario: Scenario) -> str:
    return f"confirm:{scenario.id}"


def asks_first(scenario: Scenario, config: ScenarioConfig, repeat: int, too_large: str | None) -> bool:
    """Run was pressed: True when this press only asks (a large run starts on a second press of Run with
    the same settings; the note beside Run says so)."""
    if not too_large:
        return False
    now = signature(scenario, config, repeat)
    if st.session_state.pop(confirm_key(scenario), None) == now:
        return False
    st.session_state[confirm_key(scenario)] = now
    return True


def asking(scenario: Scenario, config: ScenarioConfig | None, repeat: int) -> bool:
    """Whether Run, pressed for these settings, waits for a second press."""
    return config is not None and st.session_state.get(confirm_key(scenario)) == signature(scenario, config, repeat)


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def follow_settings(scenario: Scenario, config: ScenarioConfig | None, repeat: int, *, runnable: bool,
                    auto: bool, too_large: bool, entered: bool, start: Callable[[], object]) -> Pending | None:
    """Act on this rerun's settings (see the module doc); returns the auto-run still waiting, if any.

    `config` is None when the settings cannot run (invalid, or refused here); `runnable` is
    False while the workers have not yet said what this machine offers (a move then waits)."""
    seen_key = f"seen:{scenario.id}"
    now = None if config is None else signature(scenario, config, repeat)
    previous = now if entered else st.session_state.get(seen_key, now)
    pending = _act(scenario, config, now, previous, repeat, runnable=runnable, auto=auto, too_large=too_large,
                   start=start)
    st.session_state[seen_key] = now  # last: a run cut short before here acts on the move again (module doc)
    return pending


def _act(scenario: Scenario, config: ScenarioConfig | None, now: str | None, previous: str | None, repeat: int, *,
         runnable: bool, auto: bool, too_large: bool, start: Callable[[], object]) -> Pending | None:
    """`follow_settings` but the mark of what was seen: each step here may be done again by the next run."""
    key = handle_key(scenario)
    handle = st.session_state.get(key)
    if now is None:
        st.session_state.pop(pending_key(scenario), None)
        return None
    if handle is not None and signature(scenario, handle.config, seeds_of(handle)) == now:
        handle.config = config  # the same run; a view field may have moved: redraw, no run
        st.session_state.pop(pending_key(scenario), None)
        return None
    running = handle is not None and handle.running
    if now != previous and not runnable:
        st.session_state[pending_key(scenario)] = Pending(now, time.monotonic())
    elif now != previous:
        st.session_state.pop(pending_key(scenario), None)
        served = stored_handle(scenario, config) if repeat == 1 and (auto or not running) else None
        if served is not None or (auto and not too_large):
            if running:
                handle.stop(keep=False)  # superseded by the newer settings: not stored
            if served is not None:
                st.session_state[key] = served
                return None
            st.session_state[pending_key(scenario)] = Pending(now, time.monotonic())
    pending: Pending | None = st.session_state.get(pending_key(scenario))
    if pending is None or pending.signature != now:
        return None
    if not auto or (runnable and too_large):
        st.session_state.pop(pending_key(scenario), None)
        return None
    if runnable and pending.due():
        start()  # keeps its handle even where this run is cut short (explorer/page/starting.py)
        st.session_state.pop(pending_key(scenario), None)  # after: the next run would find the handle's config
        return None
    return pending
