"""Fit the vanishing-gradients cost model (`scenarios.vanishing_gradients.arm_seconds`) on this machine.

    python bench/calibrate.py

Trains one arm at several (depth, width) and two lengths (every step logged, and the
page's cadence of at most 100 logs), on one intra-op thread as a worker trains, and fits
a run's seconds as steps·(k0 + k1·depth + k2·depth·width²) + logs·depth·k3 (the probes).
Prints the fit and each measurement beside it; paste the constants into
`scenarios/vanishing_gradients/__init__.py` when the machine is quiet. Not a test.
"""
import itertools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engines.loop.runtime import configure  # noqa: E402
from scenarios import get_scenario  # noqa: E402

LENGTHS = (30, 400)  # every step logged; one step in four logged


def main() -> None:
    configure()
    scenario = get_scenario("vanishing-gradients")
    rows, times, labels = [], [], []
    for depth, width, steps in itertools.product((4, 16, 48), (32, 128, 256), LENGTHS):
        config = scenario.validate({"depth": depth, "width": width, "steps": steps, "contrast": "none"})
        logs = -(-steps // max(1, -(-steps // 100)))
        rows.append([steps, steps * depth, steps * depth * width * width, logs * depth])
        times.append(min(_timed(scenario, config) for _ in range(2)))
        labels.append(f"depth {depth:3d} width {width:4d} steps {steps:4d}")
    coef, *_ = np.linalg.lstsq(np.array(rows, dtype=float), np.array(times), rcond=None)
    print("k0={:.3e} k1={:.3e} k2={:.3e} k3={:.3e}".format(*coef))
    for label, row, measured in zip(labels, rows, times):
        print(f"{label}: {measured:7.3f} s measured, {coef @ np.array(row, dtype=float):7.3f} s fitted")


def _timed(scenario, config) -> float:
    started = time.perf_counter()
    scenario.run(config)
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
