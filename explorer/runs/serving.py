"""The one serve-or-train rule, used by the page and the CLI alike.

A complete run (finished or diverged) of the same scenario, the same key (the config
without its view fields, canonical) and the same code version is served from the store;
anything else trains. `--fresh` / "Retrain" skip the lookup.
"""
from typing import Any

import pandas as pd

from explorer.runs.store import RunStore, StoredRun
from scenarios.base import Scenario, ScenarioConfig


def stored_result(store: RunStore, scenario: Scenario, config: ScenarioConfig, *, fresh: bool = False) -> StoredRun | None:
    """The stored complete run this config would reproduce, or None when it must train."""
    if fresh:
        return None
    return store.lookup(scenario.id, scenario.key_of(config), scenario.code_version())


def save_result(store: RunStore, scenario: Scenario, config: ScenarioConfig, status: str, frame: pd.DataFrame,
                summary: dict[str, Any], events: list[dict[str, Any]], duration_s: float,
                error: str | None = None) -> str:
    """Store one run under its key; returns the run id."""
    return store.save(scenario.id, config.model_dump(mode="json"), scenario.code_version(), status, frame, summary,
                      events, duration_s, error, key=scenario.key_of(config))
