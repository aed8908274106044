"""Seeds as arms, asserted: several seeds of one config trained as one run give each seed the records,
summary and stored run that a run of that seed alone gives; the page's seed group serves stored seeds
from the store and trains the rest together."""
import threading

import pytest

from batched_runs import worst_difference
from explorer.runs import worker
from explorer.runs.seeded import SeedsRun, start_seeds_or_load
from explorer.runs.store import RunStore
from explorer.view.seeds import SeedGroup
from scenarios import get_scenario
from scenarios.driver import Event
from scenarios.seeded import arm_and_seed, seed_arm, split

TINY_SEEDS = {
    "generalization": {"n": 50, "width": 8, "steps": 12, "patience": 5, "sweep": "100,1000", "dropout": 0.3},
    "optimizers": {"steps": 12, "net_steps": 10, "lr": 0.025},
    "contrastive": {"temperatures": "0.02,1", "batch": 16, "steps": 10},
    "dpo-beta": {"betas": "0.1,1", "labels": "hard", "tabular_steps": 20, "sequence_steps": 5, "pairs": 64},
}


def test_seed_names_round_trip_and_split_gives_each_seed_its_rows() -> None:
    import pandas as pd
    assert arm_and_seed(seed_arm("β=0.1 · tabular", 12)) == ("β=0.1 · tabular", 12)
    assert arm_and_seed("β=0.1") == ("β=0.1", None)
    frame = pd.DataFrame([(seed_arm("a", 1), 0, "loss", 1.0), (seed_arm("a", 2), 0, "loss", 2.0)],
                         columns=["arm", "step", "metric", "value"])
    parts = split(frame, [Event(seed_arm("a", 2), 3, "diverged", "diverged at step 3")], [1, 2])
    assert parts[1][0].values.tolist() == [["a", 0, "loss", 1.0]] and parts[1][1] == []
    assert parts[2][1] == [Event("a", 3, "diverged", "diverged at step 3")]


@pytest.mark.parametrize("scenario_id", sorted(TINY_SEEDS))
def test_seeds_trained_together_equal_each_seed_alone(scenario_id: str) -> None:
    """Records bit for bit, the same summary and status, for every seed."""
    scenario, config = get_scenario(scenario_id), TINY_SEEDS[scenario_id]
    together = scenario.run_seeds(config, [3, 4, 5])
    for seed, result in zip([3, 4, 5], together):
        alone = scenario.run({**config, "seed": seed})
        worst, where = worst_difference(alone.frame, result.frame)
        assert worst == 0.0, f"seed {seed}: worst relative difference {worst:.2e} at {where}"
        assert result.summary == alone.summary and result.status == alone.status, f"seed {seed}"


class InProcessPool:
    """The pool's part, in this process: hand the job to the worker's own `train` with its messages
    going straight to the job (what the pool's reader thread does with a worker's stdout)."""

    def submit(self, job) -> None:
        threading.Thread(target=worker.train, args=({"id": job.id, **job.request()}, job.receive, threading.Event()),
                         daemon=True).start()

    def cancel(self, job) -> None: ...

    def waiting(self, job) -> None:
        return None


def test_a_seeds_run_stores_each_seed_as_its_own_run_and_a_second_group_comes_from_the_store() -> None:
    scenario = get_scenario("generalization")
    config = scenario.validate({**TINY_SEEDS["generalization"], "seed": 7})
    store, pool = RunStore(), InProcessPool()
    group = SeedGroup.start(scenario, config, 3, starter=None,
                            batch_starter=lambda s, c, seeds: start_seeds_or_load(s, c, seeds, store=store, pool=pool))
    assert group.join(timeout=120)
    snap = group.snapshot()
    assert snap.status == "finished" and snap.progress == 1.0, (snap.status, snap.progress, snap.error)
    assert isinstance(group.handles[0].run, SeedsRun) and len({id(h.run) for h in group.handles}) == 1, "one run"
    runs = {run.config["seed"]: run for run in store.list_runs(scenario.id)}
    assert sorted(runs) == [7, 8, 9], sorted(runs)
    for seed, run in runs.items():
        alone = scenario.run({**TINY_SEEDS["generalization"], "seed": seed})
        worst, where = worst_difference(alone.frame, store.frame(run.run_id))
        assert worst == 0.0 and run.status == "finished", f"seed {seed}: {worst:.2e} at {where}, {run.status}"
    again = SeedGroup.start(scenario, config, 3, starter=None,
                            batch_starter=lambda s, c, seeds: start_seeds_or_load(s, c, seeds, store=store, pool=pool))
    assert again.join(timeout=60) and again.snapshot().from_store, "the second time every seed comes from the store"
