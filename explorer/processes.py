"""Processes below a process: found through /proc, ended as a tree.

A worker's rank processes run in sessions of their own (so a signal to the worker's group
does not reach them), but their parent is still the worker: that link finds them.
"""
import os
import signal
import subprocess

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
