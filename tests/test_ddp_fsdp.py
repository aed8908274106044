"""DDP vs FSDP memory: the ZeRO model, measured on real gloo process groups.

The launches start real processes (a few seconds each, more on a loaded machine), so the
measured runs share one module-scoped result: world sizes 1 and 2, DDP and FSDP (ZeRO-3).
"""
import subprocess
import time

import pytest
import torch

from engines.distributed import RankFailed, launch
from engines.memory_model import PRECISIONS, model_states, zero_paper_example
from scenarios import get_scenario
from scenarios._memory_timeline import timeline_of, trace_of
from scenarios.base import ConfigError

SCENARIO = get_scenario("ddp-fsdp-memory")
SMALL = {"device": "cpu", "world_size": 2, "sweep_world_size": True, "layers": 2, "hidden": 64, "batch": 2, "seq_len": 16,
         "steps": 3, "strategies": "ddp,fsdp-zero3"}


def dist_workers_alive() -> int:
    """Rank processes started by this test process that are still alive."""
    import os
    result = subprocess.run(["pgrep", "-P", str(os.getpid()), "-f", "engines.dist_worker"], capture_output=True, text=True)
    return len(result.stdout.split())


@pytest.fixture(scope="module")
def measured() -> dict:
    result = SCENARIO.run(SMALL)
    assert result.status == "finished", result.status
    return result.summary["arms"]


def test_estimator_reproduces_the_zero_paper_example() -> None:
    """Ψ = 7.5B, N = 64, K = 12: 120 GB (DDP) -> 31.4 -> 16.6 -> 1.9 GB."""
    gb = zero_paper_example()
    assert gb["ddp"] == pytest.approx(120.0)
    assert gb["zero1"] == pytest.approx(31.4, abs=0.05)
    assert gb["zero2"] == pytest.approx(16.6, abs=0.05)
    assert gb["zero3"] == pytest.approx(1.9, abs=0.05)


def test_fp32_adam_is_16_bytes_per_parameter_on_one_device() -> None:
    assert model_states(1000, 1, "ddp", PRECISIONS["fp32 Adam"]).total == 16000


@pytest.mark.slow
def test_ddp_state_is_constant_in_n_and_fsdp_shrinks_as_1_over_n(measured) -> None:
    ddp1, ddp2 = measured["ddp · N=1"]["measured_state_bytes"], measured["ddp · N=2"]["measured_state_bytes"]
    fsdp1, fsdp2 = measured["fsdp-zero3 · N=1"]["measured_state_bytes"], measured["fsdp-zero3 · N=2"]["measured_state_bytes"]
    assert ddp2 == ddp1, f"DDP per-rank state {ddp1} -> {ddp2} bytes"
    # torch.chunk shards: rank 0 gets ceil(dim0 / N) rows, so not exactly half.
    assert fsdp2 / fsdp1 == pytest.approx(0.5, rel=0.02), f"FSDP N=2/N=1 = {fsdp2 / fsdp1:.4f}"


@pytest.mark.slow
def test_measured_model_state_is_within_5_percent_of_the_estimator(measured) -> None:
    for arm, a in measured.items():
        assert abs(a["state_error"]) < 0.05, f"{arm}: measured {a['measured_state_bytes']} vs model {a['estimated_state_bytes']}"


@pytest.mark.slow
def test_ddp_and_fsdp_compute_the_same_training(measured) -> None:
    for world in (1, 2):
        ddp, fsdp = measured[f"ddp · N={world}"]["losses"], measured[f"fsdp-zero3 · N={world}"]["losses"]
        assert ddp == pytest.approx(fsdp, abs=1e-5), f"N={world}: {ddp} vs {fsdp}"


@pytest.mark.slow
def test_a_rank_that_raises_ends_the_run_with_its_message() -> None:
    job = {"strategies": ["ddp"], "seed": 0, "vocab": 64, "hidden": 16, "layers": 1, "heads": 4, "batch": 2,
           "seq_len": 8, "steps": 2, "lr": 1e-3, "optimizer": "adam", "fail_rank": 1,
           "device": "cpu"}
    started = time.monotonic()
    with pytest.raises(RankFailed, match="rank 1 failed .*injected failure on rank 1"):
        list(launch(job, 2))
    assert time.monotonic() - started < 60
    assert dist_workers_alive() == 0, "a rank outlived the failed run"


@pytest.mark.slow
def test_stop_terminates_every_rank() -> None:
    job = {"strategies": ["ddp", "fsdp-zero3"] * 20, "seed": 0, "vocab": 64, "hidden": 32, "layers": 2, "heads": 4,
           "batch": 2, "seq_len": 8, "steps": 20, "lr": 1e-3, "optimizer": "adam", "device": "cpu"}
    records = launch(job, 2)
    next(records)  # both ranks are up and training
    records.close()  # what the scenario does when Stop is pressed
    assert dist_workers_alive() == 0


def test_a_world_that_would_not_fit_is_refused_before_launch(monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_MEMORY_LIMIT_BYTES", str(100e6))
    world = min(4, torch.cuda.device_count()) if torch.cuda.is_available() else 4
    with pytest.raises(ConfigError, match=rf"world_size={world} .* needs about .* GB"):
        SCENARIO.run({"world_size": world, "hidden": 256, "layers": 8})
    with pytest.raises(ConfigError, match=r"world_size=4 .* needs about .* GB \(10 rank processes"):
        SCENARIO.run({"device": "cpu", "world_size": 4})  # the sweep starts worlds 1, 2, 3 and 4 side by side
    assert dist_workers_alive() == 0


def test_more_than_four_cpu_ranks_are_refused_before_launch() -> None:
    with pytest.raises(ConfigError, match="world_size=5 on the CPU: at most 4 rank processes"):
        SCENARIO.run({"device": "cpu", "world_size": 5})
    assert dist_workers_alive() == 0


def test_more_ranks_than_gpus_are_refused_before_launch() -> None:
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus >= 4:
        pytest.skip("4 GPUs or more: every allowed world size fits")
    with pytest.raises(ConfigError, match=f"one GPU per rank and this machine has {gpus}"):
        SCENARIO.run({"device": "cuda", "world_size": gpus + 1})
    assert dist_workers_alive() == 0


@pytest.fixture(scope="module")
def timelines() -> dict:
    """Three blocks, all three strategies, two ranks: rank 0's marks through step 1."""
    config = {"device": "cpu", "world_size": 2, "sweep_world_size": False, "layers": 3, "hidden": 32, "batch": 2, "seq_len": 16,
              "steps": 2, "strategies": "ddp,fsdp-zero3,fsdp-zero2", "timeline": True}
    result = SCENARIO.run(config)
    assert result.status == "finished", result.status
    out = {"frame": result.frame, "config": config}
    for arm, a in result.summary["arms"].items():
        rows = result.frame[result.frame["arm"] == arm]
        values = dict(zip(rows["metric"], rows["value"]))
        out[a["strategy"]] = {**a, "timeline": timeline_of(values, 3), "values": values,
                              "root_bytes": 4.0 * (64 * 32 + 32 * 64 + 64)}  # embedding + head, fp32
    return out


@pytest.mark.slow
def test_timeline_zero2_keeps_every_block_gathered_zero3_one_at_a_time(timelines) -> None:
    """reshard_after_forward=False holds all gathered blocks until backward; True frees each after its forward."""
    zero2, zero3 = timelines["fsdp-zero2"], timelines["fsdp-zero3"]
    unit, root = zero3["unit_param_bytes"], zero3["root_bytes"]
    assert zero2["max_unsharded_bytes"] == pytest.approx(root + 3 * unit, rel=0.05), zero2["max_unsharded_bytes"]
    assert zero3["max_unsharded_bytes"] < root + 1.5 * unit, f"{zero3['max_unsharded_bytes']} vs one block {unit}"
    assert timelines["ddp"]["max_unsharded_bytes"] == 0.0


@pytest.mark.slow
def test_activations_and_gathered_parameters_match_the_model(timelines) -> None:
    """FSDP: activations at the end of forward byte for byte as `encoder_activation_bytes` counts
    them, gathered parameters as `transient_unsharded_bytes`; DDP adds its gradient buckets (4Ψ)."""
    for strategy in ("fsdp-zero3", "fsdp-zero2"):
        a = timelines[strategy]
        assert a["measured_activation_bytes"] == pytest.approx(a["estimated_activation_bytes"], rel=1e-3), strategy
        assert a["max_unsharded_bytes"] == pytest.approx(a["estimated_unsharded_bytes"], rel=1e-3), strategy
    ddp = timelines["ddp"]
    extra = ddp["measured_activation_bytes"] - ddp["estimated_activation_bytes"]
    assert extra == pytest.approx(4 * ddp["values"]["rank_0/n_params"], rel=0.01), f"DDP's extra {extra} bytes"


@pytest.mark.slow
def test_timeline_follows_the_call_order_and_the_activations(timelines) -> None:
    """Blocks forward 0→2 then backward 2→0; DDP's activations peak between forward and backward;
    after backward the gradients are every parameter's."""
    table = timelines["ddp"]["timeline"]
    labels = list(table.drop_duplicates("mark")["label"])
    forward = [l for l in labels if l.startswith("blocks.") and l.endswith("forward start")]
    backward = [l for l in labels if l.startswith("blocks.") and l.endswith("backward start")]
    assert forward == [f"blocks.{i} forward start" for i in range(3)]
    assert backward == [f"blocks.{i} backward start" for i in (2, 1, 0)]
    assert labels[0] == "step start" and labels[-1] == "after optimizer step"
    figure = SCENARIO.figures(timelines["frame"], SCENARIO.validate(timelines["config"]))["memory_timeline"]
    ticks = [text for axis in figure.select_xaxes() if axis.ticktext for text in axis.ticktext]
    assert ticks and not [t for t in ticks if t.startswith("mark")], f"unnamed marks on the axis: {ticks}"
    acts = table[table["category"] == "activations"].set_index("label")["bytes"]
    assert acts.idxmax() in ("model forward end", "head forward end", "head backward start")
    assert acts["model forward end"] > 3 * acts["step start"]
    grads = table[table["category"] == "gradients"].set_index("label")["bytes"]
    assert grads["step start"] == 0
    assert grads["after backward"] == timelines["ddp"]["values"]["rank_0/exact/gradients"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the NCCL path needs GPUs")
def test_gpu_path_reports_allocated_and_reserved() -> None:
    job = {"strategies": ["ddp", "fsdp-zero3"], "seed": 0, "vocab": 64, "hidden": 64, "layers": 2, "heads": 4,
           "batch": 2, "seq_len": 16, "steps": 2, "lr": 1e-3, "optimizer": "adam", "timeline": True}
    records = [r for r in launch(job, min(2, torch.cuda.device_count())) if "loss" not in r["metrics"]]
    assert all(r["device"] == "cuda" for r in records)
    assert all(r["metrics"]["peak/reserved"] >= r["metrics"]["peak/allocated"] > 0 for r in records)
    for r in (r for r in records if r["rank"] == 0):  # the allocator's history ends where the last mark stands
        values = {f"rank_0/{k}": v for k, v in r["metrics"].items()}
        table = timeline_of(values, 2)
        last = table[(table["label"] == "after optimizer step") & (table["category"] == "allocated")]["bytes"]
        trace = trace_of(values)
        assert trace and trace[-1] == pytest.approx(float(last.iloc[0]), rel=0.05)


@pytest.mark.slow
def test_torchrun_entry_point_writes_a_result_the_page_can_draw(tmp_path) -> None:
    """`torchrun -m engines.dist_worker --out DIR` on 2 local ranks; the scenario draws DIR."""
    import json
    import sys
    from pathlib import Path
    job = {"strategies": ["ddp", "fsdp-zero3"], "seed": 0, "vocab": 64, "hidden": 32, "layers": 1, "heads": 4,
           "batch": 2, "seq_len": 8, "steps": 2, "lr": 1e-3, "optimizer": "adam", "timeline": True, "device": "cpu"}
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           "-m", "engines.dist_worker", "--job", json.dumps(job), "--out", str(tmp_path)],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank_00.jsonl", "rank_01.jsonl"]
    summary = SCENARIO.run({"result_dir": str(tmp_path)}).summary
    assert set(summary["arms"]) == {"ddp · N=2", "fsdp-zero3 · N=2"}
    assert all(abs(a["state_error"]) < 0.05 for a in summary["arms"].values())
    assert summary["arms"]["fsdp-zero3 · N=2"]["max_unsharded_bytes"] > 0, "the timeline travels in the files too"
