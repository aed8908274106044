"""End-to-end: the real app in a real (headless) Chromium, driven through Playwright.

The server and browser come from conftest.py; per test a fresh browser context clicks through the app
the way a person would: gallery -> scenario page -> move sliders with the keyboard ->
the page runs the new settings by itself -> watch the live view fill in -> (test 2) Stop a
long run and keep the partial plots.
"""
import re

import pytest

from browser_helpers import (PLOT, SIDEBAR, button, chart, displayed_value, open_scenario, press_on_slider,
                             progress_text, wait_done, wait_idle, wait_progress)

pytestmark = [pytest.mark.browser]

SCENARIO_PATH = "/vanishing-gradients"
RUN_TIMEOUT_S = 60


# --- tests --------------------------------------------------------------------------------

def test_gallery_to_finished_run(page, app_url):
    page.goto(app_url)
    page.get_by_role("heading", name="Training Dynamics Explorer").wait_for()
    page.get_by_role("heading", name="Core mechanics").wait_for()  # the gallery's first topic
    page.locator(".st-key-card-vanishing-gradients").get_by_role("link", name="Vanishing gradients").click()
    page.wait_for_url(re.compile(re.escape(SCENARIO_PATH) + r"/?$"))
    page.locator(f'{SIDEBAR} [data-testid="stSlider"]').first.wait_for()
    wait_idle(page)

    # Move "depth" down three notches with the keyboard (default 10 -> 7), and "steps" to its
    # minimum: auto-run trains the new settings by itself, once they stop moving.
    before, after = press_on_slider(page, "depth", "ArrowLeft", "ArrowLeft", "ArrowLeft")
    assert after == before - 3, f"depth went {before} -> {after}, expected {before - 3}"
    assert displayed_value(page, "depth") == str(after)
    before, after = press_on_slider(page, "steps", "Home")
    assert after < before and after == 10, f"steps went {before} -> {after}"

    text = wait_done(page, r"^Finished after 10 steps", RUN_TIMEOUT_S)
    assert "stored as run" in text, text

    heatmap = page.locator(PLOT).filter(has_text="layer × step")
    heatmap.first.wait_for(timeout=RUN_TIMEOUT_S * 1000)
    assert page.locator(PLOT).filter(has_text="Training loss").count() >= 1
    assert page.get_by_text("What to look for", exact=False).count() >= 1
    assert page.get_by_text("layer 7", exact=False).count() >= 1, "what-to-look-for reads depth 7"


def test_stop_keeps_partial_plots(page, app_url):
    open_scenario(page, app_url, SCENARIO_PATH, "Vanishing gradients")
    before, after = press_on_slider(page, "steps", "End")
    assert after == 3000 and after > before, f"steps went {before} -> {after}"

    wait_progress(page, r"^Running", RUN_TIMEOUT_S)  # auto-run
    page.locator(PLOT).first.wait_for(timeout=RUN_TIMEOUT_S * 1000)
    assert re.search(r"^Running", progress_text(page)), "the run ended before it could be stopped"

    button(page, "Stop").click()
    text = wait_progress(page, r"^Stopped", 15)
    steps = int(re.search(r"after (?:up to )?(\d+) steps", text).group(1))
    assert 0 < steps < 3000, text
    wait_idle(page)
    assert page.locator(PLOT).count() >= 1, "the partial plots disappeared after Stop"
    assert page.locator(PLOT).filter(has_text="layer × step").count() >= 1
    from playwright.sync_api import expect
    expect(button(page, "Run")).to_be_enabled(timeout=10_000)
    expect(button(page, "Stop")).to_be_disabled(timeout=10_000)


def test_memory_timeline_spans_the_page(page, app_url):
    """DDP vs FSDP: the timeline through one step is drawn full-width below the two-column grid."""
    open_scenario(page, app_url, "/ddp-fsdp-memory", "DDP vs FSDP memory")
    button(page, "Run").click()
    wait_done(page, r"^(Finished|Served from the run store)", 180)
    half = chart(page, "loss").bounding_box()
    chart(page, "memory_timeline")  # below the grid: drawn once scrolled to
    timeline = page.locator(PLOT).filter(has_text="block by block through step 1")
    timeline.first.wait_for(timeout=30_000)
    full = timeline.first.bounding_box()
    assert full["width"] > 1.7 * half["width"], f"timeline {full['width']:.0f}px vs a grid plot {half['width']:.0f}px"
    from playwright.sync_api import expect
    for arm in ("ddp · N=2", "fsdp-zero3 · N=2", "fsdp-zero2 · N=2"):
        expect(timeline.first.get_by_text(arm, exact=True), f"no {arm} row in the timeline").to_have_count(1, timeout=15_000)


FITS_JS = """name => { const c = document.querySelector(`div.explorer-chart[data-name="${name}"]`);
  const box = c.getBoundingClientRect(), title = c.querySelector('.gtitle').getBoundingClientRect();
  const ticks = [...c.querySelectorAll('.xtick text')].map(t => t.getBoundingClientRect());
  return {lines: c.querySelectorAll('.gtitle tspan.line').length, left: title.left - box.left, right: box.right - title.right,
          below: box.bottom - Math.max(...ticks.map(t => t.bottom)), labels: ticks.length}; }"""


def test_long_titles_and_slanted_labels_stay_inside_their_chart(page, app_url):
    """DDP vs FSDP at 1400 px: a half-width chart's title longer than the chart wraps onto a second
    line instead of running into its neighbour's, and long slanted tick labels push the margin out
    instead of running off the chart's bottom."""
    open_scenario(page, app_url, "/ddp-fsdp-memory", "DDP vs FSDP memory")
    button(page, "Run").click()
    wait_done(page, r"^(Finished|Served from the run store)", 180)
    chart(page, "collectives")
    page.wait_for_function("() => !!document.querySelector('div.explorer-chart[data-name=\"collectives\"] .gtitle')")
    fits = page.evaluate(FITS_JS, "collectives")
    assert fits["lines"] == 2 and fits["left"] >= 0 and fits["right"] >= 0, fits
    chart(page, "dtensor_shards")  # 26 parameter names as long as "blocks.0.self_attn.out_proj.weight", slanted
    page.wait_for_function("() => !!document.querySelector('div.explorer-chart[data-name=\"dtensor_shards\"] .gtitle')")
    fits = page.evaluate(FITS_JS, "dtensor_shards")
    assert fits["labels"] >= 20 and fits["below"] >= 0, fits
