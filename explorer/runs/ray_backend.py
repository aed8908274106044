"""The Ray run backend, page side: runs train on a Ray cluster, records come back to this process.

`RayBackend(address)` implements the run-backend interface (explorer/runs/backend.py) for the
page, the CLI (`--ray ADDRESS`) and the API. It holds the fair queue and the run handles; the
Ray work itself happens in a driver process of its own (`python -m explorer.runs.ray_driver`,
explorer/runs/ray_driver.py), which streams each run's messages back on stdout, in the local
worker's protocol. Why a process: Ray ends a driver that has lost its cluster's control store
(its core worker exits), and `ray.init` to an address nobody answers waits for minutes. The page
must outlive both, so it never imports ray: it ends the driver after `connect_timeout_s`, and
when the driver dies it fails the runs in flight with the reason, says so, and offers the local
pool. The run store stays here: the page's `RunHandle` saves each run when its `done` arrives;
nothing on the cluster writes it.

Versions: the driver checks each warm worker's explorer, code, torch, Python and Ray against
this server's (`versions`), and refuses the cluster at connect, naming both, when one differs
(Ray itself refuses a driver of another Ray or Python version, naming them).
"""
import atexit
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

import explorer
from explorer.runs.backend import BackendStatus, FairQueue, Job, waiting_words
from explorer.runs.processes import crash_line, end_tree
from scenarios.base import Machine

ROOT = Path(__file__).resolve().parents[2]
CONNECT_TIMEOUT_S = {"local": 180.0, "cluster": 30.0}   # a private Ray starts ~6 processes; a cluster answers or not
SHUTDOWN_GRACE_S = 10.0


def versions() -> dict[str, str]:
    """What must match between this server and every node: the explorer, the code that trains (every file
    under scenarios/ and engines/), torch, Python and Ray. torch's local build label (+cpu, +cu128) may
    differ: the same code on another device."""
    digest = hashlib.sha256()
    for path in sorted(p for folder in ("scenarios", "engines") for p in (ROOT / folder).rglob("*.py")):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    found = {"explorer": explorer.__version__, "code": digest.hexdigest()[:12], "python": platform.python_version()}
    for package in ("torch", "ray"):
        try:
            found[package] = metadata.version(package).split("+")[0]
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def ray_installed() -> bool:
    try:
        metadata.version("ray")
        return True
    except metadata.PackageNotFoundError:
        return False


class RayBackend:
    """Runs on the Ray cluster at `address` (`local`: a private Ray on this machine), queued fairly here."""

    name = "ray"

    def __init__(self, address: str, size: int | None = None, connect_timeout_s: float | None = None,
                 env: dict[str, str] | None = None, expect: dict[str, str] | None = None) -> None:
        self.address = address
        self.size = size or int(os.environ.get("EXPLORER_WORKERS", 0) or 0) or None  # None: the driver decides
        self._lock = threading.Condition()
        self._queue = FairQueue()
        self._running: dict[str, Job] = {}
        self._machine: Machine | None = None
        self._failure: str | None = None
        self._connected = False
        self._workers, self._free, self._nodes = 0, 0, 0
        self._closed = False
        self._proc: subprocess.Popen | None = None
        if not ray_installed():
            self._failure = ("ray is not installed here, so runs cannot go to the Ray cluster at "
                             f"{address}: pip install '.[cluster]' (requirements-cluster.txt)")
            return
        local = address == "local"
        timeout = connect_timeout_s or float(os.environ.get("EXPLORER_RAY_CONNECT_S", 0) or 0) or \
            CONNECT_TIMEOUT_S["local" if local else "cluster"]
        path = dict.fromkeys([str(ROOT), *(p for p in sys.path if p and os.path.isdir(p))])
        environment = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(path)}
        if local or address.rsplit(":", 1)[0] in ("127.0.0.1", "localhost"):  # read when ray is imported: this
            environment["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # node's Ray processes bind to 127.0.0.1
        # Notice a lost cluster within seconds, not Ray's default minute (then the driver exits).
        environment.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", "10")
        command = [sys.executable, "-m", "explorer.runs.ray_driver", "--address", address,
                   "--expect", json.dumps(expect or versions())]
        if self.size:
            command += ["--workers", str(self.size)]
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self._proc = subprocess.Popen(command, cwd=ROOT, env=environment, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._stderr, text=True, bufsize=1, start_new_session=True)
        atexit.register(self.shutdown)
        threading.Thread(target=self._read, name="ray-driver", daemon=True).start()
        self._connect_timer = threading.Timer(timeout, self._connect_timed_out, args=(timeout,))
        self._connect_timer.daemon = True
        self._connect_timer.start()

    # --- the interface ------------------------------------------------------------------------
    def submit(self, job: Job) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the Ray backend is shut down")
            failure = self._failure
            refusal = self._queue.admit(job) if failure is None else None
            if failure is None and refusal is None:
                self._dispatch()
        if failure is not None:
            job.receive({"kind": "done", "id": job.id, "status": "failed", "error": failure})
        elif refusal is not None:
            job.receive({"kind": "done", "id": job.id, "status": "refused", "error": refusal})

    def cancel(self, job: Job) -> None:
        """Drop a queued run; ask the driver to stop a running one (it ends its worker if the run does not answer)."""
        with self._lock:
            queued = self._queue.remove(job)
            if not queued and job.id in self._running:
                self._send({"op": "stop", "id": job.id})
        if queued:
            job.receive({"kind": "done", "id": job.id, "status": "stopped"})

    def waiting(self, job: Job) -> str | None:
        with self._lock:
            if job not in self._queue:
                return None
            if not self._connected:
                return f"connecting to the Ray cluster at {self.address}"
            if not self._workers:
                return "a Ray worker is warming up, importing torch and the scenarios"
            return waiting_words(self._queue.ahead_of(job, self._holding()), self._free, self._workers)

    def machine(self, wait_s: float = 0.0) -> Machine | None:
        deadline = time.monotonic() + wait_s
        with self._lock:
            while self._machine is None and self._failure is None and time.monotonic() < deadline:
                self._lock.wait(max(0.0, deadline - time.monotonic()))
            return None if self._failure else self._machine  # a lost cluster turns Run off, as no worker would

    def failure(self) -> str | None:
        with self._lock:
            return self._failure

    def prepare(self, ranks: int) -> None:
        """Nothing to start ahead: a distributed run's ranks start in a placement group when it runs."""

    def status(self) -> BackendStatus:
        with self._lock:
            return BackendStatus("ray", self._workers, self._free, len(self._queue), self.address, self._nodes)

    def wait_ready(self, timeout: float) -> bool:
        """Block until the driver has connected and warmed its workers (tests, bench)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not (self._workers and (self.size is None or self._workers >= self.size)) or not self._connected:
                if self._failure is not None or self._closed or time.monotonic() > deadline:
                    return False
                self._lock.wait(0.1)
            return True

    def pids(self) -> list[int]:
        return [self._proc.pid] if self._proc is not None and self._proc.poll() is None else []

    def shutdown(self) -> None:
        """End the driver (it ends its workers and, for `local`, the private Ray); queued and running runs end stopped."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            jobs = self._queue.drain() + list(self._running.values())
            self._running.clear()
            self._lock.notify_all()
        for job in jobs:
            job.receive({"kind": "done", "id": job.id, "status": "stopped"})
        if self._proc is None:
            return
        self._connect_timer.cancel()
        try:
            self._proc.stdin.close()  # the driver shuts Ray down and exits
        except OSError:
            pass
        try:
            self._proc.wait(timeout=SHUTDOWN_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        end_tree(self._proc)

    # --- inside ---------------------------------------------------------------------------------
    def _holding(self) -> Counter:
        return Counter(getattr(job, "session", "") or "" for job in self._running.values())

    def _send(self, command: dict[str, Any]) -> None:
        try:
            self._proc.stdin.write(json.dumps(command) + "\n")
            self._proc.stdin.flush()
        except (OSError, ValueError, AttributeError):
            pass  # it died: the reader fails its runs

    def _dispatch(self) -> None:
        """Hand queued runs to the driver while it has free workers (holding the lock)."""
        while len(self._queue) and self._failure is None and self._connected:
            if self._workers - len(self._running) <= 0:
                return
            job = self._queue.take(self._holding())
            self._running[job.id] = job
            self._free = max(0, self._free - 1)
            request = job.request()
            request.pop("store", None)  # the store's path is this machine's: a Ray node trains every grid point
            self._send({"op": "run", "id": job.id, **request})
            job.receive({"kind": "started", "id": job.id})

    def _read(self) -> None:
        for line in self._proc.stdout:
            message = json.loads(line)
            kind, job = message["kind"], None
            with self._lock:
                if kind == "connected":
                    self._connected = True
                    self._connect_timer.cancel()
                elif kind == "capacity":
                    self._workers, self._free, self._nodes = message["workers"], message["free"], message["nodes"]
                elif kind == "machine":
                    self._machine = Machine(**message["machine"])
                elif kind == "failure":
                    self._failure = self._failure or message["error"]
                job = self._running.get(message.get("id", ""))
                if kind == "done" and job is not None:
                    del self._running[job.id]
                self._dispatch()
                self._lock.notify_all()
            if job is not None:
                job.receive(message)
        self._lost()

    def _lost(self) -> None:
        """The driver is gone: every run in flight fails with the reason; queued ones too; the page goes on."""
        code = self._proc.wait()
        with self._lock:
            why = self._failure or (f"lost the Ray cluster at {self.address} (its driver exited with code {code}): "
                                    f"{crash_line(self._stderr)}")
            if not self._closed:
                self._failure = why
            jobs = self._queue.drain() + list(self._running.values())
            self._running.clear()
            self._workers = self._free = 0
            self._lock.notify_all()
        for job in jobs:
            job.receive({"kind": "done", "id": job.id, "status": "failed", "error": why})

    def _connect_timed_out(self, timeout: float) -> None:
        with self._lock:
            if self._connected or self._closed:
                return
            self._failure = (f"could not reach the Ray cluster at {self.address} within {timeout:.0f} s: is "
                             "`ray start --head` running there, and its port open to this server?")
        end_tree(self._proc)  # the reader then fails what waits
