"""The Python API, for notebooks and scripts: `explorer.run(scenario_id, **settings)`.

    import explorer
    result = explorer.run("vanishing-gradients", depth=12)
    result.frame          # the records: arm, step, metric, value (long format)
    result.figures        # name -> plotly figure, built when first read
    result.explanation    # the takeaway and details, each sentence proven by the records
    result                # in Jupyter: what ran and its explanation; `result.figures` every figure

The same serve-or-train rule as the page and the CLI (explorer/runs/serving.py): a complete run of
the same settings on the same code is read from the run store instead of trained again (`fresh=True`
trains anyway, `store=False` neither reads nor writes it). A run that trains shows a progress bar
when tqdm is installed (in a notebook, its widget when ipywidgets is there too); without it, none.
"""
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pandas as pd

from scenarios.base import Scenario
from scenarios.explanation import Explanation

__all__ = ["Result", "run", "scenarios"]


@dataclass(frozen=True)
class Result:
    """One run of a scenario: its records, figures and explanation."""
    scenario: Scenario
    config: dict[str, Any]
    status: str               # finished, diverged or stopped
    run_id: str | None        # its id in the run store (None when not stored)
    served_from_store: bool   # read from the store, not trained now
    frame: pd.DataFrame
    summary: dict[str, Any]
    backend: str = "local"    # where it trained: "local" (this process) or "ray"

    @cached_property
    def figures(self):
        """The scenario's figures for this run: a mapping of name -> plotly Figure, each built when
        first read; in a notebook the mapping shows them all."""
        return self.scenario.figures(self.frame, self.scenario.validate(self.config))

    @cached_property
    def explanation(self) -> Explanation:
        """What to look for: a takeaway and details, each built from claims the records prove."""
        return self.scenario.explain(self.frame, self.scenario.validate(self.config))

    def _repr_markdown_(self) -> str:
        where = f"run `{self.run_id}`" if self.run_id else "not stored"
        source = "served from the run store" if self.served_from_store else "trained now"
        return f"**{self.scenario.title}**: {self.status}, {where}, {source}.\n\n{self.explanation.markdown()}"


class _Progress:
    """A run's sink drawing a tqdm bar (tqdm.auto: a widget in a notebook), if tqdm is installed."""

    def __init__(self, label: str, show: bool) -> None:
        self.bar = None
        if show:
            try:
                from tqdm.auto import tqdm
            except ImportError:  # no tqdm: no bar, the run is the same
                return
            self.bar = tqdm(total=100, desc=label, unit="%", bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}")

    def add(self, rows) -> None:
        pass

    def event(self, event) -> None:
        pass

    def note(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(text[:60])

    def progress(self, fraction: float) -> None:
        if self.bar is not None:
            self.bar.n = round(100 * fraction, 1)
            self.bar.refresh()

    def stop_requested(self) -> bool:
        return False

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def scenarios() -> dict[str, str]:
    """Every scenario's id and its question."""
    from scenarios import all_scenarios
    return {scenario.id: scenario.question for scenario in all_scenarios()}


def run(scenario_id: str, *, fresh: bool = False, store: bool = True, progress: bool = True,
        ray: str | None = None, **settings: Any) -> Result:
    """Run scenario `scenario_id` with `settings` (its Config's fields; the rest take their
    defaults) and return its records, figures and explanation.

    An unknown id raises KeyError and a bad setting `scenarios.ConfigError` (a ValueError), each
    in one line naming it, before anything trains. `fresh=True` trains even when the run store holds this config; `store=False`
    neither reads nor writes the store; `progress=False` draws no bar. `ray="local"` or a cluster's address
    (default: `EXPLORER_RAY_ADDRESS`) trains on Ray; the records come back and are stored here. A run that
    fails there raises RuntimeError with its reason.
    """
    from explorer.runs.backend import ray_address
    from explorer.runs.serving import save_result, stored_result
    from explorer.runs.store import RunStore
    from scenarios import get_scenario
    scenario = get_scenario(scenario_id)
    config = scenario.validate(settings)
    run_store = RunStore() if store else None
    stored = stored_result(run_store, scenario, config, fresh=fresh) if run_store else None
    if stored is not None:
        return Result(scenario, config.model_dump(mode="json"), stored.status, stored.run_id, True,
                      run_store.frame(stored.run_id), stored.summary)
    if ray_address(ray):
        return _on_ray(ray_address(ray), scenario, config, run_store, progress)
    from engines.loop.runtime import configure
    configure()
    sink = _Progress(scenario.id, progress)
    try:
        from explorer.runs.points import points_of
        result = scenario.run(config, sink=sink, points=None if fresh else points_of(run_store))
    finally:
        sink.close()
    run_id = save_result(run_store, scenario, config, result.status, result.frame, result.summary,
                         [vars(e) for e in result.events], result.duration_s) if run_store else None
    return Result(scenario, config.model_dump(mode="json"), result.status, run_id, False, result.frame, result.summary)


def _on_ray(address: str, scenario: Scenario, config, run_store, progress: bool) -> Result:
    from explorer.runs.backend import run_through
    from explorer.runs.ray_backend import RayBackend
    backend, sink = RayBackend(address), _Progress(scenario.id, progress)
    try:
        snap = run_through(backend, scenario, config, run_store, sink, session="api").snapshot()
    finally:
        sink.close()
        backend.shutdown()
    if snap.status not in ("finished", "diverged", "stopped"):
        raise RuntimeError(f"the run failed on Ray: {snap.error}")
    summary = {**scenario.summarize(snap.frame, config), "status": snap.status}
    return Result(scenario, config.model_dump(mode="json"), snap.status, snap.run_id, False, snap.frame, summary, "ray")
