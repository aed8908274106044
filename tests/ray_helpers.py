"""For the Ray tests: whether they can run here, and that nothing they started outlives them.

Ray is the optional extra `[cluster]`. Outside CI a machine without it skips the Ray tests with
the reason; under CI (env CI set, as for the browser tests) requirements-dev.txt installs it, so a
missing ray is a failure. Processes are this test process's own descendants (a private Ray lives
under its driver process; a `Cluster`'s nodes under this process), never counted machine-wide.
"""
import os

import psutil
import pytest

WAIT_S = 300  # generous: Ray starts ~6 processes on a shared 2-core machine; nothing asserts wall time


def need_ray() -> None:
    try:
        import ray  # noqa: F401
    except ImportError as error:
        if os.environ.get("CI"):
            pytest.fail(f"the Ray tests must run in CI, but ray is not importable ({error}): "
                        "pip install -r requirements-dev.txt", pytrace=False)
        pytest.skip("ray is not installed (the optional extra: pip install '.[cluster]' or -r requirements-cluster.txt)")


def descendants() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


def new_descendants_end(before: set[int], timeout: float = 60.0) -> list[str]:
    """Wait (on the processes themselves) for every descendant started since `before` to end; those left, named."""
    started = []
    for pid in descendants() - before:
        try:
            started.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(started, timeout=timeout)
    left = []
    for proc in alive:
        try:
            left.append(f"{proc.pid} {' '.join(proc.cmdline())[:120]}")
        except psutil.Error:
            pass
    return left
