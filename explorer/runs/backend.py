"""The one run-backend interface: what the page, the CLI and the API submit runs through.

Two backends implement it. The local warm pool (explorer/runs/pool.py: a few `python -m
explorer.runs.worker` processes on this machine) is the embedded default and needs nothing
installed. Ray (explorer/runs/ray_backend.py) trains on a Ray cluster when one machine is
not enough: `EXPLORER_RAY_ADDRESS` (or `--ray ADDRESS` on the command line) chooses it,
`local` for a private Ray on this machine, any other value a cluster's address.

A backend takes a `Job` (the page's `RunHandle`) and feeds it the worker protocol's messages
(`rows`, `event`, `progress`, `note`, one `done`; explorer/runs/worker.py). The page reads
nothing else, so nothing on the page changes with the backend: auto-run, Stop, the queue
position, the stored runs and the exports are the same.

Fair under load: runs queue first in, first out within a session (a browser tab's
`st.session_state`), and a free worker goes to the waiting session that holds the fewest
workers, so no session holds more than its share while others wait. Past
`EXPLORER_MAX_QUEUE` runs waiting (or `EXPLORER_SESSION_QUEUE` from one session) a run is
refused at once with a sentence that says so, rather than waiting for a worker that is hours away.
"""
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

from scenarios.base import Machine

RAY_VARIABLE = "EXPLORER_RAY_ADDRESS"
MAX_QUEUE = 200          # runs waiting on one server, from every session together
SESSION_QUEUE = 16       # runs waiting from one session (a seed group queues up to 10)
QUEUE_FULL = "The run queue is full"   # how an admission refusal starts (the status line reads it)


class Job(Protocol):
    """What a backend trains: the page's run handle."""

    id: str
    session: str

    def request(self) -> dict[str, Any]: ...        # {"module", "cls", "config", "ranks"}
    def receive(self, message: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class BackendStatus:
    """What a backend can say about itself, for the page's status line and `--json`."""

    backend: str          # "local" | "ray"
    workers: int          # warm workers able to train a run now
    free: int             # ... of which idle
    queued: int           # runs waiting for one
    address: str = ""     # the Ray cluster's address ("local": a private one on this machine)
    nodes: int = 1


class RunBackend(Protocol):
    """Submit, stream records (into the job), stop, status. The local pool and Ray implement it."""

    name: str

    def submit(self, job: Job) -> None: ...
    def cancel(self, job: Job) -> None: ...
    def waiting(self, job: Job) -> str | None: ...
    def machine(self, wait_s: float = 0.0) -> Machine | None: ...
    def failure(self) -> str | None: ...
    def prepare(self, ranks: int) -> None: ...
    def status(self) -> BackendStatus: ...
    def wait_ready(self, timeout: float) -> bool: ...
    def shutdown(self) -> None: ...


def _limit(variable: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(variable, default)))
    except ValueError:
        return default


class FairQueue:
    """Runs waiting for a worker: first in, first out within a session; the sessions that hold the
    fewest workers go first (ties: whose run has waited longest). Not locked: its owner holds a lock."""

    def __init__(self, limit: int | None = None, session_limit: int | None = None) -> None:
        self.limit = limit or _limit("EXPLORER_MAX_QUEUE", MAX_QUEUE)
        self.session_limit = session_limit or _limit("EXPLORER_SESSION_QUEUE", SESSION_QUEUE)
        self._jobs: list[Job] = []   # in the order they came

    def admit(self, job: Job) -> str | None:
        """Queue `job`, or say in a sentence why not (the queue, or this session's part of it, is full)."""
        if len(self._jobs) >= self.limit:
            return (f"{QUEUE_FULL}: {len(self._jobs)} runs are waiting for a worker on this server. "
                    "Try again in a minute, or open a stored run from Runs.")
        mine = sum(session_of(other) == session_of(job) for other in self._jobs)
        if mine >= self.session_limit:
            return (f"{QUEUE_FULL} for this page: {mine} of its runs are waiting already. Stop one, "
                    "or wait for them to start.")
        self._jobs.append(job)
        return None

    def remove(self, job: Job) -> bool:
        if job in self._jobs:
            self._jobs.remove(job)
            return True
        return False

    def drain(self) -> list[Job]:
        jobs, self._jobs = self._jobs, []
        return jobs

    def __contains__(self, job: Job) -> bool:
        return job in self._jobs

    def __len__(self) -> int:
        return len(self._jobs)

    def take(self, holding: Counter, accept=lambda job: True) -> Job | None:
        """The run a free worker trains next, out of the queue; `holding`: workers each session holds
        now. `accept` leaves out runs this worker cannot take (the Ray backend: a distributed run
        waits for room for its ranks); the run after them in the same session waits too (FIFO)."""
        heads: dict[str, Job] = {}
        for job in self._jobs:
            heads.setdefault(session_of(job), job)
        candidates = [job for job in heads.values() if accept(job)]
        if not candidates:
            return None
        chosen = min(candidates, key=lambda job: (holding[session_of(job)], self._jobs.index(job)))
        self._jobs.remove(chosen)
        return chosen

    def ahead_of(self, job: Job, holding: Counter) -> int:
        """How many queued runs go before `job` as workers free up (each one taken as `take` would)."""
        counts, order = Counter(holding), list(self._jobs)
        for ahead in range(len(order)):
            heads: dict[str, Job] = {}
            for other in order:
                heads.setdefault(session_of(other), other)
            chosen = min(heads.values(), key=lambda other: (counts[session_of(other)], order.index(other)))
            if chosen is job:
                return ahead
            order.remove(chosen)
            counts[session_of(chosen)] += 1
        return len(order)


def session_of(job: Job) -> str:
    return getattr(job, "session", "") or ""


def waiting_words(ahead: int, free: int, workers: int) -> str:
    """A queued run's place, and the workers: "queued (1 ahead; 0 of 4 workers free)"."""
    place = f"{ahead} ahead" if ahead else "next in line"
    return f"queued ({place}; {free} of {workers} worker{'s' if workers != 1 else ''} free)"


def ray_address(flag: str | None = None) -> str | None:
    """The Ray address a run goes to: `--ray ADDRESS`, else `EXPLORER_RAY_ADDRESS`; None: the local pool."""
    address = flag if flag is not None else os.environ.get(RAY_VARIABLE, "")
    return address.strip() or None


def make_backend(address: str | None = None, **options: Any) -> RunBackend:
    """The backend for `address` (see `ray_address`): Ray when one is given, else the local warm pool."""
    if address:
        from explorer.runs.ray_backend import RayBackend
        return RayBackend(address, **options)
    from explorer.runs.pool import WorkerPool
    return WorkerPool(**options)


def run_through(backend: RunBackend, scenario, config, store=None, sink=None, session: str = "cli"):
    """One run through `backend`, the way the page runs it (the run store written here, by the handle), for
    the CLI and the API: `sink` hears progress, what the run waits for and its events, and its
    `stop_requested` stops the run. Returns the ended `RunHandle`."""
    from explorer.runs.handle import RunHandle
    from scenarios.driver import Event
    handle = RunHandle.start(scenario, config, store, pool=backend, session=session)
    told, heard, stopping = None, 0, False
    while not handle.join(0.1):
        snap = handle.snapshot(with_frame=False)
        if sink is None:
            continue
        sink.progress(snap.progress)
        if snap.waiting and snap.waiting != told:
            sink.note(snap.waiting)
        told = snap.waiting
        for event in snap.events[heard:]:
            sink.event(Event(**event))
        heard = len(snap.events)
        if sink.stop_requested() and not stopping:
            handle.stop()
            stopping = True
    return handle
