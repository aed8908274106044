"""A point cache: results of a run's independent grid points, kept across runs (a scaling-law grid).

A scenario whose run is a grid of independent points (each a pure function of its own spec) asks
`run.points` before it trains one: `get(key)` gives the point's stored metrics, or None; after
training, `put(key, metrics)` keeps them. The key is `point_key(scenario id, the point's canonical
spec, code version)`, so a change to the code that made a point makes it stale, as a whole run's
code version does. A rerun with a wider grid trains only the points it has not seen.

Who offers one: the run store (explorer/runs/points.py), handed to `Scenario.run(..., points=...)`
by the page's worker, the CLI and the Python API when they store runs. Without one (`points=None`,
a notebook's `Scenario.run`) every point trains. Metrics are plain floats, as records are.
"""
import hashlib
from typing import Protocol


class PointCache(Protocol):
    def get(self, key: str) -> dict[str, float] | None: ...
    def put(self, key: str, metrics: dict[str, float]) -> None: ...


def point_key(scenario: str, spec: str, code_version: str) -> str:
    """One point's name in a cache: its scenario, its canonical spec (a JSON string) and the code version."""
    return hashlib.sha256(f"{scenario}\n{spec}\n{code_version}".encode()).hexdigest()[:32]


class MemoryPoints:
    """A point cache in a dict (tests; a notebook that reruns a grid in one process)."""

    def __init__(self) -> None:
        self.kept: dict[str, dict[str, float]] = {}

    def get(self, key: str) -> dict[str, float] | None:
        found = self.kept.get(key)
        return dict(found) if found is not None else None

    def put(self, key: str, metrics: dict[str, float]) -> None:
        self.kept[key] = dict(metrics)
