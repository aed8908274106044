"""Process-wide settings for whoever trains: a warm worker, the CLI, bench, a test session.

Nothing in engines/ sets global state when imported; a process that is about to train
calls `configure()` once. Our models are tiny: intra-op threads cost more in
synchronisation than they gain, and they fight the UI and the other runs for the cores
(measured: a default run beside a redrawing page took 5.4 s with 2 threads, 2.6 s with 1).
`EXPLORER_TORCH_THREADS` overrides the count.
"""
import os

import torch


def configure(threads: int | None = None) -> int:
    """Set torch's intra-op thread count (default 1, or `EXPLORER_TORCH_THREADS`); returns it."""
    count = threads or int(os.environ.get("EXPLORER_TORCH_THREADS", "1"))
    torch.set_num_threads(count)
    return count


def warm_up() -> None:
    """Pay the first optimizer's one-off cost (~1 s: torch imports its compile machinery
    lazily) now, in a process that waits for work, not between a Run click and the first point."""
    parameter = torch.zeros(1, requires_grad=True)
    for optimizer in (torch.optim.SGD([parameter], lr=0.0), torch.optim.Adam([parameter], lr=0.0)):
        parameter.grad = torch.zeros(1)
        optimizer.step()


def reference_cpu_seconds(tries: int = 3) -> float:
    """The least CPU seconds of a fixed workload (200 Adam steps of a 32 → 128 → 128 → 10 MLP on a batch
    of 128): this machine's speed, now, for the kind of work the scenarios do. bench/estimates.py keeps
    it beside each scenario's fitted rates (`Scenario.rates_reference`), so that a test on another
    machine, or on this one under other load, compares a run with its estimate scaled by the two
    speeds (tests/test_estimates.py)."""
    import time
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(128, 32, generator=generator)
    targets = torch.randint(0, 10, (128,), generator=generator)
    best = float("inf")
    for _ in range(tries):
        model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                                    torch.nn.ReLU(), torch.nn.Linear(128, 10))
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        started = time.process_time()
        for _ in range(200):
            optimizer.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(inputs), targets).backward()
            optimizer.step()
        best = min(best, time.process_time() - started)
    return best
