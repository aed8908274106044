"""The Ray driver: `python -m explorer.runs.ray_driver --address ADDRESS`, started by the page's Ray backend.

It connects to the cluster (`local`: starts a private Ray on this machine, every process bound to
127.0.0.1, no dashboard, a small object store), keeps a fleet of warm `RunActor`s (one per worker
slot; explorer/runs/ray_worker.py), and trains the runs the page hands it, one per actor, relaying
each run's streamed messages to its stdout. It holds no queue of its own beyond a run that arrives
while its actor is being replaced: the page's fair queue decides what runs next.

The protocol is the local worker's (explorer/runs/worker.py), with run ids, several runs at once:
in, `{"op": "run", "id", "module", "cls", "config", "ranks"}` and `{"op": "stop", "id"}`; out,
`{"kind": "connected", "nodes", "cpus"}` once connected, `{"kind": "machine", "machine"}` from the
first warm actor, `{"kind": "capacity", "workers", "free", "nodes"}` whenever it changes, each run's
`rows`, `event`, `progress`, `note` and `done`, and `{"kind": "failure", "error"}` before it gives
up for good: the address cannot be reached, a node runs other versions than this server (checked
per actor: explorer, its code, torch, Python, Ray), or the cluster is lost.

Stop: the actor is asked (its run stops after the step); an actor that has not answered after
`STOP_GRACE_S` is killed and replaced. An actor or node that dies fails its run with Ray's message.
When stdin closes the driver kills its actors and disconnects (a private Ray is shut down with it).
"""
import argparse
import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

RANK_CPUS = 4            # `local`: logical CPUs beyond the workers', for a distributed run's rank actors
OBJECT_STORE_BYTES = 100 * 2**20   # records are small and stream through; Ray's floor is 75 MiB
MAX_WORKERS = 64
STOP_GRACE_S = 0.5       # a run asked to stop has this long before its actor is killed
WATCH_EVERY_S = 1.0
WARM_TRIES = 8           # workers in a row that die before they are warm, before the driver gives up


@dataclass(eq=False)
class Slot:
    actor: Any
    ready: bool = False
    run_id: str | None = None
    stopping: bool = False


class Driver:
    def __init__(self, address: str, expect: dict[str, str], size: int | None, send) -> None:
        self.address, self.expect, self.wanted, self.send = address, expect, size, send
        self.size = size or 0
        self._lock = threading.RLock()
        self._slots: list[Slot] = []
        self._pending: list[dict[str, Any]] = []
        self._machine_sent = False
        self._capacity: tuple = ()
        self._failed = False
        self._nodes_seen = 1
        self._warm_failures = 0   # workers in a row that died before they were warm

    # --- connecting ----------------------------------------------------------------------------
    def connect(self) -> dict[str, Any]:
        import ray
        from explorer.runs.ray_backend import ROOT
        path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])  # actors import this checkout
        options = {"log_to_driver": False, "logging_level": "warning", "namespace": "training-dynamics-explorer",
                   "runtime_env": {"env_vars": {"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}}}
        if self.address == "local":
            from explorer.runs.pool import pool_size
            self.size = self.wanted or pool_size()
            ray.init(num_cpus=self.size + RANK_CPUS, include_dashboard=False,
                     object_store_memory=OBJECT_STORE_BYTES, **options)
        else:
            ray.init(address=self.address, **options)
        cpus = int(ray.cluster_resources().get("CPU", 0))
        if not self.size:
            self.size = max(1, min(MAX_WORKERS, cpus - min(RANK_CPUS, cpus // 2)))
        self._nodes_seen = self._nodes()
        return {"kind": "connected", "nodes": self._nodes_seen, "cpus": cpus, "workers": self.size}

    def _nodes(self) -> int:
        import ray
        return sum(1 for node in ray.nodes() if node.get("Alive"))

    # --- the fleet -------------------------------------------------------------------------------
    def start_fleet(self) -> None:
        with self._lock:
            for _ in range(self.size):
                self._add()

    def _add(self) -> None:
        from explorer.runs.ray_worker import RunActor
        slot = Slot(RunActor.remote())
        self._slots.append(slot)
        threading.Thread(target=self._warm, args=(slot,), daemon=True).start()

    def _warm(self, slot: Slot) -> None:
        import ray
        try:
            hello = ray.get(slot.actor.hello.remote())
        except Exception as error:  # its node died as it started (placed there before Ray knew), or it broke
            with self._lock:
                self._slots.remove(slot)
                self._warm_failures += 1
                if self._warm_failures < WARM_TRIES:
                    threading.Timer(self._warm_failures, self._replace).start()  # 1 s, 2 s, ...: no storm
                    return
            self.fail(f"no worker could start on the Ray cluster at {self.address} ({WARM_TRIES} tries): "
                      f"{one_line(error)}")
            return
        self._warm_failures = 0
        differ = {k: (hello["versions"].get(k), v) for k, v in self.expect.items() if hello["versions"].get(k) != v}
        if differ:
            node = next((n["NodeManagerAddress"] for n in ray.nodes() if n["NodeID"] == hello["node"]), hello["node"])
            theirs = ", ".join(f"{k} {a}" for k, (a, _) in differ.items())
            ours = ", ".join(f"{k} {b}" for k, (_, b) in differ.items())
            self.fail(f"refused the Ray cluster at {self.address}: the node at {node} runs {theirs}; this server "
                      f"runs {ours}. Install the same version on every node (README: serving a class).")
            return
        with self._lock:
            slot.ready = True
            if not self._machine_sent:
                self._machine_sent = True
                machine = dict(hello["machine"])
                if self.address != "local":  # a run's ranks may spread over the cluster's nodes
                    totals = ray.cluster_resources()
                    machine.update(cpus=int(totals.get("CPU", 0)), gpus=int(totals.get("GPU", 0)))
                self.send({"kind": "machine", "machine": machine})
            self._changed()
            self._dispatch()

    def _replace(self) -> None:
        with self._lock:
            if not self._failed:
                self._add()

    def _changed(self) -> None:
        """Tell the page the workers and free workers, when they changed."""
        with self._lock:
            ready = [s for s in self._slots if s.ready]
            capacity = (len(ready), sum(s.run_id is None for s in ready) - len(self._pending), self._nodes_seen)
            if capacity != self._capacity:
                self._capacity = capacity
                self.send({"kind": "capacity", "workers": capacity[0], "free": max(0, capacity[1]), "nodes": capacity[2]})

    # --- runs ----------------------------------------------------------------------------------
    def run(self, command: dict[str, Any]) -> None:
        with self._lock:
            self._pending.append(command)
            self._dispatch()

    def _dispatch(self) -> None:
        with self._lock:
            while self._pending and not self._failed:
                slot = next((s for s in self._slots if s.ready and s.run_id is None), None)
                if slot is None:
                    return
                command = self._pending.pop(0)
                slot.run_id, slot.stopping = command["id"], False
                threading.Thread(target=self._train, args=(slot, command), daemon=True).start()
            self._changed()

    def _train(self, slot: Slot, command: dict[str, Any]) -> None:
        import ray
        run_id, ended = command["id"], False
        try:
            for ref in slot.actor.run.options(num_returns="streaming").remote(command):
                for message in ray.get(ref):
                    ended = ended or message["kind"] == "done"
                    self.send(message)
        except Exception as error:  # the actor or its node died (or was killed by Stop)
            if not ended:
                self.send({"kind": "done", "id": run_id, "status": "stopped"} if slot.stopping else
                          {"kind": "done", "id": run_id, "status": "failed",
                           "error": f"the Ray worker training this run died: {one_line(error)}"})
            ended = True
            try:
                ray.kill(slot.actor)  # "unavailable" may be a lost connection: make sure it trains nothing more
            except Exception:
                pass
            with self._lock:
                if slot in self._slots:
                    self._slots.remove(slot)
                    if not self._failed:
                        self._add()  # a fresh actor takes its place (pending until a node has room)
        finally:
            if not ended:
                self.send({"kind": "done", "id": run_id, "status": "failed", "error": "the run ended without a result"})
            with self._lock:
                slot.run_id = None
            self._dispatch()

    def stop(self, run_id: str) -> None:
        with self._lock:
            pending = next((c for c in self._pending if c["id"] == run_id), None)
            if pending is not None:
                self._pending.remove(pending)
                self.send({"kind": "done", "id": run_id, "status": "stopped"})
                return
            slot = next((s for s in self._slots if s.run_id == run_id), None)
            if slot is None:
                return
            slot.actor.stop.remote(run_id)
        threading.Timer(STOP_GRACE_S, self._end_if_still, args=(slot, run_id)).start()

    def _end_if_still(self, slot: Slot, run_id: str) -> None:
        import ray
        with self._lock:
            if slot.run_id != run_id:
                return
            slot.stopping = True
        ray.kill(slot.actor)  # its stream then raises: `_train` ends the run stopped and replaces it

    # --- the cluster ----------------------------------------------------------------------------
    def watch(self) -> None:
        """Notice nodes coming and going (more nodes: more workers, when the size was not set), and a lost cluster."""
        import ray
        while not self._failed:
            time.sleep(WATCH_EVERY_S)
            try:
                nodes, cpus = self._nodes(), int(ray.cluster_resources().get("CPU", 0))
            except Exception as error:
                self.fail(f"lost the Ray cluster at {self.address}: {one_line(error)}")
                return
            with self._lock:
                self._nodes_seen = nodes
                if not self.wanted and self.address != "local":
                    wanted = max(1, min(MAX_WORKERS, cpus - min(RANK_CPUS, cpus // 2)))
                    while len(self._slots) < wanted:
                        self._add()
            self._changed()

    def fail(self, error: str) -> None:
        """Give up: say why, end every run in flight with it; the process then exits."""
        with self._lock:
            if self._failed:
                return
            self._failed = True
            running = [s.run_id for s in self._slots if s.run_id] + [c["id"] for c in self._pending]
            self._pending.clear()
        self.send({"kind": "failure", "error": error})
        for run_id in running:
            self.send({"kind": "done", "id": run_id, "status": "failed", "error": error})
        os._exit(1)  # Ray's threads may hang on a lost cluster: nothing here is worth waiting for

    def shutdown(self) -> None:
        import ray
        with self._lock:
            slots, self._failed = list(self._slots), True
        for slot in slots:
            try:
                ray.kill(slot.actor)
            except Exception:
                pass
        ray.shutdown()


def one_line(error: BaseException | str) -> str:
    text = str(error).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    name = type(error).__name__ if isinstance(error, BaseException) else ""
    return (f"{name}: " if name else "") + (" ".join(lines[:3]) if lines else "no message")[:500]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", required=True, help="'local', or a Ray cluster's address (host:port, ray://host:port)")
    parser.add_argument("--expect", default="{}", help="JSON: the versions every node must run (the server's)")
    parser.add_argument("--workers", type=int, default=None, help="warm actors (default: local as the local pool; "
                        "a cluster: its CPUs, less room for a distributed run's ranks)")
    args = parser.parse_args(argv)
    out, lock = sys.stdout, threading.Lock()
    sys.stdout = sys.stderr  # a stray print must not corrupt the protocol

    def send(message: dict[str, Any]) -> None:
        with lock:
            out.write(json.dumps(message) + "\n")
            out.flush()

    driver = Driver(args.address, json.loads(args.expect), args.workers, send)
    try:
        send(driver.connect())
    except Exception as error:  # unreachable, a version Ray refuses, a bad address
        send({"kind": "failure", "error": f"could not connect to the Ray cluster at {args.address}: {one_line(error)}"})
        return 1
    try:
        driver.start_fleet()
        threading.Thread(target=driver.watch, name="watch", daemon=True).start()
        for line in sys.stdin:
            command = json.loads(line)
            if command["op"] == "run":
                driver.run(command)
            elif command["op"] == "stop":
                driver.stop(command["id"])
    finally:
        driver.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
