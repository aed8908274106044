"""Several seeds of one config trained by a worker as one run, seen and stored as one run per seed.

A scenario that `batches_seeds` trains the seeds of "repeat over seeds" as more arms of its
batched models (scenarios/seeded.py), so the band costs about one run. `SeedsRun` is that
run's job in the pool: the worker runs `Scenario.run_seeds` and streams rows whose arm names
carry the seed; the run keeps each seed's rows apart as they come, and on `done` stores one
run per seed, under that seed's own config, exactly as a run of that seed alone is stored (so
a later single run, or a later group, of that seed is served from the store). `SeedView` is
one seed of it, read like a `RunHandle` by the page's seed group.
"""
import time
from typing import Any

import pandas as pd

from explorer.runs.handle import EMPTY, RunHandle, Snapshot
from explorer.runs.serving import save_result, stored_result
from explorer.runs.store import COMPLETE, RunStore
from scenarios.base import COLUMNS, Scenario, ScenarioConfig
from scenarios.seeded import arm_and_seed


class SeedsRun(RunHandle):
    """One worker run of `config` at each of `seeds`; `views()` gives one `SeedView` per seed."""

    def __init__(self, scenario: Scenario, config: ScenarioConfig, seeds: list[int], store: RunStore | None = None,
                 pool=None, session: str = "") -> None:
        super().__init__(scenario, config, store, pool, session)
        self.seeds = list(seeds)
        self._by_seed: dict[int, list[tuple]] = {seed: [] for seed in self.seeds}
        self._seed_events: dict[int, list[dict[str, Any]]] = {seed: [] for seed in self.seeds}
        self._seed_ends: dict[int, dict[str, Any]] = {}  # seed -> status, error, run_id once done
        self._seed_frames: dict[int, tuple[int, pd.DataFrame]] = {}

    @classmethod
    def start_seeds(cls, scenario: Scenario, config: ScenarioConfig, seeds: list[int], store: RunStore | None = None,
                    *, pool, session: str = "") -> "SeedsRun":
        run = cls(scenario, config, seeds, store, pool, session)
        pool.submit(run)
        return run

    def views(self) -> list["SeedView"]:
        return [SeedView(self, seed) for seed in self.seeds]

    def request(self) -> dict[str, Any]:
        return {**super().request(), "seeds": self.seeds}

    def receive(self, message: dict[str, Any]) -> None:
        if message["kind"] == "rows":
            with self._lock:
                for row in message["rows"]:
                    arm, seed = arm_and_seed(row[0])
                    if seed in self._by_seed:
                        self._by_seed[seed].append((arm, *row[1:]))
        elif message["kind"] == "event":
            arm, seed = arm_and_seed(message["event"]["arm"])
            if seed in self._seed_events:
                with self._lock:
                    self._seed_events[seed].append({**message["event"], "arm": arm})
        super().receive(message)

    def _finish(self, done: dict[str, Any]) -> None:
        """Store one run per seed (what `RunHandle._finish` does for one run), then end."""
        status, error = done["status"], done.get("error")
        per_seed = {int(seed): value for seed, value in (done.get("seeds") or {}).items()}
        ends = {}
        for seed in self.seeds:
            config = self.config.model_copy(update={"seed": seed})
            frame, mine = self.seed_frame(seed), per_seed.get(seed, {})
            seed_status = mine.get("status", status)
            run_id = None
            keep = self.store is not None and seed_status != "refused" and (
                seed_status != "stopped" or (self._keep and not frame.empty))
            if keep:
                summary = mine.get("summary") or {**self._safe_summary(frame, config), "status": seed_status}
                try:
                    run_id = save_result(self.store, self.scenario, config, seed_status, frame, summary,
                                         list(self._seed_events[seed]), done.get("seconds", 0.0), error)
                except Exception as exc:
                    error = (error + "; " if error else "") + f"could not save to the run store: {exc}"
            ends[seed] = {"status": seed_status, "error": error, "run_id": run_id}
        with self._lock:  # the run itself is not stored: its seeds are
            self._seed_ends = ends
            self.train_seconds = done.get("seconds")
            self._status, self._error, self._traceback = status, error, done.get("traceback")
            self._ended_at, self._note = time.perf_counter(), None
            if status in COMPLETE:
                self._progress = 1.0
        self._ended.set()

    def _safe_summary(self, frame: pd.DataFrame, config: ScenarioConfig) -> dict[str, Any]:
        try:
            return self.scenario.summarize(frame, config)
        except Exception:
            return {}

    def seed_frame(self, seed: int) -> pd.DataFrame:
        with self._lock:
            rows = self._by_seed[seed]
            count, frame = self._seed_frames.get(seed, (0, EMPTY))
            if count == len(rows):
                return frame
            rows = list(rows)
        frame = pd.DataFrame(rows, columns=COLUMNS)
        with self._lock:
            self._seed_frames[seed] = (len(rows), frame)
        return frame

    def seed_snapshot(self, seed: int, with_frame: bool = True) -> Snapshot:
        whole = super().snapshot(with_frame=False)
        frame = self.seed_frame(seed) if with_frame else EMPTY
        with self._lock:
            end, events = self._seed_ends.get(seed), list(self._seed_events[seed])
            steps = 1 + max((row[1] for row in self._by_seed[seed]), default=-1)
        status = end["status"] if end else whole.status
        return Snapshot(frame, status, whole.progress, events, end["error"] if end else whole.error, whole.elapsed_s,
                        end["run_id"] if end else None, False, None, whole.waiting, steps)


class SeedView:
    """One seed of a `SeedsRun`, read as a `RunHandle` (snapshot, join, stop, first record)."""

    def __init__(self, run: SeedsRun, seed: int) -> None:
        self.run, self.seed = run, seed
        self.scenario, self.config = run.scenario, run.config.model_copy(update={"seed": seed})

    @property
    def running(self) -> bool:
        return self.run.running

    @property
    def traceback(self) -> str | None:
        return self.run.traceback

    def snapshot(self, with_frame: bool = True) -> Snapshot:
        return self.run.seed_snapshot(self.seed, with_frame)

    def rows_count(self) -> int:
        return len(self.run._by_seed[self.seed])

    def join(self, timeout: float | None = None) -> bool:
        return self.run.join(timeout)

    def stop(self, keep: bool = True) -> None:
        self.run.stop(keep)

    def wait_for_first_record(self, timeout: float, steps: int = 1) -> bool:
        deadline = time.perf_counter() + timeout
        while self.snapshot(with_frame=False).steps < steps:
            if not self.run.running or time.perf_counter() > deadline:
                return False
            self.run.wait_for_first_record(min(0.05, max(0.0, deadline - time.perf_counter())), 1)
            time.sleep(0.01)
        return True


def start_seeds_or_load(scenario: Scenario, config: ScenarioConfig, seeds: list[int], *, store: RunStore, pool,
                        fresh: bool = False, session: str = "") -> list:
    """One handle per seed, in seed order: a stored complete run of that seed's config where there is one
    (unless `fresh`), and for the rest the views of one `SeedsRun` that trains them together (`session`:
    the browser tab whose queue the backend serves it from)."""
    handles: dict[int, Any] = {}
    for seed in seeds:
        one = config.model_copy(update={"seed": seed})
        stored = stored_result(store, scenario, one, fresh=fresh)
        if stored is not None and stored.status in COMPLETE:
            handles[seed] = RunHandle.from_stored(scenario, stored, store)
    missing = [seed for seed in seeds if seed not in handles]
    if len(missing) == 1:
        handles[missing[0]] = RunHandle.start(scenario, config.model_copy(update={"seed": missing[0]}), store, pool=pool,
                                              session=session)
    elif missing:
        for view in SeedsRun.start_seeds(scenario, config, missing, store, pool=pool, session=session).views():
            handles[view.seed] = view
    return [handles[seed] for seed in seeds]
