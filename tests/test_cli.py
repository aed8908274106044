"""`python -m explorer`: files written, exit codes, one-line errors found before torch loads."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from explorer import __version__
from explorer.cli.main import main
from explorer.cli.output import finite
from explorer.exports.files import plotlyjs_name
from explorer.runs.store import RunStore
from tests.descendants import ranks_alive, tag_environment

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = "vanishing-gradients"
TINY = ["--set", "depth=4", "--set", "width=16", "--set", "steps=12"]


def explorer(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "explorer", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def printed(capsys, *argv: str, code: int = 0) -> str:
    assert main(list(argv)) == code
    return capsys.readouterr().out


def test_list_names_every_scenario_and_list_id_its_keys(capsys) -> None:
    from scenarios import all_scenarios
    listed = printed(capsys, "list")
    assert [line.split()[0] for line in listed.splitlines()] == [s.id for s in all_scenarios()]
    keys = printed(capsys, "list", SCENARIO)
    assert "depth" in keys and "2..64" in keys and "Hidden layers" in keys, keys
    data = json.loads(printed(capsys, "list", SCENARIO, "--json"))
    assert data["id"] == SCENARIO and data["settings"]["depth"]["le"] == 64
    assert {s["id"] for s in json.loads(printed(capsys, "list", "--json"))} == {s.id for s in all_scenarios()}


def test_version_and_run_help_name_the_scenarios_and_keys(capsys) -> None:
    assert printed(capsys, "--version").strip().endswith(f" {__version__}")
    help_text = printed(capsys, "run", "--help")
    from scenarios import all_scenarios
    assert all(s.id in help_text for s in all_scenarios()) and "list SCENARIO" in help_text, help_text
    assert "Hidden layers" in printed(capsys, "run", SCENARIO, "--help")
    assert explorer("--version").stdout.strip() == f"python -m explorer {__version__}"


@pytest.mark.parametrize("args, words", [
    (["run", "no-such-scenario"], "unknown scenario 'no-such-scenario'"),
    (["run", SCENARIO, "--set", "colour=red"], "unknown key 'colour'"),
    (["run", SCENARIO, "--set", "depth=65"], "depth must be an integer from 2 to 64"),
    (["run", SCENARIO, "--set", "activation=swish"], "activation must be one of sigmoid"),
    (["run", SCENARIO, "--set", "depth=1\n2"], "depth=1 2 is not allowed"),
    (["run", SCENARIO, "--set", "depth"], "--set takes key=value"),
    (["run", SCENARIO, "--format", "gif"], "--format 'gif' is not allowed"),
    (["run", SCENARIO, "--out", ""], "--out needs a folder"),
    (["run", SCENARIO, "--out", "{file}"], "is a file, not a folder"),
    (["run", SCENARIO, "--out", "{file}/sub"], "which is a file"),
    (["run", SCENARIO, "--out", "/proc/explorer-test"], "is not writable"),
    (["run", SCENARIO, "--config", "{missing}"], "cannot be read: No such file"),
    (["run", SCENARIO, "--config", "{file}"], "is not JSON"),
    (["run", SCENARIO, "--config", "{list}"], "holds a JSON list"),
    (["run", SCENARIO, "--config", "{config}", "--set", "width=8"], "width must be an integer from 16"),
    (["list", "nope"], "unknown scenario 'nope'"),
    (["show", "nope"], "no run 'nope'"),
    (["runs", "--limit", "0"], "'0' is not a positive whole number"),
    (["lst"], "invalid choice: 'lst'"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, args, words) -> None:
    files = {"file": tmp_path / "notes.txt", "missing": tmp_path / "missing.json", "list": tmp_path / "list.json",
             "config": tmp_path / "config.json"}
    files["file"].write_text("not json\n")
    files["list"].write_text("[1, 2]")
    files["config"].write_text(json.dumps({"depth": 4}))
    assert main([arg.format(**files) for arg in args]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], err
    assert not out and RunStore().list_runs() == [], "nothing ran, nothing stored"


def test_bad_input_from_the_real_entry_point_is_one_line() -> None:
    result = explorer("run", SCENARIO, "--set", "depth=65")
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "error: depth=65 is not allowed for vanishing-gradients: depth must be an integer from 2 to 64"], result


@pytest.mark.parametrize("store", ["{tmp}", "{tmp}/notes.txt", "{tmp}/notes.txt/runs.sqlite3"])
def test_a_bad_explorer_store_exits_2_with_one_line(tmp_path, capsys, monkeypatch, store) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    monkeypatch.setenv("EXPLORER_STORE", store.format(tmp=tmp_path))
    for args in (["runs"], ["run", SCENARIO, *TINY], ["show", "abc"]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1, err
        assert "cannot be used" in err and "EXPLORER_STORE" in err, err


FRESH = """
import sys
from explorer.cli.main import main
codes = [main(argv) for argv in {argvs!r}]
print(codes, 'torch' in sys.modules, 'scenarios' in sys.modules)
"""


def test_argument_errors_are_found_before_the_registry_or_torch_loads(tmp_path) -> None:
    """A typo costs a fraction of a second: nothing heavy is imported to refuse it."""
    (tmp_path / "f").write_text("x")
    argvs = [["run", SCENARIO, "--format", "gif"], ["run", SCENARIO, "--out", ""], ["run", SCENARIO, "--out", str(tmp_path / "f")],
             ["run", SCENARIO, "--set", "depth"], ["run", SCENARIO, "--config", str(tmp_path / "f")], ["nope"]]
    code = FRESH.format(argvs=argvs)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "[2, 2, 2, 2, 2, 2] False False", result


def modules_importing_torch_at_top() -> list[str]:
    """Scenario modules that load torch when the registry imports them (directly or via an engine)."""
    import ast

    def top_imports(path: Path) -> set[str]:
        names: set[str] = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
        return names
    heavy = {"torch"} | {f"engines.{p.stem}" for p in (ROOT / "engines").glob("*.py")
                         if any(n.split(".")[0] == "torch" for n in top_imports(p))}
    return [p.name for p in (ROOT / "scenarios").glob("*.py")
            if any(n in heavy or n.split(".")[0] == "torch" for n in top_imports(p))]


def test_a_bad_key_is_refused_without_importing_torch() -> None:
    heavy = modules_importing_torch_at_top()
    if heavy:
        pytest.skip(f"scenario modules still import torch when the registry loads: {heavy} (issue 13 migration)")
    code = FRESH.format(argvs=[["run", SCENARIO, "--set", "colour=red"], ["run", SCENARIO, "--set", "depth=99"]])
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "[2, 2] False True", result


@pytest.mark.parametrize("args", [["--help"], pytest.param(["list", "--json"], marks=pytest.mark.slow)])
def test_a_closed_pipe_ends_quietly(args) -> None:
    """`python -m explorer list | head -0`: no BrokenPipeError traceback."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-m", "explorer", *args], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()  # the reader is gone before the first write
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) in (0, 141) and err == "", err  # argparse's help swallows the error itself


def test_run_then_rerun_from_its_config_json(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["run", SCENARIO, *TINY, "--set", "activation=tanh", "--out", str(out), "--format", "html"]) == 0
    written = json.loads((out / "config.json").read_text())
    assert written.pop("scenario") == SCENARIO, "config.json names its scenario"
    assert (out / plotlyjs_name()).exists(), "several HTML figures share one plotly.js"
    capsys.readouterr()
    assert main(["run", SCENARIO, "--config", str(out / "config.json"), "--set", "seed=3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["config"] == {**written, "seed": 3} and result["status"] == "finished" and result["run_id"]
    assert result["explanation"]["takeaway"] and not result["served_from_store"] and result["backend"] == "local"
    capsys.readouterr()
    assert main(["run", SCENARIO, "--config", str(out / "config.json"), "--set", "seed=3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["served_from_store"]


def test_runs_lists_the_store_filtered_and_show_prints_json(capsys) -> None:
    store = RunStore()
    frame = pd.DataFrame({"arm": ["a"], "step": [0], "metric": ["loss"], "value": [float("nan")]})
    config = {"depth": 4, "width": 16, "steps": 12}
    finished = store.save(SCENARIO, config, "v", "finished", frame, {"headline": {"final loss": float("nan")}})
    stopped = store.save(SCENARIO, config, "v", "stopped", frame, {"headline": {"final loss": 0.5}})
    store.save("other", {}, "v", "failed", frame, {}, error="boom")
    assert main(["runs", "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)][1:] == [stopped, finished]
    assert main(["runs", "--scenario", SCENARIO, "--status", "stopped", "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == [stopped]
    assert main(["runs", "--status", "finished"]) == 0
    table = capsys.readouterr().out
    assert finished in table and stopped not in table and "final loss nan" in table, table
    assert main(["show", finished, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)  # strict JSON: the NaN is null
    assert shown["run_id"] == finished and shown["headline"] == {"final loss": None} and "explanation" in shown


def test_json_output_is_strict() -> None:
    assert finite({"a": [float("nan"), float("inf"), 1.5], "b": {"c": -float("inf")}}) == {
        "a": [None, None, 1.5], "b": {"c": None}}


def test_a_full_disk_after_training_is_one_line_and_keeps_the_run(tmp_path, capsys, monkeypatch) -> None:
    import explorer.exports.files

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(explorer.exports.files, "write_run", full)
    assert main(["run", SCENARIO, *TINY, "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: could not write the results") and "No space left on device" in err[-1], err
    assert "stored as run" in err[-1] and len(RunStore().list_runs()) == 1


def test_ctrl_c_stops_the_run_stores_it_as_stopped_and_exits_130(capsys, monkeypatch) -> None:
    """The first Ctrl-C asks the run to stop (the sink's stop_requested); the driver stops after the step."""
    from explorer.cli.run import ProgressBar
    progress, handler = ProgressBar.progress, signal.getsignal(signal.SIGINT)  # SIG_IGN in a background job

    def press_ctrl_c_once(bar, fraction):
        progress(bar, fraction)
        if fraction > 0 and not bar.stop:
            signal.raise_signal(signal.SIGINT)
    monkeypatch.setattr(ProgressBar, "progress", press_ctrl_c_once)
    assert main(["run", SCENARIO, "--set", "steps=3000", "--set", "width=16"]) == 130
    err = capsys.readouterr().err
    assert "stopped by Ctrl-C" in err and "Traceback" not in err, err
    (run,) = RunStore().list_runs()
    assert run.status == "stopped" and 0 < len(RunStore().frame(run.run_id)), run
    assert signal.getsignal(signal.SIGINT) is handler, "the handler is put back"


@pytest.mark.slow
def test_ctrl_c_in_a_terminal_run(tmp_path) -> None:
    """stderr is a terminal (a pty): the bar is drawn in place as training goes, and Ctrl-C stops it."""
    import pty
    terminal, terminal_end = pty.openpty()
    with open(terminal_end, "wb") as child_end:
        child = subprocess.Popen([sys.executable, "-m", "explorer", "run", SCENARIO, "--set", "steps=3000"], cwd=ROOT,
                                 env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=child_end)
    drawn = os.read(terminal, 1024)
    while b"%" not in drawn:  # training has started
        drawn += os.read(terminal, 1024)
    child.send_signal(signal.SIGINT)
    child.communicate(timeout=120)
    with open(terminal, "rb") as rest:  # reading past the child's exit raises: its end is closed
        err = (drawn + rest.read1(1 << 20)).decode(errors="replace")
    assert child.returncode == 130 and "Traceback" not in err and "stopped by Ctrl-C" in err, err
    assert [r.status for r in RunStore().list_runs()] == ["stopped"]


@pytest.mark.slow
def test_run_writes_config_metrics_summary_and_figures(tmp_path) -> None:
    out = tmp_path / "out"
    result = explorer("run", SCENARIO, "--set", "depth=30", "--set", "activation=relu",
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
        assert f'src="{plotlyjs_name()}"' in (out / f"{name}.html").read_text()
    assert (out / plotlyjs_name()).stat().st_size > 1_000_000

    run_id = result.stdout.split("run ")[1].split()[0]
    shown = explorer("show", run_id)
    assert shown.returncode == 0 and "depth" in shown.stdout and "layer 1" in shown.stdout

    again = explorer("run", SCENARIO, "--set", "depth=30", "--set", "activation=relu",
                     "--set", "steps=12", "--set", "width=16")
    assert again.returncode == 0 and "served from the run store" in again.stderr


@pytest.mark.slow
def test_a_failing_rank_ends_the_run_with_its_message(monkeypatch) -> None:
    """A rank of a distributed run raises: exit 1 and that rank's message, no traceback, no rank left."""
    monkeypatch.setenv("EXPLORER_DIST_FAIL_RANK", "1")
    tag = tag_environment(monkeypatch)
    tiny = ["device=cpu", "world_size=2", "sweep_world_size=false", "layers=1", "hidden=16", "batch=2",
            "seq_len=8", "steps=2", "strategies=ddp,fsdp-zero3"]
    result = explorer("run", "ddp-fsdp-memory", "--no-store", *[arg for s in tiny for arg in ("--set", s)])
    assert result.returncode == 1, result.stderr
    assert "error: the run failed: RankFailed: rank 1 failed (exit code 1): RuntimeError: injected failure on rank 1" \
        in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    alive = ranks_alive(tag)  # this test's own ranks: others may run elsewhere on the machine
    assert not alive, f"rank processes left: {alive}"



def test_the_command_lines_statuses_are_the_scenarios() -> None:
    """`runs --status` offers exactly the statuses a run can end with (scenarios.base.STATUSES)."""
    from explorer.cli.main import STATUSES
    from scenarios.base import STATUSES as RUN_STATUSES
    assert STATUSES == RUN_STATUSES
