"""The page on Ray: 5 real browser tabs press Run at once against `EXPLORER_RAY_ADDRESS=local` (not a test; prints a table).

    python bench/ray_tabs.py [--tabs 5] [--workers 2] [--scenario ID] [--port PORT] [--local]

One `streamlit run app.py` (its own empty store) whose runs go to a private Ray on this machine with
`--workers` warm workers, and headless Chromium (/usr/bin/chromium) with one tab per person, each on its own
seed so every run trains. Once every tab's Run is on, all press Run at the same moment. Per tab: the
first chart point and "Finished" on screen, from its own press (the page's own performance marks, as
bench/page_bench.py reads them), the queue line it showed while it waited (the place and the free workers),
and its final status line. Then: all done against N × one run ÷ workers (one run: the first tab's run
trained alone afterwards, Run to "Finished"). The load average before and after: the machine may be shared.
`--local` runs the same against the local pool, for comparison.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from page_bench import CHROMIUM, MARKS, free_port, run_button, status, wait_for  # noqa: E402

from explorer.runs.processes import end_tree  # noqa: E402

TIMEOUT_S = 900


def healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def opened(context, base: str, scenario_id: str, seed: int):
    tab = context.new_page()
    tab.goto(f"{base}/{scenario_id}?seed={seed}")
    wait_for(lambda: run_button(tab).count() and run_button(tab).is_enabled(), every_s=0.3)  # Ray connected, warm
    return tab


PRESS = """at => { window.__lines = [];
  const button = [...document.querySelectorAll('[data-testid="stMain"] button')].find(b => b.innerText.trim() === 'Run');
  setTimeout(() => { window.__marks = {clicked: performance.now()}; button.click(); }, at - Date.now());
  setInterval(() => { const line = document.querySelector('[data-testid="explorer-progress"], [data-testid="stProgress"]');
    const text = line ? line.textContent.trim().replace(/ \\([0-9.]+ s\\)$/, '') : '';
    if (/queued/.test(text) && !window.__lines.includes(text)) window.__lines.push(text); }, 50); }"""


def press_all(tabs) -> list[dict]:
    """Every tab presses Run at the same moment (a timer in each, on the shared clock, 1 s ahead); each then
    records the queue lines it shows until its run ends."""
    at = time.time() * 1000 + 1000 + 200 * len(tabs)
    for tab in tabs:
        tab.evaluate(PRESS, at)
    for tab in tabs:
        wait_for(lambda: "ended" in (tab.evaluate("() => window.__marks") or {}), TIMEOUT_S, every_s=0.3)
    return [tab.evaluate("() => ({clicked: performance.timeOrigin + window.__marks.clicked, first: window.__marks.first "
                         "=== undefined ? null : performance.timeOrigin + window.__marks.first, ended: "
                         "performance.timeOrigin + window.__marks.ended, lines: window.__lines})") for tab in tabs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tabs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scenario", default="vanishing-gradients")
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--local", action="store_true", help="the local pool instead of a private Ray")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright
    tmp, port = Path(tempfile.mkdtemp()), args.port or free_port()
    env = dict(os.environ, EXPLORER_STORE=str(tmp / "runs.sqlite3"), EXPLORER_RAY_ADDRESS="" if args.local else "local",
               EXPLORER_WORKERS=str(args.workers), STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                               "--server.headless", "true"], cwd=ROOT, env=env, stdout=open(tmp / "server.log", "w"),
                              stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://localhost:{port}"
    where = "the local pool" if args.local else "a private Ray"
    print(f"{time.strftime('%Y-%m-%d %H:%M')} · {args.tabs} tabs · {args.scenario} · {where}, {args.workers} "
          f"workers · {os.cpu_count()} cores · load average before {os.getloadavg()[0]:.1f}", flush=True)
    try:
        wait_for(lambda: healthy(base), 120, every_s=0.5)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.add_init_script(MARKS)
            started = time.perf_counter()
            tabs = [opened(context, base, args.scenario, 3000 + i) for i in range(args.tabs)]
            print(f"every tab's Run on after {time.perf_counter() - started:.1f} s (the workers warm)", flush=True)
            marks = press_all(tabs)
            finals = [status(tab) for tab in tabs]
            alone_tab = opened(context, base, args.scenario, 4000)
            alone = press_all([alone_tab])[0]
            browser.close()
    finally:
        end_tree(server, grace_s=15)  # the server ends its Ray driver, which shuts the private Ray down
    print("| tab | first plot (s) | finished (s) | queue lines seen | final status |\n|---|---|---|---|---|")
    for i, (mark, final) in enumerate(zip(marks, finals)):
        first = f"{(mark['first'] - mark['clicked']) / 1000:.2f}" if mark["first"] else "none"
        lines = "; ".join(line.split(" — ")[-1][:60] for line in mark["lines"][:2]) or "(started at once)"
        print(f"| {i + 1} | {first} | {(mark['ended'] - mark['clicked']) / 1000:.1f} | {lines} | {final[:60]} |")
    together = (max(m["ended"] for m in marks) - min(m["clicked"] for m in marks)) / 1000
    one = (alone["ended"] - alone["clicked"]) / 1000
    ideal = args.tabs * one / args.workers
    first = f"{(alone['first'] - alone['clicked']) / 1000:.2f} s" if alone["first"] else "none"
    print(f"all {args.tabs} done in {together:.1f} s; one run alone {one:.1f} s (first plot {first}); "
          f"N × one ÷ workers {ideal:.1f} s; "
          f"ratio {together / ideal:.2f}×; load average after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
