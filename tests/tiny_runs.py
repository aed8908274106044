"""Tiny runs of each scenario, shared by the tests that need a real frame (cached per session)."""
import json
from functools import cache

import pandas as pd

from scenarios import get_scenario
from scenarios.base import RunResult


def tiny_result(scenario_id: str, **overrides) -> RunResult:
    """The scenario's `tiny` config with `overrides` on top, run once per session."""
    return _run(scenario_id, json.dumps(overrides, sort_keys=True))


@cache
def _run(scenario_id: str, overrides: str) -> RunResult:
    scenario = get_scenario(scenario_id)
    return scenario.run({**scenario.tiny, **json.loads(overrides)})


def tiny_frame(scenario_id: str) -> pd.DataFrame:
    return tiny_result(scenario_id).frame
