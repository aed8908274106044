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
