"""Launching real process groups: one `python -m engines.distributed.worker` process per rank.

`launch()` picks a free localhost port, starts every rank in its own process group,
merges their JSON-line stdout into one stream of records in a fixed order, and watches
them: a rank that exits with an error ends the whole run within a fraction of a second,
with that rank's message (`RankFailed`); so does the consumer closing the stream early
(Stop: it hears a `None` heartbeat at least every 0.1 s while it waits) or the overall
timeout. In every case, `finally` terminates and reaps every rank — no process or port
outlives the run. Collectives inside the workers carry their own timeout, so a rank
never waits forever on a peer that died.

Where `EXPLORER_SPARE_RANKS` is set (the page's warm workers set it), a launch leaves that many
rank processes started ahead (`python -m engines.distributed.spare_rank`: torch imported, ~3 s each on 2
cores, at a lower priority), waiting on stdin for the next run's arguments: the next launch from
this process takes them instead of starting new ones (`keep_spares` also starts them ahead of a
first run: the page's pool asks while a distributed scenario's page is read). A spare ends when its stdin closes, so
none outlives the process that started it.

Where ranks start is `rank_starter`'s choice when a process sets one: explorer/runs/ray_worker.py
starts them as Ray actors in a placement group (each reads like a rank process: its stdout lines,
`poll`, `wait`, `kill`), and their records merge here the same way.

Never `multiprocessing` spawn here: the caller may be a Streamlit script thread, and
spawned children would re-run the app script. Subprocesses of `python -m` do not.
"""
import collections
import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


BOUNDARIES = ("forward start", "forward end", "backward start", "backward end")
# The collectives a rank's step is counted in (engines.distributed.shards), and the op names of each kind.
COLLECTIVES = {"all-reduce": ("allreduce", "all_reduce"), "all-gather": ("allgather", "all_gather"),
               "reduce-scatter": ("reduce_scatter",), "broadcast": ("broadcast",)}


def timeline_labels(layers: int) -> list[str]:
    """Every mark a rank's memory timeline can carry; records name a mark by its index here."""
    units = ["model", "embed", *(f"blocks.{i}" for i in range(layers)), "head"]
    return ["step start", "after backward", "after optimizer step"] + [f"{u} {b}" for u in units for b in BOUNDARIES]


TIMEOUT_FACTOR = 3.0     # a launch's limit over its estimated wall time: estimates hold within 2× on a quiet
TIMEOUT_SLACK_S = 120.0  # machine, and a shared one runs slower again; plus the ranks' start on a busy machine


def timeout_for(estimated_s: float) -> float:
    """The limit of a launch whose estimated wall time is `estimated_s`: an accepted run never ends as
    failed for being slow, while a hung one still ends."""
    return TIMEOUT_FACTOR * estimated_s + TIMEOUT_SLACK_S


class RankFailed(RuntimeError):
    """A rank exited with an error; the message names the rank and its last error line."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _last_error_line(text: str) -> str:
    lines = [line.split("]:", 1)[-1].strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line or "Exception" in line]
    return (errors or lines or ["no output"])[-1]


SPARES_VARIABLE = "EXPLORER_SPARE_RANKS"   # how many rank processes to keep started ahead (at most)
_spares: list[tuple[subprocess.Popen, Any]] = []   # (process, its stderr file), each waiting on stdin
_spares_lock = threading.Lock()
# (job, every rank's arguments) -> (rank, its stderr file) each; None: local rank processes (`_rank`).
rank_starter: Callable[[dict, list[list[str]]], Any] | None = None


def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def _start(arguments: list[str] | None):
    """A rank process with these arguments, or (None) a spare that waits for them on stdin."""
    errors = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed by `launch` or `drop_spares`)
    command = ["engines.distributed.worker", *arguments] if arguments else ["engines.distributed.spare_rank"]
    proc = subprocess.Popen([sys.executable, "-m", *command],
                            cwd=ROOT, env=_environment(), stdin=subprocess.DEVNULL if arguments else subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=errors, text=True, start_new_session=True)
    return proc, errors


def _rank(arguments: list[str]):
    """A spare given `arguments`, if one is waiting; else a new rank process."""
    while True:
        with _spares_lock:
            spare = _spares.pop(0) if _spares else None
        if spare is None:
            return _start(arguments)
        proc, errors = spare
        try:
            proc.stdin.write(json.dumps(arguments) + "\n")
            proc.stdin.close()
            return spare
        except OSError:  # it died meanwhile: reap it, take the next
            _reap([proc])
            errors.close()


def keep_spares(count: int) -> None:
    """Start spares until `count` are waiting (at most `EXPLORER_SPARE_RANKS`)."""
    wanted = min(count, int(os.environ.get(SPARES_VARIABLE, "0") or 0))
    with _spares_lock:
        dead = [(proc, errors) for proc, errors in _spares if proc.poll() is not None]
        _spares[:] = [spare for spare in _spares if spare not in dead]
        while len(_spares) < wanted:
            _spares.append(_start(None))
    for proc, errors in dead:
        _reap([proc])
        errors.close()


def spares() -> list[int]:
    """The process ids of the spares waiting now."""
    with _spares_lock:
        return [proc.pid for proc, _ in _spares if proc.poll() is None]


def drop_spares() -> None:
    """End every waiting spare (closing its stdin ends it) and reap it."""
    with _spares_lock:
        dropped, _spares[:] = list(_spares), []
    for proc, _ in dropped:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    _reap([proc for proc, _ in dropped])
    for _, errors in dropped:
        errors.close()


def _pump(rank: int, stream, lines: "queue.Queue[tuple[int, str | None]]") -> None:
    for line in stream:
        lines.put((rank, line))
    lines.put((rank, None))


def launch(job: dict, world_sizes: int | Sequence[int], *, timeout_s: float = 300.0,
           collective_timeout_s: float = 60.0, heartbeat_s: float = 0.1) -> Iterator[dict | None]:
    """Run `job` on a process group of each size in `world_sizes` (side by side, each on its
    own port); yield every rank's records (dicts carrying their `world_size`) and, while no
    record is due, `None` every `heartbeat_s` so the consumer can stop (close) in time.

    Records come in a fixed order whatever the timing: round-robin over the ranks (world by
    world, rank by rank), one record each, skipping ranks that have finished. Every rank of
    a strategy emits the same number of records, so a run's records read the same each time."""
    worlds = [world_sizes] if isinstance(world_sizes, int) else list(world_sizes)
    members = [(world, rank) for world in worlds for rank in range(world)]  # one process each
    errors: list = []
    procs: list[subprocess.Popen] = []
    lines: queue.Queue = queue.Queue()
    pending: list[collections.deque] = [collections.deque() for _ in members]
    try:
        ports = {world: free_port() for world in worlds}
        arguments = [["--job", json.dumps(job), "--rank", str(rank), "--world-size", str(world), "--port",
                      str(ports[world]), "--timeout-s", str(collective_timeout_s)] for world, rank in members]
        started = rank_starter(job, arguments) if rank_starter is not None else (_rank(a) for a in arguments)
        for index, (proc, error_file) in enumerate(started):
            procs.append(proc)
            errors.append(error_file)
            threading.Thread(target=_pump, args=(index, proc.stdout, lines), daemon=True).start()
        turn, live, deadline = 0, list(range(len(members))), time.monotonic() + timeout_s
        heard = time.monotonic()  # when the consumer last had an item
        while live:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the distributed run took longer than its limit of {timeout_s:.0f} s")
            member = live[turn % len(live)]
            if pending[member] and pending[member][0] is None:  # this rank is done
                procs[member].wait()
                _check(procs, errors, members)
                live.remove(member)
            elif pending[member]:
                turn += 1
                heard = time.monotonic()
                yield json.loads(pending[member].popleft())
            else:
                try:
                    index, line = lines.get(timeout=heartbeat_s)
                except queue.Empty:
                    index, line = None, ""
                    _check(procs, errors, members)
                if index is not None and (line is None or line.strip()):
                    pending[index].append(line)
                if line is None and procs[index].wait() != 0:
                    _check(procs, errors, members)
                if time.monotonic() - heard >= heartbeat_s:
                    heard = time.monotonic()
                    yield None
    finally:
        _reap(procs)
        for handle in errors:
            handle.close()
        keep_spares(len(members))  # for the next run, while this one's results are read


def launched(job: dict, world_sizes: int | Sequence[int], item_of: Callable[[dict], Any], *, starting: str,
             still_starting: str, running: str, timeout_s: float) -> Iterator:
    """`launch`'s records as a driver's items (`item_of(record)`; None skips one), with a `Note` first
    (`starting`), again while the ranks start (`still_starting`) and between records (`running`), so
    the driver hears Stop at least every heartbeat. Closing the stream reaps every rank. `timeout_s`:
    `timeout_for` the run's estimate."""
    from engines.loop.records import Note
    yield Note(starting)
    waiting = Note(still_starting)
    with contextlib.closing(launch(job, world_sizes, timeout_s=timeout_s)) as records:
        for record in records:
            if record is None:
                yield waiting
                continue
            waiting = Note(running)
            item = item_of(record)
            if item is not None:
                yield item


def _check(procs: list[subprocess.Popen], errors: list, members: list[tuple[int, int]]) -> None:
    """Raise for the first rank that exited with an error (the others are reaped by the caller)."""
    for index, proc in enumerate(procs):
        code = proc.poll()
        if code not in (None, 0):
            errors[index].seek(0)
            world, rank = members[index]
            where = f"rank {rank}" + (f" of {world}" if len(set(w for w, _ in members)) > 1 else "")
            ended = f"killed by {signal.Signals(-code).name}" if -code in signal.valid_signals() else f"exit code {code}"
            raise RankFailed(f"{where} failed ({ended}): {_last_error_line(errors[index].read())}")


def _reap(procs: list[subprocess.Popen], grace_s: float = 3.0) -> None:
    """SIGTERM every rank's process group, SIGKILL what is left after `grace_s`, wait for all.
    A rank started elsewhere (`rank_starter`) is ended its own way."""
    for proc in [p for p in procs if not isinstance(p, subprocess.Popen)]:
        proc.kill()
    procs = [p for p in procs if isinstance(p, subprocess.Popen)]
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
