"""End-to-end, the explorer experience in a real Chromium: open a shared link, run it, change a
setting (auto-run trains it), overlay the first run on the second, and download the zip bundle
(PNG bytes, CSV columns, the config equal to the page's)."""
import io
import json
import re
import zipfile
from urllib.parse import parse_qsl, urlparse

import pytest

from browser_helpers import (MAIN, PLOT, SIDEBAR, button, chart, pick_option, press_on_slider, slider_value,
                             wait_done, wait_idle)
from scenarios import get_scenario

pytestmark = [pytest.mark.browser]

SCENARIO = get_scenario("vanishing-gradients")
RUN_TIMEOUT_S = 90
EXPORT_TIMEOUT_S = 180  # kaleido starts Chromium once for every PNG and SVG; slow on a shared 2-core box
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SHARED = {"depth": "5", "width": "16", "steps": "10", "seed": "4242"}  # a seed no other test uses: trains


def page_query(page) -> dict[str, str]:
    return dict(parse_qsl(urlparse(page.url).query))


def open_expander(page, title: str) -> None:
    page.locator(f'{MAIN} [data-testid="stExpander"] summary').filter(has_text=title).click()
    wait_idle(page)


def test_shared_link_run_overlay_and_zip_bundle(page, app_url, tmp_path) -> None:
    page.goto(app_url + "/" + SCENARIO.id + "?" + "&".join(f"{k}={v}" for k, v in SHARED.items()))
    page.get_by_role("heading", name=SCENARIO.title).first.wait_for()
    page.locator(f'{SIDEBAR} [data-testid="stSlider"]').filter(has_text="depth").first.wait_for()
    wait_idle(page)
    assert slider_value(page, "depth") == 5 and slider_value(page, "steps") == 10, "the link set the sliders"
    query = page_query(page)
    assert set(query) == set(SCENARIO.field_specs()) and query["depth"] == "5", "every field is in the URL"

    button(page, "Run").click()
    first = wait_done(page, r"^Finished", RUN_TIMEOUT_S)
    first_run = re.search(r"stored as run (\w+)", first).group(1)

    before, after = press_on_slider(page, "depth", "ArrowRight")
    assert (before, after) == (5, 6)
    assert page_query(page)["depth"] == "6", "the URL follows the slider"
    wait_done(page, r"^Finished.*stored as run (?!" + first_run + ")", RUN_TIMEOUT_S)  # auto-run

    # Overlay the first run (depth 5) on the figures of the second (depth 6).
    open_expander(page, "Compare with stored runs")
    pick_option(page, page.locator(f'{MAIN} [data-testid="stMultiSelect"]').first, first_run)
    page.keyboard.press("Escape")
    wait_idle(page)
    chart(page, "loss")  # the figures are above the panel: drawn again once scrolled back to
    loss = page.locator(PLOT).filter(has_text="Training loss").first
    loss.get_by_text("[depth=5]").first.wait_for(timeout=30_000)

    # The zip bundle of what the page shows.
    open_expander(page, "Export")
    button(page, "Prepare downloads").click()
    zip_button = page.locator(MAIN).get_by_role("button", name=re.compile("Download everything"))
    zip_button.wait_for(timeout=EXPORT_TIMEOUT_S * 1000)
    with page.expect_download(timeout=60_000) as download:
        zip_button.click()
    path = tmp_path / download.value.suggested_filename
    download.value.save_as(path)
    assert re.fullmatch(r"vanishing-gradients-[0-9a-f]{8}\.zip", path.name), path.name

    archive = zipfile.ZipFile(io.BytesIO(path.read_bytes()))
    names = archive.namelist()
    folder = path.stem + "/"
    assert all(n.startswith(folder) for n in names), names
    pngs = [n for n in names if n.endswith(".png")]
    assert len(pngs) >= 3 and all(archive.read(n)[:8] == PNG_MAGIC for n in pngs), pngs
    assert any(n.endswith("-loss.svg") for n in names) and any(n.endswith("-loss.html") for n in names)
    csv_lines = archive.read(folder + path.stem + "-metrics.csv").decode().splitlines()
    assert csv_lines[0] == "arm,step,metric,value", csv_lines[0]
    assert any("[depth=5]" in line for line in csv_lines), "the overlaid run's rows are in the CSV, labelled"
    config = json.loads(archive.read(folder + path.stem + "-config.json"))
    fields = {k: v for k, v in page_query(page).items() if k in SCENARIO.field_specs()}  # beside them: run, compare
    assert config == SCENARIO.validate(fields).model_dump(mode="json"), "config.json is the page's config"
    readme = archive.read(folder + "README.txt").decode()
    assert "python -m explorer run vanishing-gradients" in readme and "--set depth=6" in readme
