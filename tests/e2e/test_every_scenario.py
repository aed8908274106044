"""Every registered scenario, once, in the real browser: open its page, press Run with its
defaults, see it finish with plots and a "what to look for". A new scenario is covered
without a new test."""
import pytest

from browser_helpers import PLOT, button, open_scenario, wait_done
from scenarios import all_scenarios

pytestmark = [pytest.mark.browser]
RUN_TIMEOUT_S = 180  # defaults take seconds on 2 cores; CI machines are slower and shared


@pytest.mark.parametrize("scenario", all_scenarios(), ids=lambda s: s.id)
def test_default_run_finishes_with_plots(page, app_url, scenario) -> None:
    open_scenario(page, app_url, "/" + scenario.id, scenario.title)
    button(page, "Run").click()
    text = wait_done(page, r"^(Finished|Served from the run store)", RUN_TIMEOUT_S)
    assert "Failed" not in text, text
    page.locator(PLOT).first.wait_for(timeout=30_000)
    assert page.get_by_text("What to look for", exact=False).count() >= 1
    assert page.locator('[data-testid="stAlert"]').filter(has_text="The run failed").count() == 0
