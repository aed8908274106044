"""Processes below a process: found through /proc, ended as a tree.

A worker's rank processes run in sessions of their own (so a signal to the worker's group
does not reach them), but their parent is still the worker: that link finds them.
"""
import os
import signal
import subprocess
import time
from collections.abc import Callable

TERM_GRACE_S = 0.3   # SIGTERM, then this long before SIGKILL


def descendants(pid: int) -> list[int]:
    """Every living process below `pid` (children, theirs, ...), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cpu_seconds(pid: int) -> float:
    """The user + system CPU time `pid` has used, from /proc (0.0 once it has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


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
    """SIGTERM a worker (it unwinds its run and reaps its rank processes), then SIGKILL it and
    everything it started that is still there. Its children are listed first: once it is
    gone they would no longer be its children."""
    if proc.poll() is not None:
        return
    below = descendants(proc.pid)
    _signal(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        below += descendants(proc.pid)
        _signal(proc.pid, signal.SIGKILL)
        proc.wait()
    for pid in below:
        _signal(pid, signal.SIGKILL)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


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
