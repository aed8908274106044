"""The live feed: what a running page fetches instead of rerunning.

Every Streamlit script run, a fragment's too, makes the browser re-render the whole app: on
the 2-core machine ~0.1 s of the browser's CPU per run, so a status line ticking every 0.3 s
took a third of a core from training. While a run goes on the page is therefore drawn once;
its status component (explorer/view/live_status.py) then fetches `GET /_explorer/feed/<token>?wait=TICK_S`
over and over (the server holds each request for a tick, or until the run ends) and paints
what it gets: the status line, the run's warnings, and the figures whose
version changed, which it hands to their chart components (explorer/view/chart.py) to update in
place. Nothing reruns until the run ends (or its first figures appear), when the component
asks Streamlit for one rerun.

A feed is registered by the page for one run handle and its view settings (overlays, band,
line settings); its token is random, so only the page that holds it can read the feed (and
the server answers local names only, explorer/page/hosts.py). The figures are rebuilt with the
live view's budget (explorer/view/live.py `built`), in a thread of the server's pool.
"""
import asyncio
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from explorer.view.chart import chart_key

PATH = "/_explorer/feed/{token}"
KEEP_S = 120.0      # a feed nobody polled for this long, whose run has ended, is dropped
MAX_FEEDS = 256
MAX_WAIT_S = 2.0    # the longest a poll may ask to be held
MAX_DRAWN_MS = 10_000.0  # the most browser drawing time one poll may report
PAGE_DRAW_S = 10.0  # the longest a page run's own drawing holds the feed's building back
END_CHECK_S = 0.02  # how often a held poll looks whether the run has ended
MAX_CHARTS = 64     # the most chart keys a poll may name as in view


@dataclass
class Feed:
    """One running page's view of one run: what to build, and what was sent."""

    scenario: Any
    handle: Any
    overlays: list
    band: str
    lines: Any
    chart_prefix: str
    state: dict = field(default_factory=dict)   # the live view's build state (explorer/view/live.py `built`)
    sent: dict[str, str] = field(default_factory=dict)   # chart name -> version sent
    polled_at: float = field(default_factory=time.monotonic)
    # Registered by a page run that is drawing the charts itself: until it hands over what it built
    # (`adopt`), a poll builds nothing (a second build beside the page's took the CPU from both).
    page_drawing_since: float | None = field(default_factory=time.monotonic)
    laid_out: set[str] | None = None   # the charts the page drew full width (a placeholder's width is a guess)
    lock: threading.Lock = field(default_factory=threading.Lock)


_feeds: dict[str, Feed] = {}
_lock = threading.Lock()


def register(feed: Feed, token: str | None = None) -> str:
    """Keep `feed` under `token` (a new random one if None or unknown); return the token."""
    with _lock:
        _prune()
        if token is None or token not in _feeds:
            token = secrets.token_urlsafe(16)
        elif _feeds[token].handle is feed.handle:  # what it built stays: the page draws it (`catch_up`)
            feed.state = _feeds[token].state
        _feeds[token] = feed  # a page rerun drew its charts afresh: the feed sends every chart again
        return token


def catch_up(token: str, state_key: str, state) -> None:
    """Before a page rerun draws a running feed's charts: if the feed built them from more records than
    the page did, the page takes the feed's (so it draws the newest, and builds none of its own
    within the budget)."""
    feed = get(token)
    theirs = feed.state.get(state_key) if feed is not None else None
    ours = state.get(state_key)
    if theirs is not None and theirs.rows > (ours.rows if ours is not None else 0):
        state[state_key] = theirs


def adopt(token: str, state_key: str, drawn) -> None:
    """The page has just built and drawn `drawn` (a live.Drawn) for the feed's run: the feed starts
    from it (no second build at once, nothing sent twice) and builds again when its budget allows."""
    feed = get(token)
    if feed is None:
        return
    with feed.lock:
        feed.page_drawing_since = None
        if drawn is not None:
            feed.state[state_key] = drawn
            feed.laid_out = set(drawn.full_width)
            feed.sent = {name: chart["version"] for name, chart in drawn.charts.items()}


def get(token: str) -> Feed | None:
    with _lock:
        return _feeds.get(token)


def _prune() -> None:
    now = time.monotonic()
    for token, feed in list(_feeds.items()):
        if not feed.handle.running and now - feed.polled_at > KEEP_S:
            del _feeds[token]
    while len(_feeds) > MAX_FEEDS:
        del _feeds[next(iter(_feeds))]


def answer(feed: Feed, near: list[str] | None = None) -> dict[str, Any]:
    """The feed's next message: the status line, warnings, every chart's name, and the payload of
    each chart whose figure changed since the last message. `near`: the keys of the page's charts
    in view (None: the page shows none of them yet); only those are built. `relayout`: a chart
    built since the page drew it takes another width (it was a placeholder), so the page redraws."""
    from explorer.view.live import built, live_state
    with feed.lock:
        feed.polled_at = time.monotonic()
        message = live_state(feed.handle)
        names = None if near is None else [key.removeprefix(chart_key(feed.chart_prefix, "")) for key in near]
        drawn = built(feed.scenario, feed.handle, feed.overlays, feed.band, feed.lines, feed.state, names) \
            if message["running"] and not page_drawing(feed) else None
        charts = drawn.charts if drawn is not None else {}
        message["names"] = [chart_key(feed.chart_prefix, name) for name in charts]
        message["relayout"] = drawn is not None and feed.laid_out is not None and drawn.full_width != feed.laid_out
        message["charts"] = {}
        for name, payload in charts.items():
            if feed.sent.get(name) != payload["version"]:
                message["charts"][name] = {**payload, "key": chart_key(feed.chart_prefix, name)}
                feed.sent[name] = payload["version"]
        return message


def page_drawing(feed: Feed) -> bool:
    """Whether the page's own run is still building the charts (for `PAGE_DRAW_S` at most: a page run
    that never handed them over does not stop the feed for good)."""
    since = feed.page_drawing_since
    return since is not None and time.monotonic() - since < PAGE_DRAW_S


def filling(feed: Feed) -> bool:
    """Whether the feed's charts are still filling in and new records could fill them now: a held poll
    is then answered at once (the first curves are not kept waiting for the tick)."""
    from explorer.view.live import drawn_key
    drawn = feed.state.get(drawn_key(feed.scenario.id))
    return drawn is not None and drawn.due(feed.handle.rows_count())  # None: the page is drawing it


async def endpoint(request: Request) -> JSONResponse:
    """`?wait=S`: answer after S seconds, or as soon as the run ends (so the page learns of the end
    at once, not at its next tick) or new records could fill charts still empty. `&drawn_ms=B`: the
    page's charts took B ms to draw since its last poll; the next rebuild waits for that too
    (explorer/view/live.py `charge_drawing`). `&near=K1,K2`: the keys of the page's charts in view (absent
    while the page shows none of the feed's charts); only those are rebuilt. The answer is built in a worker thread: a rebuild never
    blocks the event loop."""
    feed = get(request.path_params["token"])
    if feed is None:
        return JSONResponse({"gone": True}, status_code=404, headers={"Cache-Control": "no-store"})
    wait_s = _seconds(request.query_params.get("wait"), MAX_WAIT_S)
    drawn_s = _seconds(request.query_params.get("drawn_ms"), MAX_DRAWN_MS) / 1000
    if drawn_s:
        from explorer.view.live import charge_drawing
        with feed.lock:
            charge_drawing(feed.state, feed.scenario.id, drawn_s)
    deadline = time.monotonic() + wait_s
    while feed.handle.running and time.monotonic() < deadline and not filling(feed):
        await asyncio.sleep(END_CHECK_S)
    near = request.query_params.get("near")
    keys = None if near is None else [key for key in near.split(",") if key][:MAX_CHARTS]
    return JSONResponse(await run_in_threadpool(answer, feed, keys), headers={"Cache-Control": "no-store"})


def _seconds(text: str | None, most: float) -> float:
    """A query parameter's number, within 0..`most` (0 when it is missing or not a number)."""
    try:
        value = float(text or 0)
    except ValueError:
        return 0.0
    return min(most, value) if value > 0 else 0.0  # NaN and negatives: 0


def routes() -> list[Route]:
    return [Route(PATH, endpoint, methods=["GET"])]


def url(token: str) -> str:
    import streamlit as st
    base = st.get_option("server.baseUrlPath").strip("/")
    return "/" + (base + "/" if base else "") + PATH.lstrip("/").format(token=token)
