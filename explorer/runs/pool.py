"""The worker pool: a few warm `python -m explorer.runs.worker` processes that train the page's runs.

The local run backend (explorer/runs/backend.py), the embedded default. The Streamlit process
never trains. It hands a run (a `Job`: the page's `RunHandle`) to the pool; the pool gives it to
an idle warm worker, or queues it (fairly between sessions: `backend.FairQueue`) when every
worker is busy, and relays the worker's JSON-line messages to the job as they arrive. One pool
serves every browser tab of a server, so its size bounds the runs training at once:
one worker per core, at most `MAX_WORKERS` (`EXPLORER_WORKERS` overrides).

- Stop: the worker is asked to stop, which a run does within a step; a worker that has not
  answered after `STOP_GRACE_S` is ended (SIGTERM, then SIGKILL of it and every process it
  started) and replaced, so Stop takes under a second at any setting.
- A worker that dies under a run (a crash, the OOM killer) fails that run with the last
  error line it wrote, and is replaced.
- Rank processes ahead: a distributed run's rank processes take ~3 s of CPU each to start
  (torch, gloo, DDP's `torch._dynamo`). While a distributed scenario's page is read and nothing
  trains, `prepare` has an idle worker start them (engines.distributed.launch.keep_spares); that run
  goes to the worker with the most waiting, any other run to the one with the fewest.
- No worker outlives the server: `shutdown` (also at interpreter exit) closes their stdin
  and ends what is left; a worker whose stdin closes — the server died, however — stops
  its run and exits by itself.
"""
import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from explorer.runs.backend import BackendStatus, FairQueue, Job, waiting_words
from explorer.runs.processes import crash_line, end_tree, how_it_ended
from scenarios.base import Machine

ROOT = Path(__file__).resolve().parents[2]
MAX_WORKERS = 4
STOP_GRACE_S = 0.4   # a run asked to stop has this long to end before its worker is ended


def pool_size(cores: int | None = None) -> int:
    if os.environ.get("EXPLORER_WORKERS"):
        return max(1, int(os.environ["EXPLORER_WORKERS"]))
    return max(1, min(cores or os.cpu_count() or 1, MAX_WORKERS))


@dataclass(eq=False)
class Worker:
    proc: subprocess.Popen
    stderr: Any
    ready: bool = False
    job: Job | None = None
    ending: bool = False            # the pool is ending it: its death is no crash
    spares: int = 0                 # rank processes it has started ahead, as it last said
    asked: int = 0                  # the rank processes `prepare` last asked it for
    started_at: float = field(default_factory=time.monotonic)


class WorkerPool:
    name = "local"

    def __init__(self, size: int | None = None, env: dict[str, str] | None = None) -> None:
        self.size = size or pool_size()
        # A worker imports a run's scenario by the module name this process knows it by.
        path = dict.fromkeys([str(ROOT), *(p for p in sys.path if p and os.path.isdir(p))])
        self._env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(path)}
        self._lock = threading.Condition()
        self._workers: list[Worker] = []
        self._queue = FairQueue()
        self._machine: Machine | None = None
        self._closed = False
        self._failure: str | None = None  # why no worker could start, once none could
        self._wanted_ranks = 0            # rank processes asked for ahead before any worker was ready
        atexit.register(self.shutdown)
        with self._lock:
            for _ in range(self.size):
                self._spawn()

    # --- what the page asks ---------------------------------------------------------------
    def submit(self, job: Job) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker pool is shut down")
            failure = self._failure
            refusal = self._queue.admit(job) if failure is None else None
            if failure is None and refusal is None:
                self._dispatch()
        if failure is not None:
            job.receive({"kind": "done", "id": job.id, "status": "failed", "error": failure})
        elif refusal is not None:
            job.receive({"kind": "done", "id": job.id, "status": "refused", "error": refusal})

    def cancel(self, job: Job) -> None:
        """Stop a job: drop it from the queue, or ask its worker and end the worker if it does not answer."""
        with self._lock:
            if self._queue.remove(job):
                worker = None
            else:
                worker = next((w for w in self._workers if w.job is job), None)
                if worker is None:
                    return  # already over
                self._send(worker, {"op": "stop", "id": job.id})
                threading.Timer(STOP_GRACE_S, self._end_if_still, args=(worker, job)).start()
        if worker is None:
            job.receive({"kind": "done", "id": job.id, "status": "stopped"})

    def prepare(self, ranks: int) -> None:
        """Have an idle worker start `ranks` rank processes ahead (it keeps at most its own cap),
        for a distributed run the page is about to ask for. Only while nothing trains or waits:
        the spares' imports then share the cores with no run. Cheap to call on every page run."""
        if ranks <= 0:
            return
        with self._lock:
            self._prepare(ranks)

    def _prepare(self, ranks: int) -> None:
        """`prepare`, holding the lock. Asked before any worker is warm (a page read while the
        server starts), the first worker to be ready starts them."""
        if self._closed or len(self._queue) or any(w.job is not None for w in self._workers):
            return
        idle = [w for w in self._workers if w.ready and not w.ending]
        self._wanted_ranks = 0 if idle else ranks
        if not idle or any(max(w.spares, w.asked) >= ranks for w in idle):
            return
        worker = max(idle, key=lambda w: w.spares)
        worker.asked = ranks
        self._send(worker, {"op": "prepare", "ranks": ranks})

    def failure(self) -> str | None:
        """Why no worker could start (each one died before it was ready), or None."""
        with self._lock:
            return self._failure

    def waiting(self, job: Job) -> str | None:
        """What a job that has not reached a worker waits for, in words; None once it trains."""
        with self._lock:
            if job not in self._queue:
                return None
            if not any(w.ready for w in self._workers):
                return "a worker is warming up, importing torch and the scenarios"
            ready = [w for w in self._workers if w.ready and not w.ending]
            return waiting_words(self._queue.ahead_of(job, self._holding()), sum(w.job is None for w in ready),
                                 len(ready))

    def status(self) -> BackendStatus:
        with self._lock:
            ready = [w for w in self._workers if w.ready and not w.ending]
            return BackendStatus("local", len(ready), sum(w.job is None for w in ready), len(self._queue))

    def _holding(self) -> Counter:
        """The workers each session holds now."""
        return Counter(getattr(w.job, "session", "") or "" for w in self._workers if w.job is not None)

    def machine(self, wait_s: float = 0.0) -> Machine | None:
        """The facts a worker reported about this machine (None until one has imported torch)."""
        deadline = time.monotonic() + wait_s
        with self._lock:
            while self._machine is None and not self._closed and time.monotonic() < deadline:
                self._lock.wait(max(0.0, deadline - time.monotonic()))
            return self._machine

    def pids(self) -> list[int]:
        with self._lock:
            return [w.proc.pid for w in self._workers]

    def wait_ready(self, timeout: float) -> bool:
        """Block until every worker is warm (tests, bench)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not all(w.ready for w in self._workers) or len(self._workers) < self.size:
                if time.monotonic() > deadline or self._closed:
                    return False
                self._lock.wait(0.05)
            return True

    def shutdown(self) -> None:
        """End every worker and what it started; queued jobs end as stopped. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            queued = self._queue.drain()
            workers = list(self._workers)
            for worker in workers:
                worker.ending = True
                try:
                    worker.proc.stdin.close()  # the worker stops its run and exits
                except OSError:
                    pass
            self._lock.notify_all()
        for job in queued:
            job.receive({"kind": "done", "id": job.id, "status": "stopped"})
        deadline = time.monotonic() + 2.0
        for worker in workers:
            try:
                worker.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            end_tree(worker.proc)

    # --- inside -----------------------------------------------------------------------------
    def _spawn(self) -> None:
        stderr = tempfile.TemporaryFile(mode="w+")
        proc = subprocess.Popen([sys.executable, "-m", "explorer.runs.worker"], cwd=ROOT, env=self._env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                bufsize=1, start_new_session=True)  # Ctrl-C at the server's terminal is the server's
        worker = Worker(proc, stderr)
        self._workers.append(worker)
        threading.Thread(target=self._read, args=(worker,), name=f"worker-{proc.pid}", daemon=True).start()

    def _send(self, worker: Worker, command: dict[str, Any]) -> None:
        try:
            worker.proc.stdin.write(json.dumps(command) + "\n")
            worker.proc.stdin.flush()
        except (OSError, ValueError):
            pass  # it died: its reader reports the job

    def _dispatch(self) -> None:
        """Give queued jobs to idle warm workers (holding the lock)."""
        while len(self._queue):
            idle = [w for w in self._workers if w.ready and w.job is None and not w.ending]
            if not idle:
                return
            job = self._queue.take(self._holding())
            request = job.request()
            ranks = request.get("ranks", 0)  # a distributed run goes where its rank processes wait
            idle = (max if ranks else min)(idle, key=lambda w: w.spares)
            idle.job = job
            if ranks:
                idle.spares = idle.asked = 0  # it takes them (its `done` says what it keeps)
            self._send(idle, {"op": "run", "id": job.id, **request})
            job.receive({"kind": "started", "id": job.id})  # a job never calls the pool under its own lock

    def _read(self, worker: Worker) -> None:
        """Relay one worker's messages to its job; on its death, fail the job and replace it."""
        for line in worker.proc.stdout:
            message = json.loads(line)
            with self._lock:
                if "machine" in message:
                    self._machine = Machine(**message["machine"])
                    self._lock.notify_all()
                job = worker.job if worker.job is not None and message.get("id") == worker.job.id else None
                if "spares" in message:
                    worker.spares = message["spares"]
                if message["kind"] == "ready":
                    worker.ready = True
                    self._lock.notify_all()
                elif message["kind"] == "done" and job is not None:
                    worker.job = None
                if message["kind"] in ("ready", "done"):
                    self._dispatch()
                if message["kind"] == "ready" and self._wanted_ranks:
                    self._prepare(self._wanted_ranks)
            if job is not None:
                job.receive(message)
        code = worker.proc.wait()
        why = crash_line(worker.stderr)
        worker.stderr.close()
        with self._lock:
            job, worker.job = worker.job, None
            crashed = not worker.ending
            stranded: list[Job] = []
            if worker in self._workers:
                self._workers.remove(worker)
                if worker.ready and not self._closed:
                    self._spawn()  # a run crashed it: a fresh one takes its place
                elif crashed and not self._workers:  # none could start: say why, do not loop
                    self._failure = f"no worker could start ({how_it_ended(code)}): {why}"
                    stranded = self._queue.drain()
            self._lock.notify_all()
        if job is not None:
            job.receive({"kind": "done", "id": job.id, "status": "failed",
                         "error": f"the worker training this run died, {how_it_ended(code)}: {why}"}
                        if crashed else {"kind": "done", "id": job.id, "status": "stopped"})
        for other in stranded:
            other.receive({"kind": "done", "id": other.id, "status": "failed", "error": self._failure})

    def _end_if_still(self, worker: Worker, job: Job) -> None:
        """Stop's deadline: a worker still on the job is ended and replaced; the job ends stopped."""
        with self._lock:
            if worker.job is not job:
                return
            worker.job, worker.ending = None, True
            self._workers.remove(worker)
            if not self._closed:
                self._spawn()
        threading.Thread(target=end_tree, args=(worker.proc,), daemon=True).start()
        job.receive({"kind": "done", "id": job.id, "status": "stopped"})

