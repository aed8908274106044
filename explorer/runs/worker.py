"""A warm worker: `python -m explorer.runs.worker`, started by the page's pool (explorer/runs/pool.py).

Training never runs in the Streamlit process. A worker pays the one-off costs before it
is needed — torch, the scenarios and their engines imported, one intra-op thread, a first
optimizer built — then says it is ready and trains the runs it is handed, one at a time.
It is the only module under explorer/ that imports torch.

The protocol is JSON lines. In, on stdin:

    {"op": "run", "id": ..., "module": ..., "cls": ..., "config": {...}}   (+ "seeds": [...]: one run of
                                                                         several seeds, explorer/runs/seeded.py;
                                                                         + "store": the run store's path, whose
                                                                         point cache a grid's run may use)
    {"op": "stop", "id": ...}
    {"op": "prepare", "ranks": n}    start n rank processes ahead (engines.distributed.launch.keep_spares)

Out, on stdout: `{"kind": "machine", "machine": {...}}` as soon as torch is imported (~2.5 s of
CPU: the page can then check settings against this machine and queue a run, while the warm-up
goes on), `{"kind": "ready", "machine": {...}}` once warm, then per run any number of
`rows` (`[[arm, step, metric, value], ...]`), `event`, `progress` and `note` messages and
one `done` (`status`, `summary`, `error`, `traceback`, `seconds`, the machine again, and `spares`:
the rank processes now started ahead); a `prepare` is answered by `{"kind": "prepared", "spares": n}`.
A config the scenario refuses (`ConfigError`) ends as `status: "refused"` with its plain
sentence. When stdin closes — the server is gone, however it went — the worker stops its
run, ends every process it started, and exits. SIGTERM stops it the same way.
"""
import atexit
import importlib
import json
import os
import pkgutil
import queue
import signal
import sys
import threading
import time
import traceback
from typing import Any

from engines.distributed import launch as distributed
from scenarios.base import host_memory

ROWS_EVERY_S = 0.05    # rows are sent in batches at most this often (the first at once)
SPARE_RANKS = 4        # rank processes a distributed run leaves started ahead for the next (engines/distributed/launch.py)
EXIT_GRACE_S = 5.0     # after stdin closes, a run has this long to stop before the worker ends itself


class StreamSink:
    """The scenario's sink inside a worker: everything it hears goes out on stdout."""

    def __init__(self, run_id: str, send, stop: threading.Event) -> None:
        self.run_id, self.send, self.stop = run_id, send, stop
        self._rows: list[tuple] = []
        self._sent_at = 0.0

    def add(self, rows: list[tuple[str, int, str, float]]) -> None:
        self._rows.extend(rows)
        if time.monotonic() - self._sent_at >= ROWS_EVERY_S:
            self.flush()

    def flush(self) -> None:
        if self._rows:
            self.send({"kind": "rows", "id": self.run_id, "rows": self._rows})
            self._rows = []
        self._sent_at = time.monotonic()

    def event(self, event) -> None:
        self.flush()
        self.send({"kind": "event", "id": self.run_id, "event": {"arm": event.arm, "step": event.step,
                                                                  "kind": event.kind, "message": event.message}})

    def progress(self, fraction: float) -> None:
        self.flush()
        self.send({"kind": "progress", "id": self.run_id, "fraction": fraction})

    def note(self, text: str) -> None:
        self.flush()
        self.send({"kind": "note", "id": self.run_id, "text": text})

    def stop_requested(self) -> bool:
        return self.stop.is_set()


def machine() -> dict[str, int]:
    """What this machine offers a run (`scenarios.base.Machine`'s fields)."""
    import torch
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    gpu_bytes = min((torch.cuda.get_device_properties(i).total_memory for i in range(gpus)), default=0)
    return {"cpus": os.cpu_count() or 1, "gpus": gpus, "gpu_memory_bytes": int(gpu_bytes), **host_memory()}


ENTRY_POINTS = {"engines.distributed.worker", "engines.distributed.spare_rank"}  # rank processes' mains, not libraries


def warm() -> None:
    """Everything a first run would otherwise wait for: the scenarios, their engines, a first
    optimizer step (torch itself is imported and configured by `main` before this)."""
    import engines
    from engines.loop.runtime import warm_up
    import scenarios  # noqa: F401  (the registry, every scenario module)
    for info in pkgutil.walk_packages(engines.__path__, "engines."):
        if info.name not in ENTRY_POINTS:
            try:
                importlib.import_module(info.name)
            except Exception as error:  # a broken engine fails its own runs, not the worker
                print(f"worker: could not import {info.name}: {error}", file=sys.stderr)
    warm_up()


def warm_data() -> None:
    """Data several scenarios build on their first run in a process (cached after): the prose corpus,
    the standard library's docstrings parsed (~0.35 s of CPU; qlora's first point waited on it).
    Made once the worker is ready, so a run that arrives meanwhile waits at most that long."""
    from engines.sequence.text import prose
    prose()


def scenario_of(command: dict[str, Any]):
    """The scenario a command names by module and class (the page's own, never user input)."""
    cls = getattr(importlib.import_module(command["module"]), command["cls"])
    from scenarios.base import Scenario
    if not (isinstance(cls, type) and issubclass(cls, Scenario)):
        raise TypeError(f"{command['module']}.{command['cls']} is not a Scenario")
    return cls()


def train(command: dict[str, Any], send, stop: threading.Event) -> None:
    """One run, reported as it goes; always ends with one `done`."""
    from scenarios.base import ConfigError
    run_id, started = command["id"], time.perf_counter()
    done: dict[str, Any] = {"kind": "done", "id": run_id}
    sink = StreamSink(run_id, send, stop)
    try:
        if command.get("seeds"):  # several seeds as one run (explorer/runs/seeded.py): one status per seed
            results = scenario_of(command).run_seeds(command["config"], command["seeds"], sink=sink)
            statuses = [result.status for result in results]
            done.update(status=next((s for s in ("stopped", "diverged") if s in statuses), "finished"),
                        seeds={str(seed): {"status": result.status, "summary": result.summary}
                               for seed, result in zip(command["seeds"], results)})
        else:
            from explorer.runs.points import StorePoints  # a grid's points kept in the page's run store
            points = StorePoints(command["store"]) if command.get("store") else None
            result = scenario_of(command).run(command["config"], sink=sink, points=points)
            done.update(status=result.status, summary=result.summary)
    except ConfigError as error:  # refused: a plain sentence, nothing to store
        done.update(status="refused", error=str(error))
    except Exception as error:  # the page shows it; the worker lives on
        done.update(status="failed", error=f"{type(error).__name__}: {error}", traceback=traceback.format_exc())
    sink.flush()
    done.update(seconds=time.perf_counter() - started, machine=machine(), spares=len(distributed.spares()))
    send(done)


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def main() -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # a stray print in a scenario must not corrupt the protocol
    lock = threading.Lock()

    def send(message: dict[str, Any]) -> None:
        line = json.dumps(message, default=_jsonable)
        with lock:
            out.write(line + "\n")
            out.flush()

    def on_sigterm(signum, frame) -> None:
        raise SystemExit(0)  # unwinds the run: every `finally` (rank processes reaped) runs

    signal.signal(signal.SIGTERM, on_sigterm)
    os.environ.setdefault(distributed.SPARES_VARIABLE, str(SPARE_RANKS))
    atexit.register(distributed.drop_spares)
    from engines.loop.runtime import configure
    configure()  # imports torch
    send({"kind": "machine", "machine": machine()})
    warm()
    send({"kind": "ready", "pid": os.getpid(), "machine": machine()})

    commands: queue.Queue = queue.Queue()
    stop = threading.Event()
    current: dict[str, str | None] = {"id": None}
    cancelled: set[str] = set()  # a stop may overtake the run it names

    def read() -> None:
        for line in sys.stdin:
            command = json.loads(line)
            if command["op"] == "prepare":  # no run waits for it: done here, beside a run if one starts
                distributed.keep_spares(int(command["ranks"]))
                send({"kind": "prepared", "spares": len(distributed.spares())})
            elif command["op"] == "stop":
                cancelled.add(command["id"])
                if command["id"] == current["id"]:
                    stop.set()
            else:
                commands.put(command)
        stop.set()  # stdin closed: the server is gone
        commands.put(None)
        deadline = threading.Timer(EXIT_GRACE_S, os._exit, args=(1,))
        deadline.daemon = True
        deadline.start()

    threading.Thread(target=read, name="commands", daemon=True).start()
    warm_data()
    while (command := commands.get()) is not None:
        current["id"] = command["id"]
        stop.clear()
        if command["id"] in cancelled:  # checked after the clear: see `read`
            stop.set()
        train(command, send, stop)
        current["id"] = None


if __name__ == "__main__":
    main()
