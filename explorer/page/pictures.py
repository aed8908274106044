"""The home's pictures: each card's key figure, small, drawn from a real stored run.

A card's picture is the scenario's key figure (its `picture`, else the figure of its first term),
drawn by `scenario.figures` from the records of a stored complete run on this code: the
newest run of its default settings, else the newest of its tiny settings. When the store
holds neither, a tiny run is trained on the first visit to the home — by the pool's
workers, like any page run, and stored like one — and the card says so meanwhile.

Picture runs go one at a time across the server (`AT_ONCE`), in reading order, so a
person's own Run never queues behind twenty of them; each scenario gets one try per server
and code version; and they are started only while someone has the home open.
"""
import math
import threading
from dataclasses import dataclass

import plotly.graph_objects as go
import streamlit as st

from explorer.page.session import run_store, stored_frame
from explorer.runs.handle import RunHandle
from explorer.runs.serving import stored_result
from explorer.runs.store import RunStore, StoredRun
from scenarios import get_scenario
from scenarios.base import Scenario

PICTURE_PX = 150   # a card's picture height
MAX_CARD_TICKS = 4  # tick labels a card's axis holds apart
AT_ONCE = 1        # picture runs training at once, server-wide
PICTURE_NAME = "home picture"  # the name a picture run gets in the store, so Runs says why it is there


@dataclass(frozen=True)
class Source:
    """The stored run a card's picture is drawn from."""

    run: StoredRun
    settings: str  # "default settings" or "tiny settings"


def picture_source(store: RunStore, scenario: Scenario) -> Source | None:
    """The newest complete run of the default settings, else of the tiny ones; None when neither is stored."""
    for settings, values in (("default settings", {}), ("tiny settings", scenario.tiny)):
        stored = stored_result(store, scenario, scenario.validate(values))
        if stored is not None:
            return Source(stored, settings)
    return None


def key_figure(scenario: Scenario, names: list[str]) -> str | None:
    """The figure the scenario names as its picture, else that of its first glossary term (its
    headline), else its first figure; `names` are the figures a run's records drew."""
    for name in (scenario.picture, next((e.figure for e in scenario.terms.values() if e.figure), None)):
        if name in names:
            return name
    return names[0] if names else None


class PictureRuns:
    """The tiny runs this server trains for cards without a stored run: one try per scenario."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[tuple[str, str], RunHandle] = {}  # (scenario id, code version) -> its picture run
        self._named: set[str] = set()  # run ids already named PICTURE_NAME

    def advance(self, missing: list[Scenario], store: RunStore, pool) -> None:
        """Name the picture runs stored since the last call, then start the next one (in the order
        given) when fewer than `AT_ONCE` are training."""
        with self._lock:
            self._name_stored(store)
            if sum(handle.running for handle in self._runs.values()) >= AT_ONCE:
                return
            for scenario in missing:
                key = (scenario.id, scenario.code_version())
                if key not in self._runs:
                    tiny = scenario.validate(scenario.tiny)
                    self._runs[key] = RunHandle.start(scenario, tiny, store, pool=pool)
                    return

    def _name_stored(self, store: RunStore) -> None:
        """A stored picture run is named PICTURE_NAME (unless someone named it already): in Runs it
        would otherwise be a tiny run nobody remembers starting."""
        for handle in self._runs.values():
            run_id = None if handle.running else handle.snapshot(with_frame=False).run_id
            if run_id is None or run_id in self._named:
                continue
            stored = store.get(run_id)
            if stored is not None and not stored.name:
                store.rename(run_id, PICTURE_NAME)
            self._named.add(run_id)

    def run_of(self, scenario: Scenario) -> RunHandle | None:
        with self._lock:
            return self._runs.get((scenario.id, scenario.code_version()))

    def gave_up(self, scenario: Scenario) -> bool:
        """Its picture run ended without a complete result (failed, refused, stopped)."""
        handle = self.run_of(scenario)
        return handle is not None and not handle.running and handle.snapshot(with_frame=False).run_id is None


@st.cache_resource(show_spinner=False)
def picture_runs(store_path: str) -> PictureRuns:
    """The server's picture runs for one store (tests give every test its own store)."""
    return PictureRuns()


def waiting_words(scenario: Scenario, runs: PictureRuns) -> str:
    """What a card without a picture says: training, queued, or why there is none."""
    handle = runs.run_of(scenario)
    if handle is None:
        return "Its picture comes from a tiny run, which waits for the one before it."
    snap = handle.snapshot(with_frame=False)
    if snap.running:
        return f"Training a tiny run for its picture… {snap.progress:.0%}" + (f" ({snap.waiting})" if snap.waiting else "")
    if snap.run_id is None:
        return f"No picture: its tiny run ended {snap.status}" + (f" ({snap.error})" if snap.error else "") + "."
    return "Its tiny run is stored; the picture follows."


def picture(scenario: Scenario, source: Source) -> go.Figure | None:
    """The card's picture (built once per stored run and process), or None when it cannot be drawn."""
    return _picture(str(run_store().path), scenario.id, source.run.run_id)


@st.cache_data(max_entries=256, show_spinner=False)
def _picture(store_path: str, scenario_id: str, run_id: str) -> go.Figure | None:
    scenario, store = get_scenario(scenario_id), RunStore(store_path)
    stored = store.get(run_id)
    if stored is None:
        return None
    try:
        figures = scenario.figures(stored_frame(run_id, store), scenario.validate(stored.config))
    except Exception:  # a stored run this code cannot draw: the card says so
        return None
    name = key_figure(scenario, list(figures))
    return None if name is None else small(figures[name], scenario_id, run_id, name)


def wrapped(text: str, width: int = 7) -> str:
    """Words on lines of about `width` characters, joined by <br> (a card's tick label)."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)


def small(figure: go.Figure, scenario_id: str, run_id: str, name: str) -> go.Figure:
    """A figure at card size: no title, legend, axis titles, colour bar, point or bar labels; the run it shows in
    `meta`."""
    thumb = go.Figure(figure)
    thumb.update_layout(height=PICTURE_PX, margin=dict(l=0, r=0, t=8, b=0), showlegend=False, title_text="",
                        updatemenus=[], sliders=[], font=dict(size=9),
                        meta={"scenario": scenario_id, "run_id": run_id, "figure": name})
    thumb.layout.annotations = ()  # subplot titles too (update_layout leaves them): a card's top edge cut them
    thumb.update_xaxes(title_text="")
    thumb.update_yaxes(title_text="")
    for axis in thumb.select_yaxes():  # a panel right of the first keeps its labels to itself: at card size
        beside = thumb.layout[f"xaxis{str(axis.anchor)[1:]}"] if str(axis.anchor or "").startswith("x") else None
        if beside is not None and beside.domain is not None and beside.domain[0] > 0.05:  # they ran over the panel
            axis.showticklabels = False                                                    # on their left
    for axes in (thumb.update_xaxes, thumb.update_yaxes):  # a log axis at card size: powers of ten only
        axes(dtick=1, selector=dict(type="log"))           # (its 2s and 5s ran into each other)
    for axis in [*thumb.select_xaxes(), *thumb.select_yaxes()]:  # at most four ticks of a list a card's axis
        if axis.tickvals is not None and len(axis.tickvals) > MAX_CARD_TICKS:  # cannot hold apart (128 192 256)
            keep = slice(None, None, math.ceil(len(axis.tickvals) / MAX_CARD_TICKS))
            axis.update(tickvals=list(axis.tickvals)[keep],
                        ticktext=list(axis.ticktext)[keep] if axis.ticktext is not None else None)
    for axis in thumb.select_xaxes():  # category names on two lines ran into each other: short lines instead
        if axis.ticktext:
            axis.update(ticktext=[wrapped(str(text).replace("<br>", " ")) for text in axis.ticktext], tickangle=0)
    for trace in thumb.data:
        if "showscale" in trace:
            trace.showscale = False
        mode = getattr(trace, "mode", None)
        if isinstance(mode, str) and "text" in mode and mode != "text":  # labels at card size only pile up
            trace.mode = "+".join(part for part in mode.split("+") if part != "text")
        if trace.type == "bar":  # a bar's value label is clipped at the card's top edge or runs into the next
            trace.update(text=None, texttemplate=None)
        if mode == "text":  # labels alone (a bar total written above it): the same
            trace.visible = False
        if trace.type == "scatter":  # a marker on the axis' edge is drawn whole, not cut in half
            trace.cliponaxis = False
    return thumb
