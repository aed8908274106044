"""The live feed: a running page is drawn once, and its status component follows the feed."""
import json
import time

from starlette.applications import Starlette
from starlette.testclient import TestClient

from explorer.view import feed
from tests.test_app import open_page, progress_text


def live_status(at) -> dict:
    """The live status component's data: its feed URL and the state it paints first."""
    for element in at.get("bidi_component"):
        data = json.loads(element.proto.json or "{}")
        if data.get("feed"):
            return data
    return {}


def test_a_running_page_is_fed_its_status_and_each_new_figure_once() -> None:
    at = open_page(auto=False)
    at.sidebar.slider(key="vanishing-gradients.steps").set_value(3000).run()
    at.button(key="run").click().run()
    status = live_status(at)
    assert status, "a running page draws the live status component"
    assert status["feed"].startswith("/_explorer/feed/")
    assert status["state"]["running"] and progress_text(at).startswith(("Running", "Waiting"))
    assert not at.get("progress"), "no st.progress while the feed draws the line"

    client = TestClient(Starlette(routes=feed.routes()))
    sent: list[tuple[str, str]] = []
    deadline = time.time() + 60
    while len({key for key, _ in sent}) < 3 or len(sent) < 6:
        assert time.time() < deadline, f"the feed sent too little: {sent}"
        answer = client.get(status["feed"], params={"wait": 0.3}).json()
        assert answer["running"] and answer["text"].startswith("Running")
        assert all(key.startswith("vanishing-gradients-") for key in answer["names"])
        sent += [(chart["key"], chart["version"]) for chart in answer["charts"].values()]
        assert set(answer["charts"]) <= {key.removeprefix("vanishing-gradients-") for key in answer["names"]}
    assert len(sent) == len(set(sent)), "each version of a figure is sent once"

    started = time.perf_counter()
    held = client.get(status["feed"], params={"wait": 2.0}).json()
    held_s = time.perf_counter() - started
    assert held["running"] and held_s >= 2.0, "a poll is held for its wait while the run goes on"

    handle = at.session_state["run:vanishing-gradients"]
    at.button(key="stop").click().run()
    assert handle.join(10) and progress_text(at).startswith("Stopped")
    assert not live_status(at), "an ended run's line is the page's own"
    started = time.perf_counter()
    ended = client.get(status["feed"], params={"wait": 60.0}).json()
    assert time.perf_counter() - started < 60.0, "an ended run's poll is answered at once, not held for its wait"
    assert not ended["running"] and ended["charts"] == {}
    assert ended["text"] == progress_text(at), "the feed's last line is the page's final line, painted at once"

    assert client.get("/_explorer/feed/not-a-token").status_code == 404
