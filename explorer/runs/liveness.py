"""Whether a run written as it goes is still going: `running`, or `incomplete` for good.

A watched run's row (explorer/runs/growing.py) names, in its summary, the process that writes it
(host and pid), and its writer beats a heartbeat into `duration_s` at least every `HEARTBEAT_S`.
A reader that finds the writer gone, or silent for `SILENT_S`, reads the run as `incomplete`:
its script was killed (SIGKILL, a power cut) and the run will never be finished.
"""
import os
import socket
import time
from typing import Any

RUNNING, INCOMPLETE = "running", "incomplete"
LIVE = (RUNNING, INCOMPLETE)  # the statuses only a run written as it goes can have
HEARTBEAT_S = 5.0   # a writer beats at least this often, records or not
SILENT_S = 60.0     # a running row not beaten for this long is read as incomplete


def writer_identity() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def settled(status: str, summary: dict[str, Any], created_at: float, duration_s: float,
            now: float | None = None) -> str:
    """The status a reader should see: `running` only while its writer lives and beats."""
    if status != RUNNING:
        return status
    writer = summary.get("writer") or {}
    now = time.time() if now is None else now
    if now - (created_at + duration_s) > SILENT_S:
        return INCOMPLETE
    if writer.get("host") == socket.gethostname() and not _alive(writer.get("pid")):
        return INCOMPLETE
    return RUNNING


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True
