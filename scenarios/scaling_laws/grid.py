"""The grid of a scaling-law run as the driver's arms: the points (each trained or read from the
point cache), then the fits, each reading the records the points left."""
from collections.abc import Iterator

import numpy as np

from engines.loop.records import StepRecord
from scenarios.base import Arm, Event, Run
from scenarios.points import point_key
from scenarios.records import Records

GRID, SOURCE = "grid", "source"
COUNTS = {"non-embedding": "body_params", "with embeddings": "total_params"}  # the count -> its metric
FIT = {count: f"fit, N {count}" for count in COUNTS}
OPTIMUM = {count: f"optimum, N {count}" for count in COUNTS}


def grid_arm(scenario_id: str, code_version: str, specs: list, data_of, run: Run) -> Arm:
    """One item per training step of every point not in `run.points`, one per point: its metrics as
    a record at step = its place in the grid. An event says whether each point trained or was kept."""
    from engines.sequence.scaling import point_key as spec_key, point_steps
    cache = run.points
    keys = [point_key(scenario_id, spec_key(spec), code_version) for spec in specs]
    kept = [cache.get(key) if cache is not None else None for key in keys]
    steps = sum(1 if found is not None else spec.steps + 1 for spec, found in zip(specs, kept))

    def items() -> Iterator:
        for index, (spec, key, found) in enumerate(zip(specs, keys, kept)):
            label = f"d_model {spec.width}, {spec.tokens:,} tokens"
            if found is None:
                for found in point_steps(spec, data_of()):
                    if found is None:
                        yield None
                if cache is not None:
                    cache.put(key, found)
            run.event(Event(GRID, index, "point", f"{label}: " + ("trained" if kept[index] is None else "from the point cache")))
            yield StepRecord(index, found)
    return Arm(GRID, items(), steps, cost=1.0)


def grid_table(records: Records):
    """The grid's points, one row each (step = place in the grid): width, steps, tokens, counts, losses."""
    import pandas as pd
    names = ["width", "steps", "tokens", "body_params", "total_params", "heldout_loss", "train_loss"]
    table = pd.DataFrame({name: records.series(GRID, name) for name in names if records.has(name, GRID)})
    if "heldout_loss" not in table:
        return table
    return table[np.isfinite(table["heldout_loss"])]  # a point that diverged has no loss to fit


def fit_arm(count: str, run: Run, budgets: int) -> Arm:
    """The law fitted to the grid's finite points with N counted one way, then the compute-optimal
    N and D at `budgets` compute budgets inside the grid (records of OPTIMUM[count], one per budget)."""
    def items() -> Iterator:
        from engines.sequence.scaling_fit import fit_law
        from engines.sequence.scaling_law import FLOPS_PER_PARAM_TOKEN, budgets as budgets_of
        table = grid_table(Records(run.frame()))
        if len(table) < 5 or table["width"].nunique() < 2 or table["tokens"].nunique() < 2:
            return
        n, d, loss = table[COUNTS[count]].to_numpy(), table["tokens"].to_numpy(), table["heldout_loss"].to_numpy()
        law, huber = fit_law(n, d, loss)
        residual = np.log(law.loss(n, d)) - np.log(loss)
        yield StepRecord(0, {"E": law.E, "A": law.A, "B": law.B, "alpha": law.alpha, "beta": law.beta, "a": law.a,
                             "b": law.b, "huber": huber, "rms_log_residual": float(np.sqrt(np.mean(residual ** 2))),
                             "points": float(len(table))})
        for k, compute in enumerate(budgets_of(FLOPS_PER_PARAM_TOKEN * n * d, budgets)):
            n_opt, d_opt = law.optimum(compute)
            run.add(OPTIMUM[count], k, {"compute": compute, "n_opt": n_opt, "d_opt": d_opt,
                                        "loss_opt": law.loss(n_opt, d_opt), "tokens_per_param": d_opt / n_opt})
    return Arm(FIT[count], items(), 1, cost=250.0)  # a fit costs about as much as 250 training steps
