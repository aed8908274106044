"""Benchmarks that print a table (not tests: nothing here asserts on wall time).

    python bench/bench.py [--repeat 3]

Per scenario, on this machine:
- default run: wall time of `scenario.run(defaults)`;
- first record: from handing a run to a warm worker (as the page does) to its first row;
- probe overhead: the instrumented loop with probes over the same loop without them
  (same model, data, steps and logging cadence; target <= 1.10);
- stored run shown: look the config up in the store, load its rows, summarize and build
  every figure — what the page does when a config was already run.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("EXPLORER_STORE", str(Path(tempfile.mkdtemp()) / "bench.sqlite3"))

import torch  # noqa: E402

from engines.loop.probes import LayerProbe  # noqa: E402
from engines.loop.runtime import configure  # noqa: E402
from engines.loop.training import log_every_for, supervised, train  # noqa: E402
from engines.supervised.data import TeacherTask  # noqa: E402
from engines.supervised.models import DeepMLP  # noqa: E402
from explorer.runs.handle import RunHandle  # noqa: E402
from explorer.runs.pool import WorkerPool  # noqa: E402
from explorer.runs.serving import save_result, stored_result  # noqa: E402
from explorer.runs.store import RunStore  # noqa: E402
from scenarios import all_scenarios  # noqa: E402
from scenarios.vanishing_gradients import BATCH, N_CLASSES, N_FEATURES, Config  # noqa: E402


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def first_record_s(scenario, config, pool: WorkerPool) -> float:
    started = time.perf_counter()
    handle = RunHandle.start(scenario, config, pool=pool)
    handle.wait_for_first_record(300)
    elapsed = time.perf_counter() - started
    handle.stop()
    handle.join()
    return elapsed


def vanishing_loop(probed: bool) -> None:
    """The default vanishing-gradients arm, with or without its probes."""
    config = Config()
    model = DeepMLP(N_FEATURES, config.width, config.depth, N_CLASSES, activation=config.activation,
                    init=config.init, seed=0)
    probe = LayerProbe(list(model.linears), list(model.activations)) if probed else None
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)
    for _ in train(model, optimizer, TeacherTask(N_FEATURES, N_CLASSES, 1).batches(BATCH),
                   supervised(model, torch.nn.functional.cross_entropy), config.steps, probe=probe,
                   log_every=log_every_for(config.steps)):
        pass
    if probe is not None:
        probe.close()


PROBE_LOOPS = {"vanishing-gradients": vanishing_loop}


def probe_overhead(loop, repeat: int) -> float:
    """Best probed time over best bare time, measured alternately so drift hits both alike."""
    bare, probed = [], []
    for _ in range(repeat):
        bare.append(median_time(lambda: loop(False), 1))
        probed.append(median_time(lambda: loop(True), 1))
    return min(probed) / min(bare)


def stored_show_s(scenario, config, store: RunStore) -> float:
    started = time.perf_counter()
    stored = stored_result(store, scenario, config)
    frame = store.frame(stored.run_id)
    scenario.explain(frame, config)
    scenario.figures(frame, config)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scenario", action="append", help="only these scenario ids (repeatable)")
    args = parser.parse_args()
    configure()  # the threads a worker trains with
    store = RunStore()
    pool = WorkerPool(size=1)
    pool.wait_ready(300)
    rows = []
    for scenario in all_scenarios():
        if args.scenario and scenario.id not in args.scenario:
            continue
        config = scenario.validate({})
        run_s = median_time(lambda: scenario.run(config), args.repeat)
        first_s = statistics.median(first_record_s(scenario, config, pool) for _ in range(args.repeat))
        loop = PROBE_LOOPS.get(scenario.id)
        if loop:
            overhead = f"{probe_overhead(loop, max(5, 2 * args.repeat)):.2f}"
        else:
            overhead = "n/a"
        result = scenario.run(config)
        save_result(store, scenario, config, result.status, result.frame, result.summary, [], result.duration_s)
        show_s = median_time(lambda: stored_show_s(scenario, config, store), args.repeat)
        rows.append((scenario.id, f"{run_s:.2f}", f"{first_s * 1000:.0f}", overhead, f"{show_s * 1000:.0f}"))
    pool.shutdown()
    header = ("scenario", "default run (s)", "first record (ms)", "probe overhead (x)", "stored run shown (ms)")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op thread(s), {os.cpu_count()} cores, "
          f"median of {args.repeat}")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths)) + " |")


if __name__ == "__main__":
    main()
