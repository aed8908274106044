"""A scenario page, generated from the registry: the same page for every scenario.

Order of a rerun: read the URL (a shared link seeds the widgets before they are drawn),
draw the controls from the Config, check the config against this machine (a refusal is
said beside the controls and Run is off), mirror the config back to the URL, presets,
follow the settings (explorer/page/autorun.py: redraw, serve from the store, or auto-run),
Run / Stop / auto-run, the status line (a fragment while an auto-run waits or the workers
start; the live feed's component while a run goes on, explorer/view/feed.py), the charts (run,
overlays, seed bands), Compare, Export, and the mechanism. Training runs in the pool's worker
processes, never here.
"""
import functools
from collections.abc import Callable
from typing import Any

import streamlit as st

from explorer.page import url
from explorer.page.autorun import Pending, asks_first, follow_settings, large, pending_key, run_estimate
from explorer.page.compare_panel import compare_panel, selected_overlays
from explorer.page.controls import config_controls, seed_state, widget_key, widgets_shown, within_bounds
from explorer.page.export_panel import export_panel
from explorer.page.glossary_page import term_links
from explorer.page.session import backend_caption, run_store, stored_handle, use_local_pool, warm_figures, worker_pool
from explorer.page.run_note import run_note
from explorer.page.share import MAX_SEEDS
from explorer.page.starting import adopt_launched, start
from explorer.plaintext import plain
from explorer.runs.handle import RunHandle
from explorer.view import feed
from explorer.view.chart import preload
from explorer.view.line_controls import line_controls
from explorer.view.live import charts_view, drawn_key, handle_key, shapes_key, status_view
from explorer.view.seeds import BANDS, SeedGroup
from scenarios.base import ConfigError, Scenario, ScenarioConfig

PENDING_TICK_S = 0.1      # how often a waiting auto-run looks whether its pause is over
STARTING_TICK_S = 0.5     # how often a page looks whether the workers are up: each look is a script
                          # run the browser re-renders, on the cores the starting workers need
BUTTON_PX = 110           # Run and Stop keep this width; the row wraps on a narrow window


def render_scenario(scenario: Scenario, glossary_page: st.Page | None = None) -> None:
    restored = url.restore(scenario)  # before any widget is drawn
    adopt_launched(scenario)
    st.title(scenario.title)
    st.markdown(f"_{scenario.question}_")
    pool = worker_pool()
    machine = pool.machine()
    no_workers = pool.failure() if machine is None else None  # then nothing can run, and the page says why
    # The sidebar holds only the settings (the navigation is along the top), packed close so a
    # 16-field page shows ten of them on a 800-px-high window.
    with st.sidebar.container(gap="xsmall", key="settings"):
        values = config_controls(scenario)
        repeat, band = seed_controls(scenario)
        lines = line_controls(scenario)
        config, problem = checked(scenario, values, machine)
        if problem:
            st.error(plain(problem))
        backend_caption(pool)
        preload()
    warm_figures(scenario.id)
    if config is not None:
        url.mirror(scenario, config)
    url.show_warnings(scenario, config)
    if config is not None and (restored is not None or st.session_state.get(handle_key(scenario)) is None):
        show_stored(scenario, config)

    preset_buttons(scenario, config)
    key, auto_key = handle_key(scenario), f"autorun:{scenario.id}"
    auto = seed_state(auto_key, True)
    runnable = config if config is not None and not problem and machine is not None else None
    estimate = run_estimate(scenario, runnable, repeat) if runnable is not None else None
    too_large = large(estimate, repeat)
    if runnable is not None:  # a distributed run's rank processes start while the page is read
        pool.prepare(scenario.rank_processes(runnable))
    starter = functools.partial(start, scenario, runnable, repeat, fresh=False)
    pending = follow_settings(scenario, config if not problem else None, repeat, runnable=machine is not None,
                              auto=auto, too_large=too_large is not None, entered=restored is not None,
                              start=starter)
    handle: RunHandle | SeedGroup | None = st.session_state.get(key)
    running = handle is not None and handle.running
    # one row that wraps: on a narrow window the note goes below the buttons, which keep their width
    row = st.container(horizontal=True, vertical_alignment="center", gap="medium")
    if row.button("Run", key="run", type="primary", disabled=runnable is None or running,
                      width=BUTTON_PX) and not asks_first(scenario, runnable, repeat, too_large):
        st.session_state.pop(pending_key(scenario), None)
        pending, handle = None, starter()
        running = handle.running
        if running and handle.snapshot(with_frame=False).waiting:
            st.rerun()  # queued: no chart comes soon to redraw the page, so draw Run off (and Stop on) now
    if row.button("Stop", key="stop", disabled=not running, width=BUTTON_PX):
        handle.stop()
        handle.join(timeout=2.0)
        st.rerun()  # Run was drawn above while the run went on (off): draw the page as it is now
    row.toggle("auto-run", value=auto, key=auto_key, help="Run new settings by themselves, 0.3 s after a setting stops "
                    "moving (a run of the old settings is stopped). Off: press Run.")
    note = run_note(scenario, config, problem, machine, too_large, handle, repeat, auto, no_workers, estimate,
                    pool.name == "ray")
    if note:
        row.caption(note)
    if handle is not None and not running and machine is not None and handle.snapshot().from_store:
        if row.button("Retrain instead of using the stored result", key="retrain"):
            handle = start(scenario, runnable or handle.config, repeat, fresh=True)
            running = True

    overlays = selected_overlays(scenario, handle)
    starting = machine is None and no_workers is None
    tick = STARTING_TICK_S if starting else PENDING_TICK_S if pending is not None else None
    token = live_feed(scenario, handle, overlays, band, lines) if running and tick is None else None
    live(status_fragment, tick)(scenario, pending, starting, feed.url(token) if token else None)
    if token:
        feed.catch_up(token, drawn_key(scenario.id), st.session_state)
    live(charts_view, None)(scenario, overlays, band, hold=pending is not None, lines=lines)
    if token:
        feed.adopt(token, drawn_key(scenario.id), st.session_state.get(drawn_key(scenario.id)))
    if handle is not None and not running and pending is None and not handle.snapshot().frame.empty:
        compare_panel(scenario, handle)
        export_panel(scenario, handle, overlays, band)

    with st.expander("The mechanism", expanded=handle is None):
        st.latex(scenario.formula)
        st.markdown(_doc(scenario))
        if scenario.arms_note:
            st.caption(scenario.arms_note)
    code = scenario.snippet(config) if config is not None else None
    if code:
        with st.expander("The code: what these settings are in the library"):
            st.code(code, language="python")
    widgets_shown()
    if glossary_page is None:
        st.caption("Glossary: " + " · ".join(scenario.terms))
        return
    st.caption("Glossary — each term opens its entry:")
    term_links(scenario.terms, glossary_page)


def live(view: Callable[..., None], run_every: float | None) -> Callable[..., None]:
    """`view` as a fragment that redraws itself every `run_every` seconds; with no `run_every`
    (nothing is going on), drawn by the page's own run instead, in a container just where the
    fragment's would be (so its elements are kept). A view the page draws is owned by the page:
    no fragment rerun that lands after the run ended (a tick already on its way) can clear it.
    (Seen once in CI, not reproduced since: a finished run whose charts and "what to look for"
    were gone, the panels below them drawn.)"""
    if run_every is not None:
        return st.fragment(run_every=run_every)(view)

    def inline(*args: Any, **kwargs: Any) -> None:
        with st.container():
            view(*args, **kwargs)
    return inline


def live_feed(scenario: Scenario, handle: RunHandle | SeedGroup, overlays, band: str, lines) -> str:
    """The token of the running handle's live feed (explorer/view/feed.py) for this page's view settings:
    the same for as long as they stay the same, so the status component keeps following it."""
    key = f"feed:{scenario.id}"
    settings = (id(handle), tuple(o.run_id for o in overlays), band, lines)
    kept = st.session_state.get(key)
    token = kept[1] if kept and kept[0] == settings else None
    shapes = {shapes_key(scenario.id): st.session_state.setdefault(shapes_key(scenario.id), {})}
    token = feed.register(feed.Feed(scenario, handle, overlays, band, lines, chart_prefix=scenario.id, state=shapes), token)
    st.session_state[key] = (settings, token)
    return token


def status_fragment(scenario: Scenario, pending: Pending | None, starting: bool, feed_url: str | None = None
                    ) -> None:
    """The status line; while an auto-run waits out its pause, or the workers start, it ticks and
    reruns the page when that is over (the workers are up, or none could start). While a run goes
    on it is the live status component, fed by `feed_url`."""
    pool = worker_pool()
    machine, failure = pool.machine(), pool.failure()
    if (pending is not None and pending.due() and st.session_state.get(pending_key(scenario)) == pending) or (
            starting and (machine is not None or failure is not None)):
        st.rerun()
    if machine is None and failure and pool.name != "local":  # unreachable, refused or lost: the page goes on
        st.error(plain(f"Runs cannot go to the Ray cluster: {failure}. Stored runs can still be opened from Runs."))
        if st.button("Train on this machine instead (the local worker pool)", key="use-local-pool"):
            use_local_pool()
            st.rerun(scope="app")
    elif machine is None and failure and st.session_state.get(handle_key(scenario)) is None:
        st.error(plain(f"Nothing can train on this server: {failure}. Stored runs can still be opened "
                       "from Runs; restart the server once this is fixed."))
        return
    status_view(scenario, waiting="Settings changed: running them in a moment…" if pending else None,
                feed_url=feed_url, in_fragment=pending is not None or starting)


def checked(scenario: Scenario, values: dict[str, Any], machine) -> tuple[ScenarioConfig | None, str | None]:
    """The config, and why it cannot run here (invalid input, or refused on this machine), in a sentence."""
    try:
        config = scenario.validate(values)
    except ConfigError as error:
        return None, str(error)
    refusal = scenario.refusal(config, machine) if machine is not None else None
    return config, refusal


def show_stored(scenario: Scenario, config: ScenarioConfig) -> None:
    """After a link was opened: show the run it names (from the Runs page) or the stored run of its config."""
    key = handle_key(scenario)
    current = st.session_state.get(key)
    if current is not None and current.running:
        return  # never replace a run in progress
    run_id = st.session_state.get(f"open-run:{scenario.id}")
    stored = run_store().get(run_id) if run_id else None
    if stored is not None and stored.scenario == scenario.id:
        st.session_state[key] = RunHandle.from_stored(scenario, stored, run_store())
    else:
        handle = stored_handle(scenario, config)
        if handle is not None:
            st.session_state[key] = handle
    st.session_state.pop(f"open-run:{scenario.id}", None)  # once it is shown (a run cut short shows it again)


def seed_controls(scenario: Scenario) -> tuple[int, str]:
    """'Repeat over seeds' and the band to draw: page options, not Config fields (in the URL as page
    state, explorer/page/share.py)."""
    st.divider()
    # each widget's default is its current value: a browser mounting it afresh shows that (see controls.py)
    current = st.session_state.get(f"seeds:{scenario.id}", 1)
    repeat = st.number_input("repeat over seeds", min_value=1, max_value=MAX_SEEDS,
                             value=current if within_bounds(current, 1, MAX_SEEDS) else 1, step=1,
                             key=f"seeds:{scenario.id}",
                             help="Run seeds s … s+N−1 of these settings (each run is stored) and draw the "
                                  "mean over seeds with a band, to tell an effect from noise.")
    band = "min–max"
    if repeat > 1:
        shown = st.session_state.get(f"band:{scenario.id}")
        band = st.radio("band", list(BANDS), index=list(BANDS).index(shown) if shown in BANDS else 0,
                        horizontal=True, key=f"band:{scenario.id}",
                        help="min–max: the figure drawn from the smallest and largest value over seeds at "
                             "every point; mean ± std: from the mean minus and plus one standard deviation.")
    return int(repeat), band


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
