"""Bounded and honest edges: `--config` reads only a regular file of a sane size, a result_dir refusal is
bad input (exit 2), an impossible measurement is refused, a second Ctrl-C while a stopped run is stored
still exits 130, a worker killed by a signal is named so, echoed values are cut, and a compare link
looks up at most MAX_COMPARED runs."""
import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.cli.main import main
from explorer.page import share
from explorer.page.url import parse_query
from explorer.runs.processes import how_it_ended
from explorer.runs.store import RunStore
from scenarios import get_scenario
from scenarios.base import ConfigError

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = "vanishing-gradients"
DDP = get_scenario("ddp-fsdp-memory")
LONG = "x" * 10_000


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("kind", ["a FIFO", "/dev/zero", "a folder", "a file past the cap"])
def test_config_reads_only_a_regular_file_of_a_sane_size(tmp_path, capsys, kind) -> None:
    """A FIFO would block for ever and /dev/zero never ends: both are refused before a byte is read."""
    path = {"a FIFO": tmp_path / "fifo", "/dev/zero": Path("/dev/zero"), "a folder": tmp_path,
            "a file past the cap": tmp_path / "big.json"}[kind]
    if kind == "a FIFO":
        os.mkfifo(path)
    if kind == "a file past the cap":
        path.write_text('{"depth": 3, "pad": "' + " " * 1_100_000 + '"}')
    assert main(["run", SCENARIO, "--config", str(path), "--no-store"]) == 2
    err = one_line(capsys)
    assert "--config" in err and ("not a file" in err or "larger than" in err), err


def rank_file(folder: Path, metrics: dict) -> None:
    folder.mkdir(exist_ok=True)
    line = '{"arm": "ddp", "rank": 0, "world_size": 1, "step": 0, "device": "cpu", "metrics": %s}\n'
    (folder / "rank_00.jsonl").write_text(line % str(metrics).replace("'", '"'))


def test_a_result_dir_refusal_is_bad_input_and_exits_2(tmp_path, capsys) -> None:
    assert main(["run", DDP.id, "--set", f"result_dir={tmp_path / 'missing'}", "--no-store"]) == 2
    assert "cannot be read as a folder" in one_line(capsys)


def test_a_physically_impossible_measurement_is_refused(tmp_path) -> None:
    """Negative bytes were never measured: the folder is refused naming the value (a replicated shard_dim of −1 is fine)."""
    rank_file(tmp_path / "ok", {"dtensor/head.weight/shard_dim": -1.0, "peak/parameters": 4096.0})
    assert DDP.run({"result_dir": str(tmp_path / "ok")}).status == "finished"
    for value in (-1e30, 1e30):
        rank_file(tmp_path / "bad", {"mem/params": value})
        with pytest.raises(ConfigError, match=r"mem/params is -?1e\+30; bytes, counts and sizes are never negative"):
            DDP.run({"result_dir": str(tmp_path / "bad")})


def test_a_second_ctrl_c_while_the_stopped_run_is_stored_waits_and_exits_130(capsys, monkeypatch) -> None:
    from explorer.cli.run import ProgressBar
    from explorer.runs import serving
    progress, save = ProgressBar.progress, serving.save_result

    def press_ctrl_c_once(bar, fraction):
        progress(bar, fraction)
        if fraction > 0 and not bar.stop:
            signal.raise_signal(signal.SIGINT)

    def pressed_again_while_storing(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)
        return save(*args, **kwargs)
    monkeypatch.setattr(ProgressBar, "progress", press_ctrl_c_once)
    monkeypatch.setattr(serving, "save_result", pressed_again_while_storing)
    assert main(["run", SCENARIO, "--set", "steps=3000", "--set", "width=16"]) == 130
    err = capsys.readouterr().err
    assert "storing the run" in err and "stopped by Ctrl-C" in err and "Traceback" not in err, err
    assert [run.status for run in RunStore().list_runs()] == ["stopped"]


@pytest.mark.slow
def test_a_ctrl_c_after_the_run_is_stored_still_exits_130(isolated_store) -> None:
    """The interpreter's teardown takes a moment after the last line: a Ctrl-C then used to end the process
    by SIGINT (−2)."""
    terminal, stderr = pty.openpty()  # on a terminal the bar is drawn as the run goes (in a pipe: only at its end)
    child = subprocess.Popen([sys.executable, "-m", "explorer", "run", SCENARIO, "--set", "steps=3000"], cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=stderr, stdout=subprocess.DEVNULL)
    os.close(stderr)

    def read_until(text: str, seen: str = "") -> str:
        while text not in seen:
            try:
                chunk = os.read(terminal, 4096).decode(errors="replace")
            except OSError:  # the terminal closed: the child ended
                chunk = ""
            seen += chunk or pytest.fail(f"ended before {text!r} was written: {seen!r}")
        return seen

    try:
        seen = read_until("%")  # the bar is drawn: the run trains
        child.send_signal(signal.SIGINT)
        seen = read_until("stopped by Ctrl-C", seen)
        child.send_signal(signal.SIGINT)
        child.wait(timeout=120)
    finally:
        child.kill()  # no-op once it has ended
        child.wait()
        os.close(terminal)
    assert child.returncode == 130, (child.returncode, seen)


def test_a_process_killed_by_a_signal_is_named_so() -> None:
    assert how_it_ended(-signal.SIGKILL).startswith("killed by SIGKILL"), how_it_ended(-9)
    assert how_it_ended(-signal.SIGTERM) == "killed by SIGTERM" and how_it_ended(1) == "exit code 1"


def test_echoed_values_are_cut_with_an_ellipsis(capsys) -> None:
    """A 10,000-character value in a config, a link or the command line is quoted in at most ~80 characters."""
    scenario = get_scenario(SCENARIO)
    for values in ({"activation": LONG}, {LONG: 1}, {"steps": LONG}):
        with pytest.raises(ConfigError) as error:
            scenario.validate(values)
        assert "…" in str(error.value) and len(str(error.value)) < 400, str(error.value)[:500]
    warnings = parse_query(scenario, {LONG: "1", "depth": LONG}).warnings
    assert all("…" in w and len(w) < 400 for w in warnings), [w[:500] for w in warnings]
    assert main(["run", SCENARIO, "--set", LONG, "--no-store"]) == 2
    err = one_line(capsys)
    assert "…" in err and len(err) < 200, err[:500]


def test_an_empty_key_and_a_wrongly_typed_result_dir_are_said_plainly() -> None:
    with pytest.raises(ConfigError, match=r"unknown key '' \(an empty name\) for vanishing-gradients"):
        get_scenario(SCENARIO).validate({"": 1})
    with pytest.raises(ConfigError) as error:
        DDP.validate({"result_dir": 5})
    assert str(error.value).endswith("result_dir must be a valid string"), error.value


def test_a_compare_link_looks_up_at_most_max_compared_runs() -> None:
    class Counting:
        looked_up = 0

        def get(self, run_id: str):
            Counting.looked_up += 1
    ids = ",".join(f"{i:012x}" for i in range(5000))
    warnings = share.restore_page(get_scenario(SCENARIO), {share.COMPARE: ids}, Counting())
    assert Counting.looked_up == share.MAX_COMPARED, Counting.looked_up
    assert len(warnings) == 2 and all(len(w) < 200 for w in warnings), warnings
