"""The distributed memory path on one GPU, checked in one run (issue 33): `python bench/gpu_checks_ddp.py`.

Three checks, each through `torchrun -m engines.distributed.worker --out DIR` (world 1: one
GPU means one NCCL rank), each DIR a folder that does not exist yet (the worker makes it):

1. ddp-fsdp-memory's job at the sliders' largest model (8 layers, hidden 256, batch 32,
   seq_len 256) with all four strategies, on CUDA: every arm's measured model state against
   the ZeRO model, and the memory categories measured as on CPU (MemTracker/FSDPMemTracker:
   `measured_activation_bytes` must not be missing), beside the allocator's peak.
2. README's torchrun example with hidden 1024 and 8 layers (DDP and FSDP ZeRO-3), likewise.
3. A CPU job (`"device": "cpu"`, 2 gloo ranks) on this GPU machine: it must run on the CPU
   (every record says `"device": "cpu"`), FSDP's shards included.

It prints one table (arm, device, model state measured/ZeRO − 1, activations measured and by
the layer's bookkeeping, the allocator's peak) and exits 1 if any check fails. Only torch is
needed: the records are read as JSON and compared with engines.distributed.memory_model.
Where the scenario's own packages are installed (pydantic, pandas, plotly: requirements.txt),
it also draws each folder through the page's path (`ddp-fsdp-memory` with `result_dir`) and
prints that summary's `measured_activation_bytes` per arm.

`--cpu` runs the same checks on the CPU with small models: a smoke check without a GPU.
Expected time on one H200: well under 4 minutes (three torchrun starts dominate).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engines.distributed.launch import timeline_labels  # noqa: E402 (torch-free)
from engines.distributed.memory_model import PRECISIONS, encoder_activation_bytes, model_states  # noqa: E402

STRATEGIES = ["ddp", "fsdp-zero3", "fsdp-zero2", "fsdp-zero3-bf16"]
SHAPE = ("seq_len", "batch", "hidden", "heads", "layers", "vocab")
STATE_TOLERANCE = 1e-3  # measured to 4e-6 on an H200 before; exact local bytes against 16 bytes/parameter


def job(strategies: list[str], device: str, **shape: int) -> dict:
    return {"strategies": strategies, "seed": 0, "steps": 3, "lr": 1e-3, "optimizer": "adamw", "timeline": True,
            "device": device, **shape}


def jobs(cpu: bool) -> list[tuple[str, dict, int]]:
    """(name, job, ranks) of the three checks; small models under --cpu."""
    device = "cpu" if cpu else "cuda"
    largest = dict(vocab=64, hidden=256, layers=8, heads=4, batch=32, seq_len=256)  # the sliders' maxima, the page's heads
    readme = dict(vocab=64, hidden=1024, layers=8, heads=16, batch=4, seq_len=512)
    if cpu:
        largest = dict(vocab=64, hidden=32, layers=2, heads=4, batch=2, seq_len=16)
        readme = dict(vocab=64, hidden=64, layers=2, heads=4, batch=2, seq_len=16)
    tiny = dict(vocab=64, hidden=32, layers=1, heads=4, batch=2, seq_len=8)
    return [("1 scenario, largest model", job(STRATEGIES, device, **largest), 1),
            ("2 README torchrun example", job(["ddp", "fsdp-zero3"], device, **readme), 1),
            ("3 a CPU job on this machine", job(["ddp", "fsdp-zero3"], "cpu", **tiny), 2)]


def torchrun(job_spec: dict, ranks: int, out: Path) -> tuple[int, str, float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}",
                           "-m", "engines.distributed.worker", "--job", json.dumps(job_spec), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    return done.returncode, done.stderr[-3000:], time.perf_counter() - started


def rank0_values(out: Path) -> tuple[dict[str, dict[str, float]], set[str]]:
    """Per arm, rank 0's metrics merged over its records; and every device the records name."""
    arms: dict[str, dict[str, float]] = {}
    devices: set[str] = set()
    for path in sorted(out.glob("rank_*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            devices.add(record["device"])
            if record["rank"] == 0 and "metrics" in record:
                arms.setdefault(record["arm"], {}).update(record["metrics"])
    return arms, devices


def arm_row(strategy: str, values: dict[str, float], world: int) -> dict:
    """Measured against modelled, as scenarios/ddp_fsdp_memory/summary.py does (without pandas)."""
    shape = {k: int(values.get(f"shape/{k}", 0)) for k in SHAPE}
    estimate = model_states(values["n_params"], world, strategy.removesuffix("-bf16"), PRECISIONS["fp32 Adam"]).total
    measured = sum(values.get(f"exact/{k}", 0.0) for k in ("parameters", "gradients", "optimizer state"))
    labels = timeline_labels(shape["layers"])
    marks = {int(k.split("/")[1]): labels[int(v)] for k, v in values.items()
             if k.startswith("timeline/") and k.endswith("/where")}
    at = {marks[int(k.split("/")[1])]: v for k, v in values.items()
          if k.startswith("timeline/") and k.endswith("/activations")}
    acts = at["model forward end"] - at.get("step start", 0.0) if "model forward end" in at else None
    bytes_per_value = 2.0 if strategy.endswith("-bf16") else 4.0
    return {"arm": strategy, "on_cuda": bool(values.get("on_cuda")), "n_params": values["n_params"],
            "state_error": measured / estimate - 1, "measured_activation_bytes": acts,
            "estimated_activation_bytes": encoder_activation_bytes(**shape, bytes_per_value=bytes_per_value),
            "peak_allocated_bytes": values.get("peak/allocated"),
            "tracked_peak_bytes": sum(v for k, v in values.items() if k.startswith("peak/")
                                      and k not in ("peak/allocated", "peak/reserved"))}


def megabytes(value: float | None) -> str:
    return "—" if value is None else f"{value / 1e6:,.3f}"


def scenario_summary(out: Path) -> dict | None:
    """The page's own reading of the folder, where the scenario's packages are installed."""
    try:
        from scenarios import all_scenarios
    except ImportError as missing:
        print(f"  (scenario path skipped: {missing})")
        return None
    scenario = next(s for s in all_scenarios() if s.id == "ddp-fsdp-memory")
    return scenario.run({"result_dir": str(out)}).summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="small models on the CPU: a smoke check without a GPU")
    args = parser.parse_args()
    import torch
    print(f"torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}"
          + (f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""), flush=True)
    failures: list[str] = []
    rows: list[tuple[str, dict]] = []
    with tempfile.TemporaryDirectory(prefix="gpu-checks-") as scratch:
        for name, spec, ranks in jobs(args.cpu):
            out = Path(scratch) / name.split()[0] / "results"  # two levels that do not exist yet: the worker makes them
            code, errors, seconds = torchrun(spec, ranks, out)
            print(f"check {name}: exit {code} in {seconds:.1f} s", flush=True)
            if code != 0:
                failures.append(f"{name}: exit {code}: {errors.strip().splitlines()[-1:] or errors}")
                continue
            arms, devices = rank0_values(out)
            if devices != {spec["device"]}:
                failures.append(f"{name}: records name devices {sorted(devices)}, the job asked for {spec['device']}")
            if sorted(arms) != sorted(spec["strategies"]):
                failures.append(f"{name}: arms {sorted(arms)}, expected {spec['strategies']}")
            for strategy, values in arms.items():
                row = arm_row(strategy, values, ranks)
                rows.append((name.split()[0], row))
                if abs(row["state_error"]) > STATE_TOLERANCE:
                    failures.append(f"{name} {strategy}: model state off ZeRO by {row['state_error']:.2e}")
                if row["measured_activation_bytes"] is None:
                    failures.append(f"{name} {strategy}: no measured_activation_bytes")
                if spec["device"] == "cuda" and row["peak_allocated_bytes"] is None:
                    failures.append(f"{name} {strategy}: no allocator peak on CUDA")
            summary = scenario_summary(out)
            if summary is not None:
                page = {arm: a["measured_activation_bytes"] for arm, a in summary["arms"].items()}
                print(f"  page summary, measured_activation_bytes per arm: {page}", flush=True)
    print(f"\n{'check':<6}{'arm':<17}{'cuda':<6}{'params':>13}{'state/ZeRO−1':>14}{'acts MB':>11}"
          f"{'model MB':>11}{'tracked pk MB':>15}{'alloc pk MB':>13}")
    for check, row in rows:
        print(f"{check:<6}{row['arm']:<17}{str(row['on_cuda']):<6}{row['n_params']:>13,.0f}{row['state_error']:>14.2e}"
              f"{megabytes(row['measured_activation_bytes']):>11}{megabytes(row['estimated_activation_bytes']):>11}"
              f"{megabytes(row['tracked_peak_bytes']):>15}{megabytes(row['peak_allocated_bytes']):>13}")
    print("\n" + ("all checks passed" if not failures else "FAILED:\n  " + "\n  ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
