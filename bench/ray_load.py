"""Load: N sessions press Run at once, through the run-backend interface the page uses (not a test; prints a table).

    python bench/ray_load.py [--sessions 10 30] [--workers 2] [--backends local ray] [--scenario ID]

For each backend — the local warm pool, and a private Ray on this machine (`EXPLORER_RAY_ADDRESS=local`)
with as many warm workers — and each N: N simulated sessions (one `RunHandle` each, session ids s0…sN-1,
as N browser tabs would) submit the scenario's default run at the same moment. Reported:

- runs completed (finished) out of submitted: must be all;
- from Run to first record and to finished: median and worst over the sessions;
- the total (first submit to last finished) against N × one run ÷ workers, where "one run" is the median of
  runs of the same config alone on the same backend (Run to finished): the ideal if the workers never
  idled and cost nothing to share. Goal: ≤ 1.3×. On a shared machine one run alone varies by 2× from one
  minute to the next, so it is timed before and after each N (three runs each time) and the median of those six is used.

The first-record times show the fair queue: sessions are served in turn, so the worst is about N ÷ workers
runs. The machine's load average is printed before and after: on a shared machine read the numbers beside it.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("EXPLORER_STORE", str(Path(tempfile.mkdtemp()) / "bench.sqlite3"))

from explorer.runs.backend import make_backend  # noqa: E402
from explorer.runs.handle import RunHandle  # noqa: E402
from scenarios import get_scenario  # noqa: E402

WAIT_S = 1800


class TimedHandle(RunHandle):
    """A page run that notes when its first record and its end arrived."""

    first_at: float | None = None
    done_at: float | None = None

    def receive(self, message: dict) -> None:
        now = time.perf_counter()
        if message["kind"] == "rows" and self.first_at is None:
            self.first_at = now
        super().receive(message)
        if message["kind"] == "done":
            self.done_at = now


def submit(backend, scenario, config, session: str) -> tuple[TimedHandle, float]:
    handle = TimedHandle(scenario, config, None, backend, session)  # no store: every press trains
    started = time.perf_counter()
    backend.submit(handle)
    return handle, started


def alone_s(backend, scenario, config, repeat: int = 3) -> list[float]:
    times = []
    for _ in range(repeat):
        handle, started = submit(backend, scenario, config, "alone")
        assert handle.join(WAIT_S), "a run alone never ended"
        times.append(handle.done_at - started)
    return times


def load(backend, scenario, config, sessions: int, workers: int) -> str:
    before = alone_s(backend, scenario, config)
    runs = [submit(backend, scenario, config, f"s{i}") for i in range(sessions)]
    for handle, _ in runs:
        handle.join(WAIT_S)
    alone = statistics.median(before + alone_s(backend, scenario, config))
    completed = sum(handle.snapshot(with_frame=False).status == "finished" for handle, _ in runs)
    first = [h.first_at - s for h, s in runs if h.first_at is not None]
    done = [h.done_at - s for h, s in runs if h.done_at is not None]
    total = max(h.done_at for h, _ in runs if h.done_at) - min(s for _, s in runs)
    ideal = sessions * alone / workers
    return (f"| {backend.name} | {sessions} | {completed}/{sessions} | {statistics.median(first):.2f} / {max(first):.2f} | "
            f"{statistics.median(done):.1f} / {max(done):.1f} | {total:.1f} | {alone:.2f} | {ideal:.1f} | "
            f"{total / ideal:.2f}× |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, nargs="+", default=[10, 30])
    parser.add_argument("--workers", type=int, default=2, help="warm workers in each backend (default 2: the cores here)")
    parser.add_argument("--backends", nargs="+", choices=("local", "ray"), default=["local", "ray"])
    parser.add_argument("--scenario", default="vanishing-gradients")
    args = parser.parse_args()
    scenario = get_scenario(args.scenario)
    config = scenario.validate({})
    print(f"{time.strftime('%Y-%m-%d %H:%M')} · {args.scenario} defaults · {os.cpu_count()} cores · "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    print("| backend | N | completed | first record, median / worst (s) | finished, median / worst (s) "
          "| total (s) | one alone (s) | N × one ÷ workers (s) | total ÷ ideal |\n|---|---|---|---|---|---|---|---|---|",
          flush=True)
    for name in args.backends:
        started = time.perf_counter()
        backend = make_backend("local" if name == "ray" else None, size=args.workers)
        try:
            assert backend.wait_ready(WAIT_S), f"{name}: the workers never warmed up ({backend.failure()})"
            ready_s = time.perf_counter() - started
            for sessions in args.sessions:
                print(load(backend, scenario, config, sessions, args.workers), flush=True)
            print(f"({name}: ready in {ready_s:.1f} s; load average {os.getloadavg()[0]:.1f})", flush=True)
        finally:
            backend.shutdown()


if __name__ == "__main__":
    main()
