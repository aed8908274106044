"""DDP vs FSDP memory: the ZeRO model, measured on real gloo process groups.

The launches start real processes (a few seconds each, more on a loaded machine), so the measured runs share
module-scoped results: world sizes 1 and 2, DDP and FSDP (ZeRO-3); and two ranks, three blocks, every strategy
with rank 0's timeline. Leftover ranks are counted among this test's own descendants only (tests/descendants.py).
"""
import math
import subprocess

import pytest
import torch

from engines.distributed.launch import RankFailed, launch
from engines.distributed.memory_model import PRECISIONS, model_states, zero_paper_example
from scenarios import get_scenario
from scenarios.ddp_fsdp_memory.figures import what_if_figure
from scenarios.ddp_fsdp_memory.timeline import timeline_of, trace_of
from tests.descendants import ranks_alive, tag_environment

SCENARIO = get_scenario("ddp-fsdp-memory")
SMALL = {"device": "cpu", "world_size": 2, "sweep_world_size": True, "layers": 2, "hidden": 64, "batch": 2, "seq_len": 16,
         "steps": 3, "strategies": "ddp,fsdp-zero3"}
JOB = {"strategies": ["ddp"], "seed": 0, "vocab": 64, "hidden": 16, "layers": 1, "heads": 4, "batch": 2, "seq_len": 8,
       "steps": 2, "lr": 1e-3, "optimizer": "adam", "device": "cpu"}


@pytest.fixture
def tag(monkeypatch) -> str:
    return tag_environment(monkeypatch)


@pytest.fixture(scope="module")
def measured() -> dict:
    result = SCENARIO.run(SMALL)
    assert result.status == "finished", result.status
    return result.summary["arms"]


def test_estimator_reproduces_the_zero_paper_example() -> None:
    """Ψ = 7.5B, N = 64, K = 12: 120 GB (DDP) -> 31.4 -> 16.6 -> 1.9 GB."""
    gb = zero_paper_example()
    assert gb["ddp"] == pytest.approx(120.0) and gb["zero1"] == pytest.approx(31.4, abs=0.05), gb
    assert gb["zero2"] == pytest.approx(16.6, abs=0.05) and gb["zero3"] == pytest.approx(1.9, abs=0.05), gb


def test_fp32_adam_is_16_bytes_per_parameter_on_one_device() -> None:
    assert model_states(1000, 1, "ddp", PRECISIONS["fp32 Adam"]).total == 16000


def test_the_what_if_note_is_short_lines_and_says_an_exact_match_plainly() -> None:
    """One line '…model states within 0.0%, act' ran out of the chart: short lines; 1.2474×10⁻⁴ is 0.012%, 0 'equal'."""
    note = what_if_figure(SCENARIO.validate({}), {"max_state_error": 1.2474e-4, "max_activation_error": 0.0}).layout.annotations[0]
    assert note.text == "model vs measured, small runs:<br>model states within 0.012%<br>activations equal to the byte", note.text


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
def test_a_rank_that_raises_ends_the_run_with_its_message(tag) -> None:
    with pytest.raises(RankFailed, match="rank 1 failed .*injected failure on rank 1"):
        list(launch({**JOB, "fail_rank": 1}, 2))
    assert ranks_alive(tag) == [], "a rank outlived the failed run"


@pytest.mark.slow
def test_stop_terminates_every_rank(tag) -> None:
    job = {**JOB, "strategies": ["ddp", "fsdp-zero3"] * 20, "hidden": 32, "layers": 2, "steps": 20}
    records = launch(job, 2)
    assert next(r for r in records if r is not None)  # both ranks are up and training
    records.close()  # what the driver does when Stop is pressed
    assert ranks_alive(tag) == []


class StopAfter:
    """A sink that presses Stop once it has heard `notes` notes (0: at the first note)."""

    def __init__(self, notes: int = 0) -> None:
        self.notes, self.heard = notes, []

    def add(self, rows) -> None: ...
    def event(self, event) -> None: ...
    def progress(self, fraction) -> None: ...

    def note(self, text: str) -> None:
        self.heard.append(text)

    def stop_requested(self) -> bool:
        return len(self.heard) > self.notes


@pytest.mark.slow
def test_stop_while_the_ranks_start_reaps_them_all(tag) -> None:
    """The page says what it waits for; Stop pressed then ends the run with no rank left."""
    sink = StopAfter()
    result = SCENARIO.run({**SCENARIO.tiny, "world_size": 2, "sweep_world_size": True}, sink)
    assert sink.heard[0] == "starting 3 rank processes", sink.heard
    assert result.status == "stopped" and result.frame.empty
    assert ranks_alive(tag) == [], "a rank outlived Stop"


@pytest.mark.slow
def test_stop_mid_run_reaps_every_rank(tag) -> None:
    sink = StopAfter(notes=1)  # the second note: the ranks are running
    result = SCENARIO.run({**SCENARIO.tiny, "world_size": 2, "steps": 20, "strategies": "ddp,fsdp-zero3,fsdp-zero2"}, sink)
    assert result.status == "stopped" and sink.heard[1] == "2 rank processes running", sink.heard
    assert ranks_alive(tag) == []


@pytest.fixture(scope="module")
def timelines() -> dict:
    """Three blocks, all three strategies, two ranks: rank 0's marks through step 1."""
    config = {"device": "cpu", "world_size": 2, "sweep_world_size": False, "layers": 3, "hidden": 32, "batch": 2, "seq_len": 16,
              "steps": 2, "strategies": "ddp,fsdp-zero3,fsdp-zero2,fsdp-zero3-bf16", "timeline": True}
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
    """Activations at the end of forward byte for byte as `encoder_activation_bytes` counts them,
    under every strategy; FSDP's gathered parameters as `transient_unsharded_bytes`; DDP's gradient
    buckets (4Ψ, rebuilt before the measured step) are what its backward leaves beside the gradients."""
    for strategy in ("ddp", "fsdp-zero3", "fsdp-zero2"):
        a = timelines[strategy]
        assert a["measured_activation_bytes"] == pytest.approx(a["estimated_activation_bytes"], rel=1e-3), strategy
    for strategy in ("fsdp-zero3", "fsdp-zero2"):
        a = timelines[strategy]
        assert a["max_unsharded_bytes"] == pytest.approx(a["estimated_unsharded_bytes"], rel=1e-3), strategy
    values = timelines["ddp"]["values"]
    buckets = values["rank_0/after backward/temporaries"]
    assert buckets == 4 * values["rank_0/n_params"], f"DDP's buckets {buckets} bytes for {values['rank_0/n_params']} parameters"


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
    records = [r for r in launch(job, min(2, torch.cuda.device_count())) if r is not None]
    assert all(r["device"] == "cuda" for r in records)
    records = [r for r in records if "peak/allocated" in r["metrics"]]  # the measured steps' memory
    assert all(r["metrics"]["peak/reserved"] >= r["metrics"]["peak/allocated"] > 0 for r in records)
    for r in (r for r in records if r["rank"] == 0):  # the allocator's history ends where the last mark stands
        values = {f"rank_0/{k}": v for k, v in r["metrics"].items()}
        table = timeline_of(values, 2)
        last = table[(table["label"] == "after optimizer step") & (table["category"] == "allocated")]["bytes"]
        trace = trace_of(values)
        assert trace and trace[-1] == pytest.approx(float(last.iloc[0]), rel=0.05)


@pytest.mark.slow
def test_torchrun_entry_point_writes_a_result_the_page_can_draw(tmp_path) -> None:
    """`torchrun -m engines.distributed.worker --out DIR` on 2 local ranks; the scenario draws DIR."""
    import json
    import sys
    from pathlib import Path
    job = {"strategies": ["ddp", "fsdp-zero3"], "seed": 0, "vocab": 64, "hidden": 32, "layers": 1, "heads": 4,
           "batch": 2, "seq_len": 8, "steps": 2, "lr": 1e-3, "optimizer": "adam", "timeline": True, "device": "cpu"}
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           "-m", "engines.distributed.worker", "--job", json.dumps(job), "--out", str(tmp_path)],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank_00.jsonl", "rank_01.jsonl"]
    summary = SCENARIO.run({"result_dir": str(tmp_path)}).summary
    assert set(summary["arms"]) == {"ddp · N=2", "fsdp-zero3 · N=2"}
    assert all(abs(a["state_error"]) < 0.05 for a in summary["arms"].values())
    assert summary["arms"]["fsdp-zero3 · N=2"]["max_unsharded_bytes"] > 0, "the timeline travels in the files too"


@pytest.mark.slow
def test_each_rank_keeps_its_torch_chunk_rows_of_every_dtensor(timelines) -> None:
    """FSDP2's parameters are DTensors placed Shard(0): rank 0 keeps ceil(rows/2), rank 1 the rest."""
    values = timelines["fsdp-zero3"]["values"]
    names = [k.split("/")[2] for k in values if k.startswith("rank_0/dtensor/") and k.endswith("/rows")]
    assert len(names) == 3 + 12 * 3, names  # embedding, head weight and bias, 12 tensors per block
    for name in names:
        rows, mine, theirs = (values[f"rank_{r}/dtensor/{name}/{k}"] for r, k in ((0, "rows"), (0, "local_rows"),
                                                                                 (1, "local_rows")))
        assert values[f"rank_0/dtensor/{name}/shard_dim"] == 0, name
        assert (mine, theirs) == (math.ceil(rows / 2), rows - math.ceil(rows / 2)), f"{name}: {mine} + {theirs} of {rows}"
    assert not any(k.startswith("rank_0/dtensor/") for k in timelines["ddp"]["values"]), "DDP's parameters are plain"


@pytest.mark.slow
def test_ddp_all_reduces_once_and_fsdp_gathers_every_unit(timelines) -> None:
    """Three blocks + the root = 4 FSDP units: ZeRO-3 all-gathers each in forward and again in
    backward (8), ZeRO-2 only in forward (4); both reduce-scatter each unit's gradients once;
    DDP all-reduces its one gradient bucket."""
    count = lambda strategy, kind: timelines[strategy]["values"][f"rank_0/collectives/{kind}"]  # noqa: E731
    assert (count("ddp", "all-reduce"), count("ddp", "all-gather")) == (1, 0)
    for strategy, gathers in (("fsdp-zero3", 8), ("fsdp-zero2", 4), ("fsdp-zero3-bf16", 8)):
        got = (count(strategy, "all-gather"), count(strategy, "reduce-scatter"), count(strategy, "all-reduce"))
        assert got == (gathers, 4, 0), f"{strategy}: all-gathers, reduce-scatters, all-reduces = {got}"


@pytest.mark.slow
def test_bf16_computes_in_2_bytes_while_the_master_weights_keep_4(timelines) -> None:
    for strategy, compute in (("ddp", 4), ("fsdp-zero3", 4), ("fsdp-zero3-bf16", 2)):
        values = timelines[strategy]["values"]
        got = tuple(values[f"rank_0/precision/{k}"] for k in ("compute", "master", "adam"))
        assert got == (compute, 4, 4), f"{strategy}: compute, master, Adam bytes per value = {got}"
    zero3, bf16 = timelines["fsdp-zero3"], timelines["fsdp-zero3-bf16"]
    assert bf16["max_unsharded_bytes"] == pytest.approx(zero3["max_unsharded_bytes"] / 2, rel=0.05)


@pytest.mark.slow
def test_a_diverging_arm_ends_at_the_same_step_on_every_rank(tag) -> None:
    """lr = 1e30: the all-reduced loss is NaN at step 1; each rank ends the arm there (the shared
    rule), and the next strategy still runs."""
    records = [r for r in launch({**JOB, "strategies": ["ddp", "fsdp-zero3"], "steps": 4, "lr": 1e30}, 2) if r]
    for strategy in ("ddp", "fsdp-zero3"):
        ended = [(r["rank"], r["step"], r["diverged"]) for r in records if r["arm"] == strategy and "diverged" in r]
        assert ended == [(0, 1, "diverged at step 1: loss is nan"), (1, 1, "diverged at step 1: loss is nan")], ended
        assert max(r["step"] for r in records if r["arm"] == strategy) == 1
    assert ranks_alive(tag) == []


def test_a_launch_leaves_spare_ranks_that_the_next_takes_and_that_end_with_their_stdin(monkeypatch, tag) -> None:
    """Where EXPLORER_SPARE_RANKS is set (the page's workers), the ranks of the next run are
    started ahead with torch imported; the next launch runs on them, and a spare whose stdin
    closes (its launcher went away) exits by itself."""
    from engines.distributed import launch as distributed
    monkeypatch.setenv(distributed.SPARES_VARIABLE, "2")
    try:
        first = [r for r in launch(JOB, 2) if r]
        spares = distributed.spares()
        assert len(spares) == 2 and sorted(ranks_alive(tag)) == sorted(spares), "two spares wait, nothing else"
        second = [r for r in launch(JOB, 2) if r]
        assert [r["metrics"] for r in second] == [r["metrics"] for r in first], "the spares train the same run"
        assert not set(spares) & set(ranks_alive(tag)), "the spares were the second run's ranks, now reaped"
        assert len(distributed.spares()) == 2
        proc, errors = distributed._spares[0]
        proc.stdin.close()  # what the launcher's end does to it
        assert proc.wait(300) == 0, "a spare whose stdin closed exits"  # once its niced imports are done: slow under load
        errors.close()
    finally:
        distributed.drop_spares()
    assert ranks_alive(tag) == [], "no spare outlives drop_spares"
    monkeypatch.delenv(distributed.SPARES_VARIABLE)
    list(launch(JOB, 2))
    assert distributed.spares() == [] and ranks_alive(tag) == [], "unset: no spares"
