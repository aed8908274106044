"""One tiny run per scenario, shared by the feature tests that need a real frame (cached per session)."""
from functools import cache

import pandas as pd

from scenarios import get_scenario


@cache
def tiny_frame(scenario_id: str) -> pd.DataFrame:
    scenario = get_scenario(scenario_id)
    return scenario.run(scenario.tiny).frame
