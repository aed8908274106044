"""The page row: a real browser drives each scenario's default run (not a test; prints a table).

    python bench/page_bench.py [--scenario ID ...] [--repeat 3]

One `streamlit run app.py` (its own empty store), headless Chromium (/usr/bin/chromium), and a
headless warm worker of its own for the same configs without the page, interleaved: page run,
headless run, page run, ... (each repeat with a new seed, so every run trains). Per scenario:

- first plot: from the Run press (the page's own pointerdown) to the first chart drawn with data in
  it (warm pool: for a distributed scenario, with the rank processes the page has its pool start
  while it is read; the headless worker gets the same, so both runs start warm);
- page / headless: the run's time in the page (Run press to "Finished" on screen) over the
  headless worker's `Scenario.run` time of the same config (medians); "in the worker" is the
  page's worker's own `Scenario.run` time (the status line's "in … s"): training slowed by
  what runs beside it, against the time around training (handing the run over, the last redraw);
- longest task: the browser main thread's longest task during the run (PerformanceObserver
  `longtask`; 50 ms is the smallest it reports);
- expander: from the click on "The mechanism" mid-run to the frame that shows it open;
- stored shown: from the press that moves the seed back to a stored config to the "Served from the
  run store" line and the charts in view drawn (charts are drawn only on screen or near it);
- server CPU: the Streamlit process's CPU time over the run's wall time (the view's cost;
  training runs in the workers).

Then three tabs press Run at once (three seeds of the first scenario): all done, over the
three runs one after another headless. The load average is printed before and after: the
machine is shared, so read the numbers beside it.
"""
import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from explorer.runs.handle import RunHandle  # noqa: E402
from explorer.runs.pool import WorkerPool  # noqa: E402
from explorer.runs.processes import cpu_seconds, descendants, wait_quiet  # noqa: E402
from explorer.runs.worker import SPARE_RANKS  # noqa: E402
from scenarios import all_scenarios, get_scenario  # noqa: E402

CHROMIUM = os.environ.get("PLAYWRIGHT_CHROMIUM_EXECUTABLE", "/usr/bin/chromium")
LONGTASKS = """window.__long = []; new PerformanceObserver(list => { for (const e of list.getEntries())
  window.__long.push({at: e.startTime, ms: e.duration}); }).observe({type: 'longtask', buffered: true});"""
# The page marks its own moments (performance.now()), so the bench reads them a few times a second
# instead of querying the page every few ms (which took the browser up to 0.7 s of CPU per run).
MARKS = """window.__marks = {};
new MutationObserver(() => {
  const marks = window.__marks;
  if (marks.clicked === undefined) return;
  if (marks.first === undefined && [...document.querySelectorAll('div.explorer-chart')].some(c => c.dataset.drawn &&
      (c._fullData || []).some(t => ['x', 'y', 'z', 'values'].some(k => t[k] && t[k].length)))) {
    marks.first = performance.now();
  }
  const line = document.querySelector('[data-testid="stProgress"], [data-testid="explorer-progress"]');
  if (marks.ended === undefined && line && /^\\s*(Finished|Failed|Stopped|Not run)/.test(line.textContent)) {
    marks.ended = performance.now();
  }
  if (marks.served === undefined && line && /^\\s*Served from the run store/.test(line.textContent)) {
    marks.served = performance.now();
  }
}).observe(document, {subtree: true, childList: true, characterData: true, attributes: true});"""
# Charts are drawn only on screen or near it (explorer/view/chart.py): "drawn" is every chart in view drawn.
IN_VIEW = """c => { const box = c.getBoundingClientRect(), main = document.querySelector('[data-testid="stMain"]');
  const area = main ? main.getBoundingClientRect() : {top: 0, bottom: innerHeight};
  return box.width > 0 && box.bottom > area.top && box.top < area.bottom; }"""
ALL_DRAWN = f"""() => {{ const cs = [...document.querySelectorAll('div.explorer-chart')].filter({IN_VIEW});
  return cs.length > 0 && cs.every(c => c.dataset.drawn === c.dataset.version); }}"""
TIMEOUT_S = 300


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def status(page) -> str:
    bar = page.locator('[data-testid="stProgress"], [data-testid="explorer-progress"]')
    return bar.first.inner_text() if bar.count() else ""


def wait_for(condition, timeout_s: float = TIMEOUT_S, every_s: float = 0.01) -> float:
    """Poll until `condition()`; return the time.perf_counter() at which it held."""
    deadline = time.perf_counter() + timeout_s
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError("timed out")
        time.sleep(every_s)
    return time.perf_counter()


def open_page(page, base: str, scenario_id: str, seed: int) -> None:
    page.goto(f"{base}/{scenario_id}?seed={seed}")
    page.locator('[data-testid="stSidebar"] [data-testid="stWidgetLabel"]').first.wait_for()
    wait_for(lambda: page.get_by_text("Starting the workers").count() == 0, every_s=0.2)
    wait_for(lambda: page.evaluate("() => !!window.Plotly"), every_s=0.1)  # fetched while the page is read
    time.sleep(0.5)


def run_button(page):
    return page.locator('[data-testid="stMain"]').get_by_role("button", name="Run", exact=True)


def expander_open_ms(page) -> float | None:
    """Click "The mechanism" (closed first) as a person would; ms to the frame showing it open."""
    summary = page.locator('[data-testid="stExpander"] summary').filter(has_text="The mechanism")
    if not summary.count():
        return None
    is_open = lambda: summary.evaluate("s => s.parentElement.open")  # noqa: E731
    try:  # the page closes it at Run, with an animation: a click during that one would open it again
        wait_for(lambda: not is_open(), 1.5, every_s=0.05)
    except TimeoutError:
        summary.click()  # open still (a run started another way): close it as a person would
        try:
            wait_for(lambda: not is_open(), 3, every_s=0.05)
        except TimeoutError:
            return None
    time.sleep(0.1)
    if is_open() or not status(page).startswith("Running"):
        return None  # still open, or the run ended meanwhile: no mid-run reading
    page.evaluate("""s => { window.__opened = null; const d = s.parentElement;
      s.addEventListener('pointerdown', e => { window.__clickAt = e.timeStamp; }, {once: true, capture: true});
      const opened = () => { if (!d.open) return;  // a toggle that closed it is not the reading
        d.removeEventListener('toggle', opened); requestAnimationFrame(() => { window.__opened = performance.now(); }); };
      d.addEventListener('toggle', opened); }""", summary.element_handle())
    summary.click()
    try:
        wait_for(lambda: page.evaluate("() => window.__opened !== null"), 10)
    except TimeoutError:  # the page was redrawn meanwhile (the run ended): no reading
        return None
    return page.evaluate("() => window.__opened - window.__clickAt")


def wait_idle(page, quiet_s: float = 0.6) -> None:
    """Until no script run has been in progress for `quiet_s` (stApp's data-test-script-state)."""
    quiet_since, deadline = time.perf_counter(), time.perf_counter() + TIMEOUT_S
    while time.perf_counter() - quiet_since < quiet_s:
        if page.locator('[data-testid="stApp"]').get_attribute("data-test-script-state") == "running":
            quiet_since = time.perf_counter()
        if time.perf_counter() > deadline:
            raise TimeoutError("the page never went idle")
        time.sleep(0.1)


def wait_workers_quiet(server_pid: int, timeout_s: float = 60) -> None:
    """Until the server's workers (and anything else below it) idle: a worker still importing
    torch, or a run not yet ended, would share the cores with the run measured next."""
    wait_quiet(lambda: descendants(server_pid), timeout_s, idle_cpu_s=0.025)


def headless_ready(headless: WorkerPool, ranks: int) -> None:
    """As the page does while it is read: a distributed run's rank processes started ahead and
    idle, so the headless run is timed as warm as the page's."""
    headless.prepare(ranks)
    wanted = min(ranks, SPARE_RANKS)
    wait_for(lambda: sum(len(descendants(worker)) for worker in headless.pids()) >= wanted, 10, every_s=0.05)
    wait_quiet(lambda: [p for worker in headless.pids() for p in (worker, *descendants(worker))], 60,
               idle_cpu_s=0.025)


def page_run(page, base: str, scenario, seed: int, server_pid: int) -> dict:
    open_page(page, base, scenario.id, seed)
    wait_workers_quiet(server_pid)
    cpu_before = cpu_seconds(server_pid)
    page.evaluate("""b => { window.__long = []; window.__marks = {clicked: performance.now()};  // then the press itself
      b.addEventListener('pointerdown', e => { window.__marks.clicked = e.timeStamp; }, {once: true, capture: true}); }""",
                  run_button(page).element_handle())
    run_button(page).click()
    marks = lambda: page.evaluate("() => window.__marks")  # noqa: E731
    wait_for(lambda: "first" in marks() or "ended" in marks(), every_s=0.1)
    expander = expander_open_ms(page) if status(page).startswith("Running") else None
    wait_for(lambda: "ended" in marks(), every_s=0.2)
    cpu = cpu_seconds(server_pid) - cpu_before
    try:  # a run shorter than the first live draw: its first plot is the final view's
        wait_for(lambda: "first" in marks(), 30, every_s=0.2)
    except TimeoutError:
        pass
    times = marks()
    page_s = (times["ended"] - times["clicked"]) / 1000
    first = (times["first"] - times["clicked"]) / 1000 if "first" in times else None
    longest = max((t["ms"] for t in page.evaluate("() => window.__long")), default=0.0)
    text = status(page)
    trained = re.search(r" in ([0-9.]+) s", text)  # the worker's own time for Scenario.run
    return {"first_s": first, "page_s": page_s, "longest_ms": longest, "expander_ms": expander,
            "server_cpu": cpu / max(page_s, 1e-3), "worker_s": float(trained.group(1)) if trained else None,
            "status": text}


def stored_shown_s(page) -> float | None:
    """Move the seed field up (a new config: auto-run trains it), then back (stored: shown at once).
    From the press (the page's own pointerdown time) to the "Served from the run store" line and
    the last chart in view drawn with the stored run's figure, whichever comes later."""
    plus = page.locator('[data-testid="stSidebar"] [data-testid="stNumberInputStepUp"]').first
    minus = page.locator('[data-testid="stSidebar"] [data-testid="stNumberInputStepDown"]').first
    if not plus.count():
        return None
    wait_idle(page)  # the final view of the run just measured is built (a person reads it before moving on)
    before = status(page)
    plus.click()
    wait_for(lambda: status(page) != before and status(page).startswith("Finished"), every_s=0.2)
    wait_for(lambda: page.evaluate(ALL_DRAWN), every_s=0.2)
    time.sleep(0.5)
    page.evaluate("""b => b.addEventListener('pointerdown', e => { window.__marks = {clicked: e.timeStamp}; },
                                           {once: true, capture: true})""", minus.element_handle())
    minus.click()
    wait_for(lambda: page.evaluate("() => window.__marks.served !== undefined"), 60, every_s=0.1)
    wait_for(lambda: page.evaluate(ALL_DRAWN), 30, every_s=0.1)
    time.sleep(0.3)  # a draw that started before the check
    marks = page.evaluate(f"""() => {{ const inView = new Set([...document.querySelectorAll('div.explorer-chart')]
        .filter({IN_VIEW}).map(c => c.dataset.name));
      const ends = (window.__explorerDraws || []).filter(d => d.at > window.__marks.clicked && inView.has(d.name))
        .map(d => d.at + d.ms);
      return {{...window.__marks, drawn: Math.max(window.__marks.served, ...ends)}}; }}""")
    return (marks["drawn"] - marks["clicked"]) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", action="append", help="only these scenario ids (repeatable)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    scenarios = [s for s in all_scenarios() if not args.scenario or s.id in args.scenario]
    tmp = Path(tempfile.mkdtemp())
    port = free_port()
    env = dict(os.environ, EXPLORER_STORE=str(tmp / "runs.sqlite3"), STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                               "--server.headless", "true"], cwd=ROOT, env=env, stdout=open(tmp / "server.log", "w"),
                              stderr=subprocess.STDOUT, start_new_session=True)
    headless = WorkerPool(size=1)
    print(f"load average before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} "
          f"({os.cpu_count()} cores)")
    rows = []
    try:
        headless.wait_ready(TIMEOUT_S)
        base = f"http://localhost:{port}"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.add_init_script(LONGTASKS + MARKS)
            page = context.new_page()
            for scenario in scenarios:
                rows.append(measure(page, base, scenario, headless, server.pid, args.repeat))
            three = three_tabs(context, base, scenarios[0], headless)
            browser.close()
    finally:
        headless.shutdown()
        server.terminate()
        server.wait(30)
    print(f"load average after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    header = ("scenario", "first plot (s)", "page / headless", "page run (s)", "in the worker (s)", "headless (s)",
              "longest task (ms)",
              "expander (ms)", "stored shown (s)", "server CPU")
    table = [header] + rows
    widths = [max(len(str(r[i])) for r in table) for i in range(len(header))]
    print(f"median of {args.repeat}, warm pool")
    for i, row in enumerate(table):
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    print(three)


def measure(page, base: str, scenario, headless: WorkerPool, server_pid: int, repeat: int) -> tuple:
    pages, alone = [], []
    for i in range(repeat):
        seed = 1000 + i
        pages.append(page_run(page, base, scenario, seed, server_pid))
        print(f"  {scenario.id} seed {seed}: " + ", ".join(f"{k} {v:.2f}" for k, v in pages[-1].items()
                                                        if isinstance(v, float)), file=sys.stderr, flush=True)
        config = scenario.validate({"seed": seed})
        headless_ready(headless, scenario.rank_processes(config))
        handle = RunHandle.start(scenario, config, pool=headless)
        handle.join(TIMEOUT_S)
        alone.append(handle.train_seconds or float("nan"))
        print(f"  {scenario.id} seed {seed}: headless {alone[-1]:.2f}", file=sys.stderr, flush=True)
    if any(not p["status"].startswith("Finished") or p["first_s"] is None for p in pages):
        why = pages[-1]["status"][:50] if not pages[-1]["status"].startswith("Finished") else "no chart drawn"
        return (scenario.id, why, "", "", "", "", "", "", "", "")
    shown = stored_shown_s(page)
    med = lambda key: statistics.median(p[key] for p in pages if p[key] is not None)  # noqa: E731
    page_s, alone_s = med("page_s"), statistics.median(alone)
    expanders = [p["expander_ms"] for p in pages if p["expander_ms"] is not None]
    return (scenario.id, f"{med('first_s'):.2f}", f"{page_s / alone_s:.2f}", f"{page_s:.2f}", f"{med('worker_s'):.2f}",
            f"{alone_s:.2f}",
            f"{max(p['longest_ms'] for p in pages):.0f}", f"{max(expanders):.0f}" if expanders else "n/a",
            f"{shown:.2f}" if shown is not None else "n/a", f"{med('server_cpu'):.0%}")


def three_tabs(context, base: str, scenario, headless: WorkerPool) -> str:
    """Three tabs press Run at once (seeds 2000-2002): all done, against the same three headless one after another."""
    tabs = [context.new_page() for _ in range(3)]
    for i, tab in enumerate(tabs):
        open_page(tab, base, scenario.id, 2000 + i)
    for tab in tabs:
        tab.evaluate("() => { window.__marks = {clicked: performance.now()}; }")
        run_button(tab).click()
    for tab in tabs:
        wait_for(lambda: "ended" in tab.evaluate("() => window.__marks"), every_s=0.2)
    # From the first press to the last "Finished", each on its tab's own clock (epoch ms).
    marks = [tab.evaluate("() => ({clicked: performance.timeOrigin + window.__marks.clicked, "
                          "ended: performance.timeOrigin + window.__marks.ended})") for tab in tabs]
    together = (max(m["ended"] for m in marks) - min(m["clicked"] for m in marks)) / 1000
    alone = 0.0
    for i in range(3):
        headless_ready(headless, scenario.rank_processes(scenario.validate({})))
        handle = RunHandle.start(scenario, scenario.validate({"seed": 2000 + i}), pool=headless)
        handle.join(TIMEOUT_S)
        alone += handle.train_seconds
    return (f"three tabs at once ({scenario.id}): all done in {together:.2f} s; the three one after another "
            f"headless: {alone:.2f} s; ratio {together / alone:.2f}")


if __name__ == "__main__":
    main()
