"""The run-backend interface's fair queue and choice: FIFO per session, sessions served by the workers they
hold, admission refused past the limits with a sentence; `--ray` over `EXPLORER_RAY_ADDRESS`. No process starts here."""
from collections import Counter
from dataclasses import dataclass

from explorer.runs.backend import QUEUE_FULL, FairQueue, ray_address, waiting_words
from explorer.runs.pool import WorkerPool
from explorer.runs.ray_backend import RayBackend


@dataclass(eq=False)
class Job:
    id: str
    session: str


def drain(queue: FairQueue, holding: Counter) -> list[str]:
    """The order a queue hands its jobs to workers that free up one at a time and are never given back."""
    order = []
    while (job := queue.take(holding)) is not None:
        order.append(job.id)
        holding[job.session] += 1
    return order


def test_each_session_is_first_in_first_out_and_sessions_take_turns() -> None:
    """A holds 0 workers and queued a1..a3 first, B queued b1, b2: the workers go a1, b1, a2, b2, a3."""
    queue = FairQueue(limit=10, session_limit=10)
    for job in [Job("a1", "A"), Job("a2", "A"), Job("a3", "A"), Job("b1", "B"), Job("b2", "B")]:
        assert queue.admit(job) is None
    order = drain(queue, Counter())
    assert order == ["a1", "b1", "a2", "b2", "a3"], order


def test_a_session_holding_workers_waits_behind_one_holding_none() -> None:
    """A already holds 3 workers and queued first; B holds none: B's run goes first, then they alternate by holdings."""
    queue = FairQueue(limit=10, session_limit=10)
    for job in [Job("a1", "A"), Job("a2", "A"), Job("b1", "B"), Job("b2", "B"), Job("b3", "B"), Job("b4", "B")]:
        queue.admit(job)
    order = drain(queue, Counter({"A": 3}))
    assert order == ["b1", "b2", "b3", "a1", "b4", "a2"], order


def test_the_place_a_queue_gives_is_the_order_it_hands_out() -> None:
    """`ahead_of` counts exactly the jobs `take` hands out before it, for every job of a mixed queue."""
    jobs = [Job(f"{session}{i}", session) for i, session in enumerate("AABACBBCA")]
    queue = FairQueue(limit=20, session_limit=20)
    for job in jobs:
        queue.admit(job)
    holding = Counter({"C": 1})
    places = {job.id: queue.ahead_of(job, holding) for job in jobs}
    order = drain(queue, Counter(holding))
    assert places == {job_id: order.index(job_id) for job_id in order}, (places, order)


def test_admission_is_refused_past_the_queue_and_past_a_sessions_share_of_it() -> None:
    """Three places, two per session: A's third run is refused for the page, then C's for the server."""
    queue = FairQueue(limit=3, session_limit=2)
    assert queue.admit(Job("a1", "A")) is None and queue.admit(Job("a2", "A")) is None
    mine = queue.admit(Job("a3", "A"))
    assert mine and mine.startswith(QUEUE_FULL) and "2 of its runs" in mine, mine
    assert queue.admit(Job("b1", "B")) is None
    full = queue.admit(Job("c1", "C"))
    assert full and full.startswith(QUEUE_FULL) and "3 runs are waiting" in full, full
    assert len(queue) == 3


def test_a_queued_run_says_its_place_and_the_free_workers() -> None:
    assert waiting_words(0, 0, 4) == "queued (next in line; 0 of 4 workers free)"
    assert waiting_words(2, 1, 1) == "queued (2 ahead; 1 of 1 worker free)"


def test_the_ray_flag_wins_over_the_variable_and_blank_means_the_local_pool(monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_RAY_ADDRESS", "head:6379")
    assert ray_address() == "head:6379" and ray_address("local") == "local"
    monkeypatch.setenv("EXPLORER_RAY_ADDRESS", "  ")
    assert ray_address() is None


def test_both_backends_offer_the_whole_interface() -> None:
    """The page calls these on whichever backend it has; neither may lack one."""
    needed = {"submit", "cancel", "waiting", "machine", "failure", "prepare", "status", "wait_ready", "shutdown", "pids"}
    for backend in (WorkerPool, RayBackend):
        missing = {name for name in needed if not callable(getattr(backend, name, None))}
        assert not missing, f"{backend.__name__} lacks {sorted(missing)}"
    assert (WorkerPool.name, RayBackend.name) == ("local", "ray")
