"""Every registered scenario, once, in the real browser: open its page, press Run, see it finish with
plots and a "what to look for". A new scenario is covered without a new test.

The default run opens each page on the scenario's tiny config through the URL (the path a shared link
takes) and presses Run: the page's whole path, from the controls to the final view, at the cost of the
page alone (28 default runs took 140 s of the default test run on the slower machine, 3.2–3.5 s a page
where the config was tiny and up to 9 s where it was not). The defaults run in the browser under
`-m slow`; every scenario's defaults are trained headless by its own tests either way."""
from urllib.parse import urlencode

import pytest

from browser_helpers import PLOT, button, final_view, open_scenario, wait_done, wait_final_view
from explorer.page.url import config_query
from scenarios import all_scenarios

pytestmark = [pytest.mark.browser]
RUN_TIMEOUT_S = 180  # defaults take seconds on 2 cores; CI machines are slower and shared


def run_in_page(page, app_url, scenario, query: str = "") -> None:
    open_scenario(page, app_url, "/" + scenario.id + query, scenario.title)
    drawn_before = final_view(page).count() > 0  # a stored run's view: then the slower, event-free wait
    button(page, "Run").click()
    text = (wait_done if drawn_before else wait_final_view)(page, r"^(Finished|Served from the run store)",
                                                           RUN_TIMEOUT_S)
    assert "Failed" not in text, text
    page.locator(PLOT).first.wait_for(timeout=30_000)
    assert page.get_by_text("What to look for", exact=False).count() >= 1
    assert page.locator('[data-testid="stAlert"]').filter(has_text="The run failed").count() == 0


# Pages another default browser test already runs to "Finished" with plots (test_browser.py: vanishing-gradients
# and ddp-fsdp-memory; test_layout.py: compositional): here under -m slow only, to keep the default run ≤ 12 min.
RUN_ELSEWHERE = {"vanishing-gradients", "ddp-fsdp-memory", "compositional"}


@pytest.mark.parametrize("scenario", [pytest.param(s, id=s.id, marks=[pytest.mark.slow] if s.id in RUN_ELSEWHERE else [])
                                      for s in all_scenarios()])
def test_a_tiny_run_finishes_with_plots(reused_page, app_url, scenario) -> None:
    """The page opened on the tiny config, as a shared link opens it, runs to its final view."""
    run_in_page(reused_page, app_url, scenario, "?" + urlencode(config_query(scenario.validate(scenario.tiny))))


@pytest.mark.slow
@pytest.mark.parametrize("scenario", all_scenarios(), ids=lambda s: s.id)
def test_the_default_run_finishes_with_plots(reused_page, app_url, scenario) -> None:
    run_in_page(reused_page, app_url, scenario)
