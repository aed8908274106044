"""The distributed worker on any machine: a CPU job stays on the CPU where CUDA exists, torchrun's
--out folder is made, and on CUDA the memory is measured by category as on CPU, with the
allocator's totals beside it (checked here on CPU with CUDA's functions stood in for)."""
import json
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import torch
import torch.distributed as dist

from engines.distributed import memory_tracking
from engines.distributed.launch import free_port
from engines.distributed.memory_tracking import CudaAllocator, Phases, allocator_reading
from engines.distributed.worker import TinyTransformer, choose_device, step_loss, wrap
from scenarios.ddp_fsdp_memory.summary import arm_summary

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cuda_present(monkeypatch):
    """This machine as a GPU machine would look to the device choice."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


def test_a_cpu_job_chooses_the_cpu_where_cuda_exists(cuda_present) -> None:
    """`"device": "cpu"` means the CPU whatever the machine has; auto and cuda take the rank's GPU."""
    assert choose_device({"device": "cpu"}, 1) == torch.device("cpu")
    assert choose_device({"device": "auto"}, 3) == torch.device("cuda", 1)
    assert choose_device({"device": "cuda"}, 0) == torch.device("cuda", 0)


def test_without_cuda_every_job_runs_on_the_cpu(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert {choose_device({"device": d}, 0) for d in ("cpu", "auto", "cuda")} == {torch.device("cpu")}


def test_fsdp_shards_a_cpu_job_on_a_cpu_mesh_where_the_accelerator_is_cuda() -> None:
    """fully_shard's default mesh is the machine's accelerator: on a GPU machine a gloo job's shards went
    to CUDA. With the accelerator reported as CUDA (on this CPU-only torch, any CUDA mesh fails), the
    worker's wrap still shards on the CPU."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        with mock.patch.object(torch._C, "_get_accelerator", lambda: torch.device("cuda")):
            model = wrap(TinyTransformer(16, 16, 1, 2), "fsdp-zero3", torch.device("cpu"))
        weight = next(model.parameters())
        assert (weight.device_mesh.device_type, weight.device.type) == ("cpu", "cpu"), weight.device_mesh
    finally:
        dist.destroy_process_group()


def test_the_worker_makes_its_out_folder(tmp_path) -> None:
    """README's torchrun example failed on a fresh machine: --out results/ had to exist. One gloo rank,
    --out two levels that do not exist: rank_00.jsonl is written there, every record on the CPU."""
    job = {"strategies": ["fsdp-zero3"], "seed": 0, "vocab": 16, "hidden": 16, "layers": 1, "heads": 2, "batch": 2,
           "seq_len": 4, "steps": 2, "lr": 1e-3, "optimizer": "adam", "timeline": False, "device": "cpu"}
    out = tmp_path / "new" / "results"
    done = subprocess.run([sys.executable, "-m", "engines.distributed.worker", "--job", json.dumps(job), "--rank", "0",
                           "--world-size", "1", "--port", str(free_port()), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in (out / "rank_00.jsonl").read_text().splitlines()]
    assert records and {r["device"] for r in records} == {"cpu"}, records[:2]


def test_the_allocators_reading_takes_its_current_or_peak_totals() -> None:
    stats = {"allocated_bytes.all.current": 10, "allocated_bytes.all.peak": 30,
             "reserved_bytes.all.current": 20, "reserved_bytes.all.peak": 40}
    assert allocator_reading(stats) == {"allocated": 10.0, "reserved": 20.0}
    assert allocator_reading(stats, "peak") == {"allocated": 30.0, "reserved": 40.0}


class FakeAllocator:
    """Stands in for CUDA's allocator: fixed totals, and whether the peak was reset."""

    def __init__(self) -> None:
        self.reset = 0

    def reset_peak(self) -> None:
        self.reset += 1

    def read(self, kind: str = "current") -> dict[str, float]:
        return {"allocated": 3e6 if kind == "peak" else 2e6, "reserved": 4e6}


def tracked_step(phases: Phases, model, optimizer) -> None:
    with phases:
        loss = step_loss(model, torch.randint(16, (2, 4), generator=torch.Generator().manual_seed(0)))[1]
        phases.take("after forward")
        loss.backward()
        optimizer.step()
        phases.take("peak", "peak")


def test_the_trackers_categories_and_the_allocators_totals_are_read_side_by_side() -> None:
    """The CUDA branch's reading on CPU: MemTracker's categories, and beside them the allocator's
    totals (current after forward, peak at the peak), its peak reset when the step begins."""
    model = TinyTransformer(16, 16, 1, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    allocator = FakeAllocator()
    phases = Phases(model, optimizer, "ddp", torch.device("cpu"), allocator=allocator)
    tracked_step(phases, model, optimizer)
    forward, peak = phases.snapshots["after forward"], phases.snapshots["peak"]
    assert allocator.reset == 1 and forward["allocated"] == 2e6 and peak["allocated"] == 3e6, (forward, peak)
    assert forward["activations"] > 0 and forward["parameters"] > 0, forward


def test_on_a_cuda_device_the_phases_use_the_cuda_allocator(monkeypatch) -> None:
    """Phases for a CUDA device read torch.cuda's statistics (stood in for here) beside the tracker."""
    reset, stats = [], {f"{n}_bytes.all.{k}": 1 for n in ("allocated", "reserved") for k in ("current", "peak")}
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device: reset.append(device))
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda device: stats)
    model = TinyTransformer(16, 16, 1, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    phases = Phases(model, optimizer, "ddp", torch.device("cuda", 0))
    assert isinstance(phases.allocator, CudaAllocator)
    tracked_step(phases, model, optimizer)
    assert reset == [torch.device("cuda", 0)] and phases.snapshots["peak"] == {"allocated": 1.0, "reserved": 1.0}


def test_the_allocators_totals_are_not_added_to_the_tracked_categories() -> None:
    """A CUDA record: the peak by category sums the categories; the allocator's peak is kept apart."""
    values = {"rank_0/n_params": 10.0, "rank_0/peak/parameters": 40.0, "rank_0/peak/activations": 60.0,
              "rank_0/peak/allocated": 1024.0, "rank_0/peak/reserved": 2048.0, "rank_0/on_cuda": 1.0}
    summary = arm_summary(values, "ddp", 1)
    assert (summary["peak_bytes"], summary["peak_allocated_bytes"], summary["peak_reserved_bytes"]) == (100.0, 1024.0, 2048.0)
    assert memory_tracking.ALLOCATOR == ("allocated", "reserved")
