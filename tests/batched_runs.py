"""A scenario's batched arms against its sequential arms: the same records, the same figures, the same sentences.

`phases(config, batched=False)` is each batched scenario's reference path: every arm trained
alone, one after another, through `engines.loop.training.train`. The batched path trains them as
one model (engines/loop/batched.py). Records must agree per (arm, step, metric): float64
engines to 1e-10, float32 to 1e-5, relative to the value (or to 1e-12 absolute at 0).
"""
import base64
import math

import numpy as np
import pandas as pd

from scenarios import get_scenario
from scenarios.base import Run
from scenarios.records import Records


def sequential_frame(scenario_id: str, config: dict) -> pd.DataFrame:
    scenario = get_scenario(scenario_id)
    run = Run()
    run.drive(scenario.phases(scenario.validate(config), batched=False))
    return run.frame()


def batched_frame(scenario_id: str, config: dict) -> pd.DataFrame:
    return get_scenario(scenario_id).run(config).frame


def by_key(frame: pd.DataFrame) -> pd.Series:
    return frame.set_index(["arm", "step", "metric"])["value"].sort_index()


def scale_of(values: pd.Series) -> np.ndarray:
    """What a difference is measured against besides the value itself: 1e-12, or for one element of a
    vector (`name/index_II`: singular values) the vector's largest |element| at that arm and step, since
    the trailing singular values of a low-rank ΔW are rounding noise of the leading ones."""
    keys = values.index.to_frame(index=False)
    family = keys["metric"].str.replace(r"/index_\d+$", "/index_", regex=True)
    vector = family.str.endswith("/index_").to_numpy()
    largest = values.abs().groupby([keys["arm"].to_numpy(), keys["step"].to_numpy(), family.to_numpy()]).transform("max")
    return np.where(vector, np.maximum(largest.to_numpy(float), 1e-12), 1e-12)


def worst_difference(sequential: pd.DataFrame, batched: pd.DataFrame) -> tuple[float, tuple]:
    """The largest relative difference over every (arm, step, metric), and where; the two frames must
    hold the same keys (an assertion names the ones only one has)."""
    a, b = by_key(sequential), by_key(batched)
    only = a.index.symmetric_difference(b.index)
    assert len(only) == 0, f"{len(only)} keys in one frame only, e.g. {list(only[:5])}"
    x, y = a.to_numpy(float), b.reindex(a.index).to_numpy(float)
    both_nan = np.isnan(x) & np.isnan(y)
    diff = np.where(both_nan, 0.0, np.abs(x - y) / np.maximum(np.abs(x), scale_of(a)))
    if not len(diff):
        return 0.0, ()
    worst = int(np.nanargmax(diff))
    return float(diff[worst]), (*a.index[worst], x[worst], y[worst])


def assert_same_run(scenario_id: str, config: dict, tolerance: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run both paths; assert equal records, sentences and figure data; return both frames."""
    scenario = get_scenario(scenario_id)
    sequential, batched = sequential_frame(scenario_id, config), batched_frame(scenario_id, config)
    worst, where = worst_difference(sequential, batched)
    assert worst <= tolerance, f"{scenario_id} {config}: worst relative difference {worst:.2e} at {where}"
    settings = scenario.validate(config)
    said = [str(scenario.explain(frame, settings)) for frame in (sequential, batched)]
    assert said[0] == said[1], f"sentences differ:\n{said[0]}\n{said[1]}"
    figures = [scenario.figures(frame, settings) for frame in (sequential, batched)]
    assert list(figures[0]) == list(figures[1])
    for name in figures[0]:
        assert_same_figure(figures[0][name].to_plotly_json(), figures[1][name].to_plotly_json(), tolerance, name)
    assert Records(sequential).arms() == Records(batched).arms(), "arms in a different order"
    return sequential, batched


def assert_same_figure(a, b, tolerance: float, where: str, scale: float = 0.0) -> None:
    """Equal structure and text; numbers within `tolerance` of the larger of themselves and the largest
    number of their array (a trace's singular values spread over 10 orders of magnitude)."""
    if isinstance(a, dict) and "bdata" in a:  # a numpy array, base64-encoded by plotly
        a, b = _array(a), _array(b)
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: keys {sorted(a)} vs {sorted(b)}"
        for key in a:
            assert_same_figure(a[key], b[key], tolerance, f"{where}.{key}")
    elif isinstance(a, (list, tuple, np.ndarray)):
        a, b = list(a), list(b)
        assert len(a) == len(b), f"{where}: {len(a)} vs {len(b)} items"
        numbers = [abs(float(v)) for v in a if isinstance(v, (float, np.floating)) and not math.isnan(v)]
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_figure(x, y, tolerance, f"{where}[{i}]", max(numbers, default=scale))
    elif isinstance(a, (float, np.floating, int, np.integer)) and not isinstance(a, bool):
        x, y = float(a), float(b)
        close = abs(x - y) <= tolerance * max(abs(x), scale, 1e-12)
        assert (math.isnan(x) and math.isnan(y)) or close, f"{where}: {x} vs {y}"
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def _array(encoded: dict) -> np.ndarray:
    values = np.frombuffer(base64.b64decode(encoded["bdata"]), dtype=np.dtype(encoded["dtype"]))
    shape = encoded.get("shape")
    return values.reshape([int(n) for n in str(shape).split(",")]) if shape is not None else values
