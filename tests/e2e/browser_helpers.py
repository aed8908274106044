"""What the browser tests do on a page: find widgets, press keys, wait for the run."""
import re
import time

from playwright.sync_api import TimeoutError as PlaywrightTimeout

SIDEBAR = '[data-testid="stSidebar"]'
PROGRESS_TEXT = '[data-testid="stProgress"], [data-testid="explorer-progress"]'  # a running line is the live one
PLOT = ".js-plotly-plot"
MAIN = '[data-testid="stMain"]'  # the page body; the app header has its own "Stop" (script) button


def button(page, name: str):
    """A button in the page body (not Streamlit's header toolbar) whose text is exactly `name`."""
    return page.locator(MAIN).get_by_role("button", name=name, exact=True)


def wait_idle(page, timeout_s: float = 30, quiet_checks: int = 1) -> None:
    """Wait until Streamlit reports no script run in progress (stApp's data-test-script-state)
    at `quiet_checks` checks in a row, 0.2 s apart. (A running page does not rerun: its status
    line follows the live feed. Wait for a run's end with `wait_done`.)"""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_s * 1000)
    deadline = time.monotonic() + timeout_s
    time.sleep(0.3)
    quiet = 0
    while time.monotonic() < deadline:
        running = page.locator('[data-testid="stApp"]').get_attribute("data-test-script-state") == "running"
        quiet = 0 if running else quiet + 1
        if quiet >= quiet_checks:
            return
        time.sleep(0.2)
    captions = page.locator(f'{MAIN} [data-testid="stCaptionContainer"]').all_inner_texts()[:3]
    raise AssertionError(f"the app script was still running after {timeout_s} s; status line "
                         f"{progress_text(page)!r}, captions {captions}")


def slider(page, label: str):
    """The sidebar slider widget (stSlider) whose label is exactly `label`."""
    widget = page.locator(f'{SIDEBAR} [data-testid="stSlider"]').filter(
        has=page.locator('[data-testid="stWidgetLabel"]', has_text=re.compile(rf"^\s*{re.escape(label)}\s*$")))
    assert widget.count() == 1, f"expected one sidebar slider labelled {label!r}, found {widget.count()}"
    return widget


def thumb(page, label: str):
    """The slider's focusable thumb: a range input (role slider) or an ARIA role="slider" element."""
    handle = slider(page, label).locator('input[type="range"], [role="slider"]')
    assert handle.count() == 1, f"expected one thumb in the {label!r} slider, found {handle.count()}"
    return handle


THUMB_VALUE_JS = "el => Number(el.getAttribute('aria-valuenow') ?? el.value)"


def slider_value(page, label: str) -> int:
    return int(thumb(page, label).evaluate(THUMB_VALUE_JS))


def press_on_slider(page, label: str, *keys: str, settle_s: float = 5) -> tuple[int, int]:
    """Press `keys` on a slider's thumb, one at a time, each once its value has moved; then wait for
    the rerun; return (before, after).

    The thumb is found again at every check (a rerun can replace the element), and a key whose press
    moved nothing within `settle_s` (the thumb was being redrawn when it landed) is pressed again,
    up to twice: a key moves the thumb in the browser at once, so a second press never doubles one
    that counted."""
    before = value = slider_value(page, label)
    for key in keys:
        for attempt in range(3):
            thumb(page, label).press(key)
            deadline = time.monotonic() + settle_s
            while time.monotonic() < deadline and slider_value(page, label) == value:
                time.sleep(0.05)
            if slider_value(page, label) != value:
                break
        else:
            raise AssertionError(f"the {label!r} slider stayed at {value} after pressing {key} 3 times; "
                                 f"sliders now {all_slider_values(page)}, status {progress_text(page)!r}")
        value = slider_value(page, label)
    wait_idle(page)
    return before, slider_value(page, label)


def all_slider_values(page) -> dict[str, str]:
    """Every sidebar slider's label and value (for failure messages)."""
    widgets = page.locator(f'{SIDEBAR} [data-testid="stSlider"]')
    return {w.locator('[data-testid="stWidgetLabel"]').inner_text().strip():
            w.locator('input[type="range"], [role="slider"]').first.evaluate(THUMB_VALUE_JS)
            for w in widgets.all()}


def displayed_value(page, label: str) -> str:
    return slider(page, label).locator('[data-testid="stSliderThumbValue"]').inner_text().strip()


def progress_text(page) -> str:
    bar = page.locator(PROGRESS_TEXT)
    return bar.first.inner_text() if bar.count() else ""


def wait_progress(page, pattern: str, timeout_s: float) -> str:
    """Wait until the progress bar's text matches `pattern` (a regex); return the text."""
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        text = progress_text(page)
        if re.search(pattern, text):
            return text
        time.sleep(0.25)
    raise AssertionError(f"progress text never matched {pattern!r} within {timeout_s} s; last: {text!r}")


def wait_done(page, pattern: str, timeout_s: float) -> str:
    """Wait for a run's end state in the progress text (`pattern`), then for the rerun that draws
    its final view (the live line paints "Finished" from the feed's last message, just before that
    rerun)."""
    text = wait_progress(page, pattern, timeout_s)
    wait_idle(page, 60, quiet_checks=4)
    return text


def final_view(page):
    """The element only a final view draws: its Export panel (the live view has none)."""
    return page.locator(f'{MAIN} [data-testid="stExpander"] summary [data-testid="stMarkdownContainer"]').filter(
        has_text=re.compile(r"^\s*Export\s*$"))


def wait_final_view(page, pattern: str, timeout_s: float) -> str:
    """`wait_done` for a page that showed no final view before its run: after the end state, wait
    for the final view's own element, then for the script to end (no quiet checks). A run without
    records draws no Export panel: then `wait_done`'s quiet checks."""
    text = wait_progress(page, pattern, timeout_s)
    try:
        final_view(page).first.wait_for(timeout=15_000)
    except PlaywrightTimeout:
        wait_idle(page, 60, quiet_checks=4)
        return text
    wait_idle(page, 60)
    return text


def pick_option(page, select, text: str, tries: int = 3) -> None:
    """Open a multiselect or selectbox (`select`, a locator) and click its option containing `text`.
    A rerun that lands while the list is open closes it (and drops what was typed); then the list
    is opened again."""
    for attempt in range(tries):
        select.click()
        page.keyboard.type(text)  # the list filters to it (a long list draws only its first rows)
        option = page.get_by_role("option").filter(has_text=text).first
        try:
            option.wait_for(timeout=10_000)
            option.click(timeout=5_000)
            return
        except PlaywrightTimeout:  # the list closed, or had not drawn the option yet
            if attempt == tries - 1:
                raise
            page.keyboard.press("Escape")
            wait_idle(page, quiet_checks=3)


def chart(page, name: str):
    """The page's chart `name` (a figure's name in the scenario's `figures()`), scrolled into view:
    a chart is drawn only on screen or near it (explorer/view/chart.py)."""
    element = page.locator(f'div.explorer-chart[data-name="{name}"]').first
    element.wait_for(state="attached", timeout=30_000)
    element.scroll_into_view_if_needed()
    return element


def open_scenario(page, app_url: str, path: str, title: str) -> None:
    page.goto(app_url + path)
    page.get_by_role("heading", name=title).first.wait_for()
    page.locator(f'{SIDEBAR} [data-testid="stSlider"]').first.wait_for()
    wait_idle(page)


