"""Records: the value a metric had at a step (a binary search), and the per-layer tables (as pandas pivots them)."""
import numpy as np
import pandas as pd

from scenarios.records import Records


def test_at_reads_the_later_value_of_a_step_logged_twice_and_none_where_nothing_was_logged() -> None:
    frame = pd.DataFrame([("a", 0, "loss", 3.0), ("a", 2, "loss", 2.0), ("a", 2, "loss", 1.5), ("b", 1, "loss", 9.0)],
                         columns=["arm", "step", "metric", "value"])
    records = Records(frame)
    assert records.at("a", "loss", 0) == 3.0
    assert records.at("a", "loss", 2) == 1.5
    assert records.at("a", "loss", 1) is None and records.at("a", "loss", 5) is None and records.at("a", "loss", -1) is None
    assert records.at("b", "loss", 1) == 9.0 and records.at("a", "acc", 0) is None and records.at("c", "loss", 0) is None


def test_at_agrees_with_a_mask_over_the_series_on_a_shuffled_frame() -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"arm": rng.choice(["a", "b"], 2000), "step": rng.integers(0, 40, 2000),
                          "metric": rng.choice(["x", "y"], 2000), "value": rng.normal(size=2000)})
    records = Records(frame)
    for arm in ("a", "b"):
        for metric in ("x", "y"):
            series = records.series(arm, metric)
            for step in range(-1, 42):
                hits = series[series.index == step]
                assert records.at(arm, metric, step) == (float(hits.iloc[-1]) if len(hits) else None)


def test_layers_is_the_pivot_table_of_the_arms_per_layer_rows_on_a_shuffled_frame() -> None:
    """Steps logged twice are averaged, steps missing a layer dropped, layers in order, as `pivot_table` gives."""
    rng = np.random.default_rng(1)
    n = 3000
    frame = pd.DataFrame({"arm": rng.choice(["a", "b"], n), "step": rng.integers(0, 60, n),
                          "metric": [f"grad_norm/layer_{layer:02d}" for layer in rng.integers(1, 12, n)],
                          "value": rng.normal(size=n)})
    frame.loc[::7, "metric"] = "loss"
    records = Records(frame)
    for arm in ("a", "b"):
        rows = records.layer_table("grad_norm")
        expected = rows[rows["arm"] == arm].pivot_table(index="step", columns="layer", values="value").dropna()
        assert len(expected) > 5, "the frame must have complete steps to compare"
        pd.testing.assert_frame_equal(records.layers(arm, "grad_norm"), expected)
        mine = records.layers(arm, "grad_norm")
        mine.iloc[0, 0] = 1e9  # a caller's change stays its own
        pd.testing.assert_frame_equal(records.layers(arm, "grad_norm"), expected)
    assert records.layers("a", "out_grad").empty and records.layers("c", "grad_norm").empty
