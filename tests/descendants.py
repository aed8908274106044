"""Rank processes a test started, however deep (a CLI's, a page worker's), and no one else's.

Other runs on the machine (other test sessions, a page) start `engines.distributed.worker` too, so
counting them by name machine-wide fails whenever one is running. A test instead puts a
fresh tag in its environment; every process it starts inherits it (engines.distributed.launch
passes the environment on), orphans included, and only processes carrying the tag count.
"""
import os
import time
import uuid
from pathlib import Path


def tag_environment(monkeypatch) -> str:
    """Mark this test's descendants; returns the tag."""
    tag = uuid.uuid4().hex
    monkeypatch.setenv("EXPLORER_TEST_TAG", tag)
    return tag


EXEC_WAIT_S = 30.0  # at most, for a process caught inside exec (its command line not written yet)


def _command_line(entry: Path) -> bytes:
    """A process's command line. A child of this process caught in exec — past the point where
    Popen returns, before the kernel writes the new program's arguments — reads empty: wait for
    that to end (an event; under load it can take a while) rather than miss it. Other processes
    with an empty one (kernel threads, zombies) are read as they are."""
    deadline = time.monotonic() + EXEC_WAIT_S
    while True:
        command = (entry / "cmdline").read_bytes()
        state, parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
        if command or state == "Z" or int(parent) != os.getpid() or time.monotonic() > deadline:
            return command
        time.sleep(0.01)


def ranks_alive(tag: str) -> list[int]:
    """Process ids of live rank processes (`engines.distributed.worker`, or a spare waiting to be one) that carry `tag`."""
    marker = f"EXPLORER_TEST_TAG={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = _command_line(entry)
            if b"engines.distributed.worker" not in command and b"engines.distributed.spare_rank" not in command:
                continue
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except (OSError, IndexError):  # gone meanwhile, or another user's
            continue
    return found

