"""Runs as Ray work: a warm actor per worker slot, and the ranks of a distributed run in a placement group.

`RunActor` is the Ray twin of the local warm worker (explorer/runs/worker.py): created once, it
imports torch, the scenarios and their engines and takes a first optimizer step, so a run handed to
it draws its first point as soon as on this machine. `run(command)` is a streaming generator
(`num_returns="streaming"`): the worker's own `train` sends the protocol's messages (rows in
batches every 0.05 s, events, progress, notes, one `done`) and each yield hands the driver what
has come since the last. It holds one CPU (a run trains on one intra-op thread); a second thread
(`max_concurrency=2`) takes `stop`, which sets the flag the scenario's driver reads after every
step, as on this machine.

A distributed run (ddp-fsdp-memory, collectives) starts its ranks through `engines.distributed.launch`;
inside a `RunActor` that launcher starts them with `start_ranks` instead: one `RankActor` per rank
in a placement group of one bundle each (a CPU, and a GPU where the job asks for CUDA), packed on
as few nodes as Ray can, spread when it must. Each rank runs `engines.distributed.worker.main` with
the arguments a local rank process gets; its stdout lines (the records) stream back the same way,
and rank 0's node address and a free port there replace 127.0.0.1 (on one machine: gloo over localhost).

This module imports ray (the driver and Ray's workers load it, never the page) and imports torch only
inside the actors.
"""
import contextlib
import io
import os
import queue
import socket
import sys
import threading
from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

LINES_EVERY_S = 0.05   # a rank's stdout lines go back in batches at most this often


@ray.remote(num_cpus=1, max_concurrency=2)  # one thread trains, the other hears Stop
class RunActor:
    def __init__(self) -> None:
        if os.environ.get("CUDA_VISIBLE_DEVICES") == "":  # Ray hides GPUs from an actor that asked for none; this
            del os.environ["CUDA_VISIBLE_DEVICES"]        # one only counts its node's (a run's ranks ask for theirs)
        from engines.distributed import launch
        from engines.loop.runtime import configure
        from explorer.runs import worker
        configure()  # imports torch: one intra-op thread, as a local worker
        worker.warm()
        launch.rank_starter = start_ranks  # this actor's distributed runs start their ranks on Ray
        self._stops: dict[str, threading.Event] = {}
        self._cancelled: set[str] = set()

    def hello(self) -> dict[str, Any]:
        """What the driver checks and shows: this node's versions and machine."""
        from explorer.runs import worker
        from explorer.runs.ray_backend import versions
        return {"versions": versions(), "machine": worker.machine(), "node": ray.get_runtime_context().get_node_id()}

    def run(self, command: dict[str, Any]):
        """One run: every message it sends, in batches, ending with its `done`."""
        from explorer.runs import worker
        messages: queue.Queue = queue.Queue()
        stop = self._stops[command["id"]] = threading.Event()
        if command["id"] in self._cancelled:  # a stop may overtake its run
            stop.set()
        trainer = threading.Thread(target=worker.train, args=(command, messages.put, stop), daemon=True)
        trainer.start()
        try:
            while True:
                batch = [messages.get()]
                while not messages.empty():
                    batch.append(messages.get_nowait())
                yield batch
                if batch[-1]["kind"] == "done":
                    return
        finally:
            stop.set()  # the consumer went away (a cancel): the run stops after its step
            self._stops.pop(command["id"], None)

    def stop(self, run_id: str) -> None:
        self._cancelled.add(run_id)
        if run_id in self._stops:
            self._stops[run_id].set()


class _Lines(io.TextIOBase):
    """A rank's stdout inside its actor: each line goes to the queue that streams back."""

    def __init__(self, lines: queue.Queue) -> None:
        self.lines, self._partial = lines, ""

    def write(self, text: str) -> int:
        *whole, self._partial = (self._partial + text).split("\n")
        for line in whole:
            self.lines.put(line + "\n")
        return len(text)


@ray.remote(num_cpus=1)
class RankActor:
    """One rank of a distributed run, in its placement group's bundle."""

    def address(self) -> tuple[str, int]:
        """This node's address and a free port on it (rank 0's: every rank of its world connects there)."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("", 0))
            port = sock.getsockname()[1]
        return ray.util.get_node_ip_address(), port

    def run(self, arguments: list[str], master: tuple[str, int]):
        """`engines.distributed.worker.main(arguments)` with rank 0's address; yields its stdout lines in
        batches. A rank that raises ends the stream with its error (the launcher names the rank)."""
        from engines.distributed import worker
        lines: queue.Queue = queue.Queue()
        arguments = list(arguments)
        arguments[arguments.index("--port") + 1] = str(master[1])
        os.environ["EXPLORER_MASTER_ADDR"] = master[0]  # engines.distributed.worker connects there
        errors: list[BaseException] = []

        def main() -> None:
            try:
                worker.main(arguments)
            except BaseException as error:  # noqa: BLE001 (reported as the rank's failure)
                errors.append(error)
            finally:
                lines.put(None)

        sys.stdout = _Lines(lines)  # the rank writes its records to stdout; this process is this rank's alone
        threading.Thread(target=main, daemon=True).start()
        while True:
            batch = [lines.get()]
            with contextlib.suppress(queue.Empty):
                while batch[-1] is not None:
                    batch.append(lines.get(timeout=LINES_EVERY_S))
            done = batch[-1] is None
            if any(batch[:-1] if done else batch):
                yield [line for line in batch if line is not None]
            if done:
                if errors:
                    raise RuntimeError(f"{type(errors[0]).__name__}: {errors[0]}")
                return


class RayRank:
    """A rank started on Ray, read by `engines.distributed.launch` as it reads a rank process."""

    def __init__(self, actor, stream, gang: "Gang") -> None:
        self.actor, self.gang = actor, gang
        self.errors = io.StringIO()
        self._code: int | None = None
        self._ended = threading.Event()
        self.stdout = self._lines(stream)

    def _lines(self, stream):
        try:
            for ref in stream:
                yield from ray.get(ref)
            self._code = 0
        except Exception as error:  # the rank raised, or its actor or node died: the run fails with it
            self.errors.write(f"{type(error).__name__}: {str(error).strip().splitlines()[-1] if str(error).strip() else ''}\n")
            self._code = 1
        finally:
            self._ended.set()

    def poll(self) -> int | None:
        return self._code

    def wait(self, timeout: float | None = None) -> int | None:
        self._ended.wait(timeout)
        return self._code

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            ray.kill(self.actor)
        self.gang.release()


class Gang:
    """A distributed run's placement group, removed once its last rank is ended."""

    def __init__(self, group, count: int) -> None:
        self.group, self.left, self._lock = group, count, threading.Lock()

    def release(self) -> None:
        with self._lock:
            self.left -= 1
            last = self.left == 0
        if last:
            with contextlib.suppress(Exception):
                remove_placement_group(self.group)


def start_ranks(job: dict[str, Any], arguments: list[list[str]]) -> list[tuple[RayRank, io.StringIO]]:
    """`engines.distributed.launch`'s ranks as Ray actors in one placement group: (rank, its errors) each."""
    cuda = job.get("device", "cpu") == "cuda"
    bundle = {"CPU": 1, **({"GPU": 1} if cuda else {})}
    group = placement_group([dict(bundle) for _ in arguments], strategy="PACK")
    gang, ranks, masters = Gang(group, len(arguments)), [], {}
    for index, argv in enumerate(arguments):
        actor = RankActor.options(num_gpus=1 if cuda else 0, scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group=group, placement_group_bundle_index=index)).remote()
        port = argv[argv.index("--port") + 1]  # launch's port names the world; its rank 0 comes first
        if port not in masters:
            masters[port] = actor.address.remote()
        rank = RayRank(actor, actor.run.options(num_returns="streaming").remote(argv, masters[port]), gang)
        ranks.append((rank, rank.errors))
    return ranks
