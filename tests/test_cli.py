"""`python -m explorer`: files written, exit codes, one-line errors."""
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent


def explorer(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "explorer", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_list_names_every_scenario() -> None:
    result = explorer("list")
    assert result.returncode == 0 and "vanishing-gradients" in result.stdout


@pytest.mark.slow
def test_run_writes_config_metrics_summary_and_figures(tmp_path) -> None:
    out = tmp_path / "out"
    result = explorer("run", "vanishing-gradients", "--set", "depth=30", "--set", "activation=relu",
                      "--set", "steps=12", "--set", "width=16", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "%" in result.stderr, "a progress bar on stderr"
    config = json.loads((out / "config.json").read_text())
    assert config["depth"] == 30 and config["activation"] == "relu"
    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics.columns) == ["arm", "step", "metric", "value"]
    assert "grad_norm/layer_30" in set(metrics["metric"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["headline"]
    for name in ("loss", "grad_heatmap", "grad_profile"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert "plotly" in (out / f"{name}.html").read_text()[:200000]

    run_id = result.stdout.split("run ")[1].split()[0]
    shown = explorer("show", run_id)
    assert shown.returncode == 0 and "depth" in shown.stdout and "layer 1" in shown.stdout

    again = explorer("run", "vanishing-gradients", "--set", "depth=30", "--set", "activation=relu",
                     "--set", "steps=12", "--set", "width=16")
    assert again.returncode == 0 and "served from the run store" in again.stderr


@pytest.mark.parametrize("args, words", [
    (["run", "no-such-scenario"], "unknown scenario 'no-such-scenario'"),
    (["run", "vanishing-gradients", "--set", "colour=red"], "unknown key 'colour'"),
    (["run", "vanishing-gradients", "--set", "depth=65"], "depth must be an integer from 2 to 64"),
    (["run", "vanishing-gradients", "--set", "activation=swish"], "activation must be one of sigmoid"),
    (["run", "vanishing-gradients", "--set", "depth"], "--set takes key=value"),
    (["run", "vanishing-gradients", "--format", "gif"], "--format 'gif' is not allowed"),
    (["show", "nope"], "no run 'nope'"),
])
def test_bad_input_exits_2_with_one_line(args, words) -> None:
    result = explorer(*args)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], result.stderr


@pytest.mark.slow
def test_a_failing_rank_ends_the_run_with_its_message(monkeypatch) -> None:
    """A rank of a distributed run raises: exit 1 and that rank's message, no traceback, no rank left."""
    monkeypatch.setenv("EXPLORER_DIST_FAIL_RANK", "1")
    mark = f"EXPLORER_TEST_MARK={uuid.uuid4().hex}"  # this test's processes carry it (others' runs do not)
    monkeypatch.setenv(*mark.split("="))
    tiny = ["device=cpu", "world_size=2", "sweep_world_size=false", "layers=1", "hidden=16", "batch=2",
            "seq_len=8", "steps=2", "strategies=ddp,fsdp-zero3"]
    result = explorer("run", "ddp-fsdp-memory", "--no-store", *[arg for s in tiny for arg in ("--set", s)])
    assert result.returncode == 1, result.stderr
    assert "error: the run failed: RankFailed: rank 1 failed (exit code 1): RuntimeError: injected failure on rank 1" \
        in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    alive = [pid for pid in os.listdir("/proc") if pid.isdigit() and mark.encode() in _environ(pid)]
    assert not alive, f"rank processes left: {alive}"


def _environ(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return environ.read()
    except OSError:
        return b""
