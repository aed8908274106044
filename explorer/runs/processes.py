"""Processes below a process: found and ended as a tree, on every platform (through psutil).

A worker's rank processes run in sessions of their own (so a signal to the worker's group
does not reach them), but their parent is still the worker: that link finds them. psutil reads
it from wherever the platform keeps it (/proc on Linux, sysctl on macOS, the toolhelp snapshot
on Windows), and ends a process only if it is still the one found (the start time is checked),
so an ended child whose id was reused is never signalled.
"""
import os
import signal
import subprocess
import time
from collections.abc import Callable

import psutil

TERM_GRACE_S = 0.3   # SIGTERM, then this long before SIGKILL
CRASH_TAIL_CHARS = 4000


def _below(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:  # ended, or not ours to look at
        return []


def descendants(pid: int) -> list[int]:
    """Every living process below `pid` (children, theirs, ...)."""
    return [child.pid for child in _below(pid)]


def cpu_seconds(pid: int) -> float:
    """The user + system CPU time `pid` has used (0.0 once it has ended)."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


def wait_quiet(pids: Callable[[], list[int]], timeout_s: float, idle_cpu_s: float = 0.05,
               window_s: float = 0.5) -> dict[int, float] | None:
    """Until the processes `pids()` lists (at least one) use under `idle_cpu_s` of CPU together in
    `window_s`: None once they do, else (after `timeout_s`) the last window's CPU per process."""
    deadline = time.monotonic() + timeout_s
    used: dict[int, float] = {}
    while time.monotonic() < deadline:
        before = {pid: cpu_seconds(pid) for pid in pids()}
        time.sleep(window_s)
        used = {pid: round(cpu_seconds(pid) - cpu, 2) for pid, cpu in before.items()}
        if before and sum(used.values()) < idle_cpu_s:
            return None
    return used


def end_tree(proc: subprocess.Popen, grace_s: float = TERM_GRACE_S) -> None:
    """Terminate a worker (it unwinds its run and reaps its rank processes), then kill it and
    everything it started that is still there. Its children are listed first: once it is
    gone they would no longer be its children."""
    if proc.poll() is not None:
        return
    below = _below(proc.pid)
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        below += _below(proc.pid)
        proc.kill()
        proc.wait()
    for child in below:
        try:
            child.kill()
        except psutil.Error:  # already gone
            pass


def crash_line(stderr) -> str:
    """The last error line a dead worker wrote (its traceback's last line, usually)."""
    try:
        stderr.seek(0, os.SEEK_END)
        stderr.seek(max(0, stderr.tell() - CRASH_TAIL_CHARS))
        lines = [line.strip() for line in stderr.read().splitlines() if line.strip()]
    except (OSError, ValueError):
        lines = []
    errors = [line for line in lines if "Error" in line or "Exception" in line or "Killed" in line]
    return (errors or lines or ["it wrote nothing before it ended"])[-1]
def how_it_ended(code: int) -> str:
    """A process's end in words: `exit code 1`, or the signal that killed it by name (a negative
    return code), with the usual sender of SIGKILL named."""
    if code >= 0:
        return f"exit code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f"killed by signal {-code}"
    return f"killed by {name}" + (" (sent by hand or by the kernel's out-of-memory killer)" if name == "SIGKILL" else "")
