"""End-to-end at a laptop's 1280×800: the navigation along the top leaves the sidebar to the
settings, a scenario page's header fits above the fold, and the home's cards line up."""
import re

import pytest

from browser_helpers import MAIN, SIDEBAR, button, wait_idle

pytestmark = [pytest.mark.browser]

VIEWPORT = {"width": 1280, "height": 800}
PICTURE_WAIT_MS = 120_000  # the first picture run waits for a warm worker


@pytest.fixture
def laptop(browser):
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(30_000)
    page = context.new_page()
    yield page
    context.close()


def in_view(box: dict | None) -> bool:
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"]


def test_ddp_page_shows_ten_settings_and_its_header_without_scrolling(laptop, app_url):
    laptop.goto(app_url + "/ddp-fsdp-memory")
    laptop.get_by_role("heading", name="DDP vs FSDP memory").first.wait_for()
    laptop.locator(f'{SIDEBAR} [data-testid="stSlider"]').first.wait_for()
    # A fresh server's page reruns once its workers are up (Run turns on): measure after that.
    laptop.get_by_text("Starting the workers", exact=False).first.wait_for(state="hidden", timeout=120_000)
    wait_idle(laptop)
    assert laptop.locator('[data-testid="stSidebarNav"]').count() == 0, "no navigation in the sidebar"
    assert laptop.locator('[data-testid="stTopNav"]').count() == 1, "the navigation is along the top"

    settings = laptop.locator(f'{SIDEBAR} [data-testid="stElementContainer"]').filter(
        has=laptop.locator('[data-testid="stWidgetLabel"]'))
    boxes = [settings.nth(i).bounding_box() for i in range(settings.count())]
    visible = sum(in_view(box) for box in boxes)
    assert settings.count() >= 16 and visible >= 10, f"{visible} of {settings.count()} settings in view"

    header = {"question": laptop.locator(MAIN).get_by_text("How much memory does each rank need", exact=False),
              "Run": button(laptop, "Run"), "Stop": button(laptop, "Stop")}
    header.update({name: button(laptop, name) for name in ("two ranks, three strategies", "memory vs world size 1-4")})
    outside = [name for name, locator in header.items() if not in_view(locator.first.bounding_box())]
    assert not outside, f"below the fold at 1280×800: {outside}"


def cards_line_up_and_show_all_they_hold(cards) -> None:
    """The cards of a row are one height (the tallest's), and none hides content behind a scroll."""
    boxes = cards.evaluate_all("els => els.map(e => [e.className.match(/st-key-card-[\\w-]+/)[0], "
                               "Math.round(e.getBoundingClientRect().top), Math.round(e.getBoundingClientRect().height), "
                               "e.scrollHeight - e.clientHeight])")
    rows: dict[int, set[int]] = {}
    for _, top, height, _ in boxes:
        rows.setdefault(top, set()).add(height)
    uneven = {top: heights for top, heights in rows.items() if len(heights) > 1}
    assert len(rows) >= 7 and not uneven, f"rows {len(rows)}, uneven rows (top: heights) {uneven}"
    clipped = [(key, hidden) for key, _, _, hidden in boxes if hidden > 1]
    assert not clipped, f"cards whose content scrolls (card, hidden px): {clipped}"


def test_home_cards_line_up_and_a_term_opens_its_glossary_entry(laptop, app_url):
    laptop.goto(app_url)
    laptop.get_by_role("heading", name="Training Dynamics Explorer").wait_for()
    wait_idle(laptop)
    assert laptop.locator('[data-testid="stSidebarNav"]').count() == 0
    start = laptop.locator(".st-key-start-here")
    assert in_view(start.bounding_box()), "the start-here line is in view"
    assert start.get_by_role("link", name="Autodiff, tensors and modules").count() == 1

    cards = laptop.locator('[class*="st-key-card-"]')
    assert cards.count() >= 19, f"{cards.count()} cards"
    cards_line_up_and_show_all_they_hold(cards)
    first = laptop.locator(".st-key-card-autodiff")
    # a stored run, or its tiny run trained now (.first: while the fragment redraws the card, two may stand a moment)
    first.locator(".js-plotly-plot").first.wait_for(timeout=PICTURE_WAIT_MS)
    assert re.search(r"picture: run\s*[0-9a-f]{12}\s*, (tiny|default) settings", first.inner_text())

    laptop.set_viewport_size({"width": 1000, "height": 800})  # a narrower window: taller rows, nothing cut
    wait_idle(laptop)
    cards_line_up_and_show_all_they_hold(cards)
    first.get_by_role("link", name="Backpropagation", exact=True).click()
    laptop.wait_for_url(re.compile(r"/glossary\?term=Backpropagation$"))
    framed = laptop.locator(".st-key-glossary-focus")
    framed.wait_for()
    assert framed.inner_text().startswith("Backpropagation — ")


TITLE_BOX_JS = """name => { const c = document.querySelector(`div.explorer-chart[data-name="${name}"]`);
  const box = c.getBoundingClientRect(), title = c.querySelector('.gtitle').getBoundingClientRect();
  const bar = c.querySelector('.modebar').getBoundingClientRect();
  return {lines: c.querySelectorAll('.gtitle tspan.line').length, left: title.left - box.left,
          right: box.right - title.right, top: title.top - box.top, bar_bottom: bar.bottom - box.top,
          bar_left: bar.left - box.left, title_right: title.right - box.left}; }"""


def test_charts_stack_where_the_grid_is_narrow_and_a_long_title_wraps_inside_its_chart(browser, app_url):
    """compositional's first title (~130 characters) ran off both sides of its half-width chart at 1280 px,
    and at 1000 px with the sidebar open two charts to a row left each ~300 px wide: now the title wraps
    onto as many lines as it needs, and below a grid of 760 px the charts take a row each. The mode bar shown
    on hover (top right) covered the end of its first line: the title now hangs below the bar's band."""
    from urllib.parse import urlencode

    from browser_helpers import chart, wait_done
    from explorer.page.url import config_query
    from scenarios import get_scenario
    scenario = get_scenario("compositional")
    context = browser.new_context(viewport={"width": 1000, "height": 800})
    context.set_default_timeout(30_000)
    page = context.new_page()
    try:
        for width in (1000, 1280):  # the second: the same config, served from the run store
            page.set_viewport_size({"width": width, "height": 800})
            page.goto(f"{app_url}/{scenario.id}?{urlencode(config_query(scenario.validate(scenario.tiny)))}")
            page.get_by_role("heading", name=scenario.title).first.wait_for()
            page.locator(f'{SIDEBAR} [data-testid="stSlider"]').first.wait_for()
            wait_idle(page)
            button(page, "Run").click()
            wait_done(page, r"^(Finished|Served from the run store)", 180)
            first, second = chart(page, "exact"), chart(page, "constructions")
            page.wait_for_function("() => !!document.querySelector('div.explorer-chart[data-name=\"exact\"] .gtitle')")
            one, two = first.bounding_box(), second.bounding_box()
            grid = page.locator(".st-key-explorer-charts").first.bounding_box()
            if width == 1000:  # the main column is ~620 px beside the sidebar
                assert two["y"] >= one["y"] + one["height"] - 1 and one["width"] > 0.95 * grid["width"], (one, two, grid)
            else:
                assert abs(two["y"] - one["y"]) < 2 and one["width"] < 0.55 * grid["width"], (width, one, two, grid)
            first.hover()  # the mode bar shows
            title = page.evaluate(TITLE_BOX_JS, "exact")
            assert title["left"] >= 0 and title["right"] >= 0 and title["lines"] >= 2, (width, title)
            assert title["top"] >= title["bar_bottom"] or title["title_right"] <= title["bar_left"], (width, title)
    finally:
        context.close()
