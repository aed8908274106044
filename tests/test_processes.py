"""Process trees are found and ended through psutil: nothing of ours reads /proc, so Stop and
shutdown end a worker and what it started on platforms without it (tests/test_pool.py runs Stop and
shutdown with /proc hidden too)."""
import subprocess
import sys

import psutil

from explorer.runs.processes import cpu_seconds, descendants, end_tree
from no_proc import hide_proc

# A parent that starts a child in a session of its own (as a worker starts rank processes), which
# starts a grandchild; it prints both ids and waits for ever.
TREE = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", '''
import subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(grandchild.pid, flush=True)
time.sleep(600)
'''], stdout=subprocess.PIPE, text=True, start_new_session=True)
print(child.pid, child.stdout.readline().strip(), flush=True)
time.sleep(600)
"""


def ended(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # ended, not yet reaped
    except psutil.NoSuchProcess:
        return True


def test_a_tree_is_found_and_ended_with_proc_hidden(monkeypatch) -> None:
    """descendants() finds a child in another session and its child; end_tree() ends all three."""
    refused = hide_proc(monkeypatch)
    parent = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    try:
        child, grandchild = map(int, parent.stdout.readline().split())
        found = descendants(parent.pid)
        assert set(found) == {child, grandchild}, f"found {found}, started {child} and {grandchild}"
        assert cpu_seconds(parent.pid) > 0.0, "a started interpreter has used some CPU"
        end_tree(parent, grace_s=0.2)
        assert parent.poll() is not None
        gone = psutil.wait_procs([p for p in map(psutil.Process, (child, grandchild)) if not ended(p.pid)], timeout=30)[1]
        assert not gone, f"still running after end_tree: {gone}"
    finally:
        parent.kill()
        parent.wait()
    assert not refused, f"read /proc itself: {refused}"
    assert descendants(parent.pid) == [] and cpu_seconds(parent.pid) == 0.0, "an ended process has nothing below it"
