"""A growing run's records (explorer/runs/growing.py): a flush of steps, sent to SQLite as one JSON text,
reads back value for value, in order, non-finite values and odd names included."""
import math
import random

import pytest

from explorer.runs import growing
from explorer.runs.store import RunStore

ODD = [5e-324, 1e-310, 2.2250738585072014e-308, 1.7976931348623157e308, -0.0, 0.0, 1e-18, 1 / 3, -1e-300,
       9007199254740993.0, math.nan, math.inf, -math.inf]


def steps_of(seed: int, count: int = 40) -> list[tuple[int, dict[str, float]]]:
    rng = random.Random(seed)
    names = ["loss", "grad_norm/layer_01", "NaN count", "Infinity", 'a "quoted" name', "ünïcode/λ", "lr"]
    steps = []
    for step in range(count):
        values = [rng.choice(ODD) if rng.random() < 0.2 else rng.random() * 10.0 ** rng.randint(-30, 30)
                  for _ in names]
        steps.append((step * 3, dict(zip(rng.sample(names, len(names)), values))))  # each step its own order
    return steps


def same(a: float, b: float) -> bool:
    """Equal, NaN to NaN (SQLite keeps no sign on a zero, row by row as in JSON: −0.0 reads as 0.0)."""
    return (math.isnan(a) and math.isnan(b)) or a == b


@pytest.mark.parametrize("seed", [0, 1])
def test_appended_steps_read_back_exactly_and_in_order(tmp_path, seed: int) -> None:
    store = RunStore(str(tmp_path / "store.sqlite3"))
    run_id = growing.begin(store, "watched", {"seed": seed}, "v", "a run")
    first, second = steps_of(seed), steps_of(seed + 10)
    growing.append_steps(store, run_id, "arm", first, [{"arm": "arm", "step": 3, "kind": "note", "message": "m"}])
    growing.append_steps(store, run_id, "arm", second)
    frame, _ = growing.records_since(store, run_id)
    expected = [("arm", step, name, value) for step, metrics in first + second for name, value in metrics.items()]
    got = list(frame.itertuples(index=False, name=None))
    assert len(got) == len(expected), f"{len(got)} rows read back, {len(expected)} appended"
    wrong = [(e, g) for e, g in zip(expected, got) if e[:3] != g[:3] or not same(e[3], g[3])]
    assert not wrong, f"{len(wrong)} of {len(expected)} rows differ, first: appended {wrong[0][0]}, read {wrong[0][1]}"


def test_without_sqlites_json_functions_the_rows_go_in_one_by_one(tmp_path, monkeypatch) -> None:
    """An SQLite built without json_each: the same rows, through executemany."""
    monkeypatch.setattr(growing, "STEPS_SQL", growing.STEPS_SQL.replace("json_each", "json_each_missing"))
    store = RunStore(str(tmp_path / "store.sqlite3"))
    run_id = growing.begin(store, "watched", {}, "v", None)
    steps = steps_of(2, count=5)
    growing.append_steps(store, run_id, "arm", steps)
    frame, _ = growing.records_since(store, run_id)
    values = [value for _, metrics in steps for value in metrics.values()]
    assert len(frame) == len(values) and all(map(same, values, frame["value"])), "rows lost or changed"
