"""A page run cut short at any session-state access never loses a moved setting's auto-run, nor a link's settings.

Streamlit ends a script run at its next `st.session_state` access once a newer rerun is asked for (the
live status component asks when a run's first charts come or it ends). Seen once in CI: the old run
was stopped, the pending auto-run was never written, and the new settings never ran. Here a fake
session state ends the run at its k-th access, for every k the move's run makes, and the page runs
that follow (without interruptions) must stop the old run, start the new settings exactly once, and
keep that run's handle.
"""
import types

import pytest

from explorer.page import autorun, starting
from explorer.view.live import handle_key
from scenarios import get_scenario

SCENARIO = get_scenario("vanishing-gradients")
OLD, NEW = SCENARIO.validate({"depth": 7}), SCENARIO.validate({"depth": 7, "steps": 10})


class CutShort(Exception):
    """Stands for Streamlit's RerunException."""


class SessionState(dict):
    """A dict whose every access is a point where the run may end, as Streamlit's is: the `cut_at`-th
    access raises before it reads or writes anything."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.accesses, self.cut_at = 0, None

    def _point(self) -> None:
        self.accesses += 1
        if self.cut_at is not None and self.accesses == self.cut_at:
            raise CutShort(self.accesses)

    def __getitem__(self, key):
        self._point()
        return super().__getitem__(key)

    def __setitem__(self, key, value) -> None:
        self._point()
        super().__setitem__(key, value)

    def __delitem__(self, key) -> None:
        self._point()
        super().__delitem__(key)

    def __contains__(self, key) -> bool:
        self._point()
        return super().__contains__(key)

    def get(self, key, default=None):
        self._point()
        return super().get(key, default)

    def pop(self, key, *default):
        self._point()
        return super().pop(key, *default)

    def setdefault(self, key, default=None):
        self._point()
        return super().setdefault(key, default)


class Handle:
    def __init__(self, config) -> None:
        self.config, self.running, self.stops = config, True, []

    def stop(self, keep: bool = True) -> None:
        self.stops.append(keep)
        self.running = False

    def wait_for_first_record(self, timeout: float, steps: int = 1) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def page(monkeypatch):
    """The page's state, clock and started runs, with `autorun` and `starting.start` reading them."""
    state, clock, started = SessionState(), Clock(), []
    fake_st = types.SimpleNamespace(session_state=state)
    monkeypatch.setattr(autorun, "st", fake_st)
    monkeypatch.setattr(starting, "st", fake_st)
    monkeypatch.setattr(autorun, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    monkeypatch.setattr(autorun, "stored_handle", lambda scenario, config: None)
    monkeypatch.setattr(starting, "worker_pool", lambda: None)

    def start_or_load(scenario, config, fresh, pool):
        started.append(Handle(config))
        return started[-1]
    monkeypatch.setattr(starting, "start_or_load", start_or_load)
    return state, clock, started


def page_run(state: SessionState, config, cut_at: int | None = None) -> int:
    """One page run as far as the auto-run goes (take a run started by a run cut short, follow the
    settings), cut short at its `cut_at`-th session-state access; how many accesses it made."""
    state.accesses, state.cut_at = 0, cut_at
    try:
        starting.adopt_launched(SCENARIO)
        autorun.follow_settings(SCENARIO, config, 1, runnable=True, auto=True, too_large=False, entered=False,
                                start=lambda: starting.start(SCENARIO, config, 1, fresh=False))
    except CutShort:
        pass
    finally:
        state.cut_at = None
    return state.accesses


def move(page, cut: str, cut_at: int | None) -> tuple[Handle, int]:
    """Depth 7 runs; `steps` moves to 10; the page runs that follow, one of them (`cut`) cut short at
    `cut_at`. The old run's handle, and how many accesses the cut page run made."""
    state, clock, started = page
    old = Handle(OLD)
    state.clear()
    state.update({f"seen:{SCENARIO.id}": autorun.signature(SCENARIO, OLD, 1), handle_key(SCENARIO): old})
    started.clear()
    made = page_run(state, NEW, cut_at if cut == "move" else None)  # the move's page run
    clock.now += 0.1
    page_run(state, NEW)  # the rerun asked for meanwhile (the one that cut the move's run short)
    clock.now += 1.0      # past the pause: this page run starts the new settings...
    starting_made = page_run(state, NEW, cut_at if cut == "start" else None)
    made = starting_made if cut == "start" else made
    for _ in range(3):    # ...or the ones after it
        clock.now += 1.0
        page_run(state, NEW)
    return old, made


@pytest.mark.parametrize("cut", ["move", "start"])
def test_a_page_run_cut_short_at_any_session_access_still_starts_the_new_settings_once(page, cut) -> None:
    state, _, started = page
    _, accesses = move(page, cut, None)
    assert accesses >= 4, f"the {cut} page run made only {accesses} session-state accesses"
    for cut_at in range(1, accesses + 1):
        old, _ = move(page, cut, cut_at)
        where = f"the {cut} page run cut short at session access {cut_at} of {accesses}"
        assert old.stops and not any(old.stops), f"{where}: the old run's stops {old.stops} (keep=False expected)"
        assert len(started) == 1, f"{where}: {len(started)} runs started, expected 1"
        assert started[0].config == NEW, f"{where}: started {started[0].config}"
        assert dict.get(state, handle_key(SCENARIO)) is started[0], f"{where}: the page does not show the new run"
        assert autorun.pending_key(SCENARIO) not in dict.keys(state), f"{where}: an auto-run still waits"


def test_a_shared_link_entered_by_a_page_run_cut_short_is_restored_by_the_next(monkeypatch) -> None:
    """Opening a link seeds the widgets from the URL once, on entering the page: the page is marked as
    entered only after the seeding, so a cut-short entry seeds again on the next run."""
    from explorer.page import share, url
    from explorer.page.controls import widget_key
    link = {"depth": "5", "steps": "20"}
    state = SessionState()
    fake_st = types.SimpleNamespace(session_state=state, query_params=link)
    for module in (url, share):
        monkeypatch.setattr(module, "st", fake_st)
    monkeypatch.setattr(url, "run_store", lambda: None)

    def enter(cut_at: int | None) -> tuple[object, int]:
        state.accesses, state.cut_at = 0, cut_at
        try:
            return url.restore(SCENARIO), state.accesses
        except CutShort:
            return None, state.accesses
        finally:
            state.cut_at = None

    state.update({url.PAGE_KEY: "home"})
    restored, accesses = enter(None)
    assert restored is not None and accesses >= 3, (restored, accesses)
    for cut_at in range(1, accesses + 1):
        state.clear()
        state.update({url.PAGE_KEY: "home"})
        enter(cut_at)
        enter(None)  # the rerun that cut it short
        seeded = {name: dict.get(state, widget_key(SCENARIO, name)) for name in ("depth", "steps")}
        assert seeded == {"depth": 5, "steps": 20}, f"entry cut short at session access {cut_at} of {accesses}: {seeded}"
        assert enter(None)[0] is None, f"cut at {cut_at}: a third run of the page restored the link again"
