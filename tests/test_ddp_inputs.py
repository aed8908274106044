"""DDP vs FSDP memory, what it refuses before launching anything: configs this machine cannot
run (from the machine's facts alone, as the page asks before Run), and result folders that
are not a torchrun job's rank_NN.jsonl files (the path can come from a shared URL)."""
import json
import os
import stat

import pytest
import torch

from engines.distributed import results as _result_dir
from scenarios import get_scenario
from scenarios.base import ConfigError, Machine
from tests.descendants import ranks_alive, tag_environment

SCENARIO = get_scenario("ddp-fsdp-memory")


@pytest.fixture
def tag(monkeypatch) -> str:
    return tag_environment(monkeypatch)


def test_a_world_that_would_not_fit_is_refused_before_launch(monkeypatch, tag) -> None:
    monkeypatch.setenv("EXPLORER_MEMORY_LIMIT_BYTES", str(100e6))
    world = min(4, torch.cuda.device_count()) if torch.cuda.is_available() else 4
    with pytest.raises(ConfigError, match=rf"world_size={world} .* needs about .* GB"):
        SCENARIO.run({"world_size": world, "hidden": 256, "layers": 8})
    with pytest.raises(ConfigError, match=r"world_size=4 .* needs about .* GB \(10 rank processes"):
        SCENARIO.run({"device": "cpu", "world_size": 4})  # the sweep starts worlds 1, 2, 3 and 4 side by side
    assert ranks_alive(tag) == []


def test_more_than_four_cpu_ranks_are_refused_before_launch(tag) -> None:
    with pytest.raises(ConfigError, match="world_size=5 on the CPU: at most 4 rank processes"):
        SCENARIO.run({"device": "cpu", "world_size": 5})
    assert ranks_alive(tag) == []


def test_more_ranks_than_gpus_are_refused_before_launch(tag) -> None:
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus >= 4:
        pytest.skip("4 GPUs or more: every allowed world size fits")
    with pytest.raises(ConfigError, match=f"one GPU per rank and this machine has {gpus}"):
        SCENARIO.run({"device": "cuda", "world_size": gpus + 1})
    assert ranks_alive(tag) == []


def test_the_page_hears_the_same_refusal_from_the_machine_facts() -> None:
    """`refusal` decides from a Machine alone (the page asks before Run); run() says the same sentence."""
    laptop = Machine(cpus=8, gpus=0, memory_limit_bytes=int(16e9))
    one_gpu = Machine(cpus=8, gpus=1, gpu_memory_bytes=int(16e9), memory_limit_bytes=int(64e9))
    refuse = lambda machine, **values: SCENARIO.refusal(SCENARIO.validate(values), machine)  # noqa: E731
    assert refuse(laptop) is None and refuse(one_gpu) is None
    assert "at most 4 rank processes (this machine has 8 cores" in refuse(laptop, device="cpu", world_size=5)
    assert "NCCL needs one GPU per rank and this machine has 1" in refuse(one_gpu, device="cuda", world_size=2)
    assert refuse(one_gpu, world_size=2) is None  # auto: two ranks on the CPU
    small = Machine(cpus=8, gpus=0, memory_limit_bytes=int(1e9))
    assert "needs about" in refuse(small, world_size=4) and "(10 rank processes" in refuse(small, world_size=4)
    big = refuse(Machine(cpus=8, gpus=1, gpu_memory_bytes=int(1e6)), world_size=1, hidden=256, layers=8)
    assert "on GPU 0" in big and "GB a GPU has here" in big
    for sentence in (refuse(laptop, device="cpu", world_size=5), big):
        assert "Error" not in sentence and "\n" not in sentence


def test_the_estimate_grows_with_the_work() -> None:
    base = SCENARIO.estimate(SCENARIO.validate({}))
    bigger = SCENARIO.estimate(SCENARIO.validate({"world_size": 4, "layers": 8, "hidden": 256}))
    assert 0 < base.seconds < bigger.seconds and 0 < base.bytes < bigger.bytes, (base, bigger)




# --- result_dir: a torchrun job's files, or anything a URL points at -----------------------
def line(rank: int = 0, step: int = 0, **fields) -> str:
    record = {"arm": "ddp", "rank": rank, "world_size": 2, "step": step, "device": "cpu", "metrics": {"loss": 4.0}}
    return json.dumps({**record, **fields}) + "\n"


def job_folder(tmp_path, extra: str = "", rank: int = 0):
    """Two ranks' files of a valid 2-step DDP job; `extra` appended to rank `rank`'s file."""
    measured = {"n_params": 100.0, "exact/parameters": 400.0, "exact/gradients": 400.0, "exact/optimizer state": 800.0,
                "peak/parameters": 400.0, "collectives/all-reduce": 1.0}
    for r in (0, 1):
        text = line(r, 0) + line(r, 1, metrics={"loss": 3.5}) + line(r, 1, metrics=measured)
        (tmp_path / f"rank_{r:02d}.jsonl").write_text(text + (extra if r == rank else ""))
    return tmp_path


def refused(folder) -> str:
    """The one-line ConfigError a run of `folder` ends with (an alarm fails a run that hangs)."""
    import signal

    def hung(*_):
        raise AssertionError(f"reading {folder} hung")
    signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        with pytest.raises(ConfigError) as error:
            SCENARIO.run({"result_dir": str(folder)})
    finally:
        signal.alarm(0)
    message = str(error.value)
    assert "\n" not in message and "Traceback" not in message, message
    return message


def test_a_result_folder_is_drawn_without_launching(tmp_path, tag) -> None:
    result = SCENARIO.run({"result_dir": str(job_folder(tmp_path))})
    assert result.status == "finished" and ranks_alive(tag) == []
    values = {(r.arm, r.metric): r.value for r in result.frame.itertuples()}
    assert values[("ddp · N=2", "loss")] == 3.5 and values[("ddp · N=2", "rank_1/exact/parameters")] == 400.0
    assert SCENARIO.summarize(result.frame, SCENARIO.validate({}))["arms"]["ddp · N=2"]["measured_state_bytes"] == 1600


def test_a_fifo_named_like_a_rank_file_is_refused_not_waited_on(tmp_path) -> None:
    os.mkfifo(tmp_path / "rank_00.jsonl")
    assert "rank_00.jsonl is a FIFO; only regular files are read" in refused(tmp_path)


@pytest.mark.parametrize("target", ["/dev/zero", "outside.jsonl", "rank_01.jsonl"])
def test_a_symbolic_link_is_refused_wherever_it_points(tmp_path, target) -> None:
    """/dev/zero once grew a read to 3.3 GB; a link out of the folder reads a file it never held."""
    folder = tmp_path / "job"
    folder.mkdir()
    (tmp_path / "outside.jsonl").write_text(line())
    (folder / "rank_01.jsonl").write_text(line(1))
    (folder / "rank_00.jsonl").symlink_to(target if target.startswith("/") else
                                          (tmp_path / target if target == "outside.jsonl" else target))
    assert "rank_00.jsonl is a symbolic link; only regular files are read" in refused(folder)


def test_an_oversize_file_is_refused_before_it_is_read(tmp_path) -> None:
    with open(tmp_path / "rank_00.jsonl", "wb") as handle:
        handle.truncate(_result_dir.MAX_FILE_BYTES + 1)  # sparse: nothing is written
    assert f"rank_00.jsonl has {_result_dir.MAX_FILE_BYTES + 1:,} bytes; at most" in refused(tmp_path)


def test_a_line_longer_than_the_limit_is_refused(tmp_path) -> None:
    folder = job_folder(tmp_path, extra=" " * (_result_dir.MAX_LINE_BYTES + 1) + "\n")
    assert f"rank_00.jsonl line 4 is longer than {_result_dir.MAX_LINE_BYTES:,} bytes" in refused(folder)


def test_too_many_records_are_refused(tmp_path) -> None:
    folder = job_folder(tmp_path, extra=line(0, 2) * _result_dir.MAX_RECORDS)
    assert f"more than {_result_dir.MAX_RECORDS:,} records" in refused(folder)


@pytest.mark.parametrize("bad, words", [
    (line(step="3"), "rank_00.jsonl line 4: step: Input should be a valid integer"),
    (line(metrics={"loss": True}), "rank_00.jsonl line 4: metrics (a value): Input should be a valid number"),
    (line(arm="ddp; rm -rf"), "rank_00.jsonl line 4: arm: Input should be 'ddp'"),
    (line(rank=1), "rank_00.jsonl line 4: rank 1 in the file of rank 0"),
    (line(rank=3), "rank_00.jsonl line 4: the record: rank 3 is not below world_size 2"),
    (line(metrics={"[x](http://a.b)": 1.0}), "rank_00.jsonl line 4: metrics (a name): String should match pattern"),
    ('{"arm": "ddp", "rank": 0,\n', "rank_00.jsonl line 4 is not a JSON record"),
    ("[" * 100_000 + "\n", "rank_00.jsonl line 4 is not a JSON record: nested too deeply"),
])
def test_the_first_bad_record_is_named_by_file_and_line(tmp_path, bad, words) -> None:
    message = refused(job_folder(tmp_path, extra=bad))
    assert words in message and "http" not in message, message


def test_bytes_that_are_not_utf8_are_refused(tmp_path) -> None:
    folder = job_folder(tmp_path)
    with open(folder / "rank_01.jsonl", "ab") as handle:
        handle.write(b"\xff\xfe\n")
    assert "rank_01.jsonl line 4 is not UTF-8 text" in refused(folder)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_named_like_a_rank_file_is_refused(tmp_path) -> None:
    os.mknod(tmp_path / "rank_00.jsonl", 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # what /dev/zero is
    assert "rank_00.jsonl is a character device; only regular files are read" in refused(tmp_path)


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_a_non_finite_measurement_is_reported_not_dropped(tmp_path, token) -> None:
    bad = line(step=1).replace('{"loss": 4.0}', '{"peak/parameters": %s}' % token)
    assert "rank_00.jsonl line 4: peak/parameters is " in refused(job_folder(tmp_path, extra=bad))


def test_a_non_finite_loss_is_where_the_job_diverged(tmp_path) -> None:
    """JSON's NaN in a loss is a diverged arm (the shared rule), shown as such, never dropped."""
    for r in (0, 1):
        (tmp_path / f"rank_{r:02d}.jsonl").write_text(line(r, 0) + line(r, 1).replace("4.0", "NaN"))
    result = SCENARIO.run({"result_dir": str(tmp_path)})
    assert result.status == "diverged", result.status
    assert [(e.arm, e.step, e.message) for e in result.events] == [("ddp · N=2", 1, "diverged at step 1: loss is nan")]
    assert result.frame["value"].map(lambda v: v == v).all(), "a NaN reached the records"


@pytest.mark.parametrize("folder, words", [
    ("/no/such/folder", "cannot be read as a folder"),
    ("/dev/null", "cannot be read as a folder"),
    ("a\0b", "cannot be read as a folder"),
    ("/", "is not a folder with rank_NN.jsonl files"),
    ("[click](http://a.b)", "result_dir=?click??http?//a.b? cannot be read"),
])
def test_a_path_that_is_not_a_job_folder_is_one_line(folder, words) -> None:
    assert words in refused(folder)


def test_two_files_for_one_rank_are_refused(tmp_path) -> None:
    folder = job_folder(tmp_path)
    (folder / "rank_000.jsonl").write_text(line())
    assert "are both rank 0's" in refused(folder)


def test_the_parameter_count_said_before_run_is_the_real_models_at_every_slider_setting() -> None:
    """Admission and the estimate are said in the page before any rank starts (the UI holds no torch),
    so they count parameters from the config; that count is the rank's real model's, built on the meta
    device, at every layers × hidden the sliders allow."""
    import torch
    from engines.distributed.worker import TinyTransformer
    from scenarios.ddp_fsdp_memory.launch import VOCAB, heads_for, n_params_of
    spec = SCENARIO.field_specs()
    wrong = []
    for layers in range(spec["layers"]["ge"], spec["layers"]["le"] + 1):
        for hidden in range(spec["hidden"]["ge"], spec["hidden"]["le"] + 1, 16):
            config = SCENARIO.validate({"layers": layers, "hidden": hidden})
            with torch.device("meta"):
                model = TinyTransformer(VOCAB, hidden, layers, heads_for(hidden))
            real = sum(p.numel() for p in model.parameters())
            if n_params_of(config) != real:
                wrong.append((layers, hidden, n_params_of(config), real))
    assert not wrong, f"(layers, hidden, said, real): {wrong[:5]}"
