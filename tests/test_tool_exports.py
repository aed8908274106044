"""`export RUN`: TensorBoard event files (read back with TensorBoard's own reader), Parquet and CSV
that give back the stored records; bad targets refused in one line before anything is written."""
import json
import math

import numpy as np
import pandas as pd
import pytest

from explorer.cli.main import main
from explorer.runs.store import RunStore

# Two arms whose names escape to the same folder name, a metric with a group, a NaN and an inf.
FRAME = pd.DataFrame({
    "arm": ["relu · he"] * 4 + ["relu + he"] * 2,
    "step": [0, 1, 0, 1, 0, 1],
    "metric": ["loss", "loss", "grad_norm/layer_01", "grad_norm/layer_01", "loss", "loss"],
    "value": [0.69, 0.5, 1e-3, float("nan"), 0.7, float("inf")],
})


@pytest.fixture
def run_id() -> str:
    return RunStore().save("vanishing-gradients", {"depth": 4}, "v1", "finished", FRAME, {"headline": {}})


def test_tensorboard_event_files_read_back_as_the_records(run_id, tmp_path, capsys) -> None:
    """A run per arm (two arms that escape alike get two folders), a scalar per metric; values as float32."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    assert main(["export", run_id, "--tensorboard", str(tmp_path / "tb"), "--json"]) == 0
    folders = json.loads(capsys.readouterr().out)["files"]
    assert sorted(p.rsplit("/", 1)[1] for p in folders) == ["relu-he", "relu-he-2"], folders
    for folder, (arm, rows) in zip(folders, FRAME.groupby("arm", sort=False)):
        events = EventAccumulator(folder)
        events.Reload()
        assert sorted(events.Tags()["scalars"]) == sorted(rows["metric"].unique()), (arm, events.Tags())
        for metric, series in rows.groupby("metric"):
            read = events.Scalars(metric)
            assert [e.step for e in read] == series["step"].tolist(), (arm, metric)
            wanted = series["value"].astype(np.float32).tolist()
            got = [e.value for e in read]
            assert all(a == b or (math.isnan(a) and math.isnan(b)) for a, b in zip(got, wanted)), (arm, metric, got)


def test_parquet_and_csv_give_back_the_records_and_the_run(run_id, tmp_path) -> None:
    """Parquet keeps the frame (NaN and inf too) and names the scenario, run and config in its metadata;
    the CSV is run --out's metrics.csv."""
    assert main(["export", run_id, "--parquet", str(tmp_path / "new" / "run.parquet"),
                 "--csv", str(tmp_path / "run.csv")]) == 0
    table = pd.read_parquet(tmp_path / "new" / "run.parquet")
    pd.testing.assert_frame_equal(table, FRAME, check_dtype=False)
    assert table.attrs["scenario"] == "vanishing-gradients" and table.attrs["run_id"] == run_id, table.attrs
    assert table.attrs["config"] == {"depth": 4}
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "run.csv"), FRAME, check_dtype=False)


@pytest.mark.parametrize("args, words", [
    (["export", "RUN"], "at least one of --tensorboard"),
    (["export", "nosuchrun", "--csv", "-"], "no run 'nosuchrun'"),
    (["export", "RUN", "--parquet", "."], "is a folder"),
    (["export", "RUN", "--tensorboard", "/proc/explorer-test"], "is not writable"),
    (["export", "RUN", "--csv", "-", "--json"], "both write to standard output"),
])
def test_a_bad_export_is_one_line_and_exit_2(run_id, args, words, capsys) -> None:
    assert main([run_id if a == "RUN" else a for a in args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err
