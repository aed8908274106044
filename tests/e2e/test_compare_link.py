"""End-to-end: tick three runs on the Runs page, open them compared, and paste the page's URL into
a new browser context (another person, nothing in its session): the same comparison comes back."""
import re

import pytest

from browser_helpers import MAIN, PLOT, button, chart, pick_option, progress_text, wait_done, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RUN_TIMEOUT_S = 90
TINY = "width=16&steps=12"
ROW_PX, HEADER_PX, CHECKBOX_X_PX = 35, 35, 18  # st.dataframe's default row height; its tick column


def train(page, app_url: str, depth: int) -> str:
    """Open a link to a config and press Run: the run is trained and stored."""
    page.goto(f"{app_url}/vanishing-gradients?depth={depth}&{TINY}")
    wait_idle(page)
    button(page, "Run").click()
    text = wait_done(page, r"stored as run|Served from the run store", RUN_TIMEOUT_S)
    return re.search(r"run ([0-9a-f]{12})", text).group(1)


def comparison(page) -> tuple[str, set[str]]:
    """The run the page shows, and the overlay tags in its loss figure's legend."""
    chart(page, "loss")
    loss = page.locator(PLOT).filter(has_text="Training loss").first
    loss.wait_for(timeout=RUN_TIMEOUT_S * 1000)
    page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].some("
                           "p => (p.textContent.match(/\\[depth=/g) || []).length >= 2)", timeout=30_000)
    shown = re.search(r"Served from the run store: run ([0-9a-f]{12})", progress_text(page)).group(1)
    return shown, set(re.findall(r"\[(depth=\d)\]", loss.inner_text()))


def test_three_runs_opened_compared_share_one_url(page, app_url, browser):
    runs = [train(page, app_url, depth) for depth in (4, 5, 6)]

    page.goto(f"{app_url}/runs")
    pick_option(page, page.locator('[data-testid="stSelectbox"]').first, "Vanishing gradients")
    wait_idle(page)
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.wait_for()
    box = grid.bounding_box()
    for row in range(3):  # the ticks of the three rows (newest first: depth 6, 5, 4)
        page.mouse.click(box["x"] + CHECKBOX_X_PX, box["y"] + HEADER_PX + ROW_PX * row + ROW_PX / 2)
        wait_idle(page)
    compare = button(page, "Open compared")
    page.wait_for_function("b => !b.disabled", arg=compare.element_handle(), timeout=10_000)
    compare.click()
    page.wait_for_url(re.compile(r"/vanishing-gradients\?.*compare="))
    wait_idle(page)
    shown, overlays = comparison(page)
    assert shown == runs[2] and overlays == {"depth=4", "depth=5"}, (shown, overlays)
    link = page.url
    assert runs[0] in link and runs[1] in link, link

    other = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        fresh = other.new_page()
        fresh.goto(link)
        wait_idle(fresh)
        assert comparison(fresh) == (shown, overlays), "the link restores the same comparison"
        assert fresh.locator(MAIN).get_by_text("not in this run store").count() == 0
    finally:
        other.close()
