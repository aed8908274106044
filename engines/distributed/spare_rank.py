"""A rank process started ahead of its run: `python -m engines.distributed.spare_rank`.

engines.distributed.launch keeps a few of these where `EXPLORER_SPARE_RANKS` is set (the page's
workers). One lowers its session's autogroup nice to 10 (each rank has a session of its own),
so that while it imports torch and waits it yields to the page and the run being drawn. It also
imports what a rank would otherwise import on its first step: DDP's constructor imports
`torch._dynamo` (~1.5-2 s of CPU here, most of a warm rank's time to its first record), FSDP2,
DTensor and the collectives page's engines. Then it
reads the run's `engines.distributed.worker` arguments, one JSON list, from stdin, returns to nice 0
where the system lets a process raise its priority again (root; otherwise it runs at 10), and
is that rank. An empty stdin (its launcher went away: its end closes the pipe) ends it.
"""
import contextlib
import json
import sys


def autogroup_nice(value: int) -> None:
    """Set Linux's autogroup nice of this process's session, where the system allows it."""
    with contextlib.suppress(OSError), open("/proc/self/autogroup", "w") as group:
        group.write(str(value))


def warm_imports() -> None:
    """Import now what a rank's first step would import (lazily, inside torch and our engines)."""
    import torch._dynamo  # noqa: F401  (DistributedDataParallel.__init__ imports it)
    import torch.distributed.fsdp  # noqa: F401
    import torch.distributed.tensor  # noqa: F401
    import torch.distributed.tensor.debug  # noqa: F401  (engines.distributed.shards' CommDebugMode)
    import engines.distributed.collective_steps  # noqa: F401  (imports engines.distributed.collectives)


def main() -> int:
    autogroup_nice(10)  # before torch is imported: the import is most of a spare's CPU
    from engines.distributed import worker as dist_worker
    warm_imports()
    line = sys.stdin.readline()
    if not line.strip():
        return 0
    autogroup_nice(0)
    return dist_worker.main(json.loads(line))


if __name__ == "__main__":
    from engines.distributed.rank_process import run_as_process
    run_as_process(main)
