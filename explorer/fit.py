"""Will my model fit? The Python function, the subprocess the page uses, and the text table.

    from explorer.fit import fit
    report = fit("my_pkg.models:build", strategy="fsdp-zero3", world=64, batch=64, seq=2048,
                 dtype="bf16", optimizer="adamw")
    report["per_rank"]["peak"], report["analytic"]["peak"], report["fits_line"]

`fit` measures in this process (torch loads on the first call); `model` is an import path
"MODULE:FACTORY" (that module's code runs), a factory callable, or None with `architecture`
naming a built-in GPT-style or Llama-style shape (engines/distributed/fit_models.py). The
page calls `fit_in_subprocess` instead: a `python -m engines.distributed.fit_report` child
measures and prints one JSON line, so the page's process never imports torch, and a
person's model code runs only there.

This module imports no torch (a test keeps explorer/ torch-free); the engines load inside `fit`.
"""
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ROWS = ("parameters", "gradients", "optimizer_state", "activations", "unsharded", "temporaries", "communication",
        "peak")
LIMIT_S = 300.0


class FitFailed(RuntimeError):
    """A measurement in the subprocess failed: its last error line."""


def job_of(model: str | Callable | None = None, *, architecture: dict | None = None, inputs: str | None = None,
           **spec: Any) -> dict[str, Any]:
    """The job `engines.distributed.fit_report` reads, from the same arguments as `fit`."""
    return {"model": model, "architecture": architecture, "inputs": inputs,
            "device": spec.pop("device", "cpu"), "spec": spec}


def fit(model: str | Callable | None = None, *, architecture: dict | None = None, inputs: str | None = None,
        strategy: str = "fsdp-zero3", world: int = 8, batch: int = 8, seq: int = 1024, dtype: str = "bf16",
        optimizer: str = "adamw", checkpointing: bool = False, device: str = "cpu") -> dict[str, Any]:
    """Per-rank memory of one training step of `model` (measured under FakeTensorMode, a fake
    process group standing in for the ranks), beside the analytic model. Bad input raises
    `engines.distributed.fit_inputs.FitError` (a ValueError) with one line."""
    from engines.distributed.fit_report import report
    return report(job_of(model, architecture=architecture, inputs=inputs, strategy=strategy, world=world,
                         batch=batch, seq=seq, dtype=dtype, optimizer=optimizer, checkpointing=checkpointing,
                         device=device))


def fit_in_subprocess(job: dict[str, Any], timeout_s: float = LIMIT_S) -> dict[str, Any]:
    """`report(job)` measured in a child process: the report, or {"error": one line} for bad input;
    FitFailed when the child failed otherwise (its last error line)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1"}
    try:
        done = subprocess.run([sys.executable, "-m", "engines.distributed.fit_report", "--job", json.dumps(job)],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise FitFailed(f"the measurement took longer than {timeout_s:.0f} s") from None
    lines = done.stdout.strip().splitlines()
    if lines and lines[-1].startswith("{"):
        return json.loads(lines[-1])
    errors = [line for line in done.stderr.strip().splitlines() if line.strip()]
    raise FitFailed(errors[-1] if errors else f"the measurement exited with code {done.returncode}")


def count(n: float) -> str:
    """6.87B, 124M, 748K parameters."""
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= size:
            return f"{n / size:.3g}{suffix}"
    return f"{n:.0f}"


def unit_for(peak_bytes: float) -> tuple[float, str]:
    """GB (10⁹ bytes) for a model that needs a tenth of one or more, else MB."""
    return (1e9, "GB") if peak_bytes >= 1e8 else (1e6, "MB")


def amount(nbytes: float | None, divisor: float = 1e9) -> str:
    return "—" if nbytes is None else f"{nbytes / divisor:.3f}"


def table(report: dict[str, Any]) -> str:
    """The per-rank bytes beside the analytic model's, in GB, with each difference named."""
    config = report["config"]
    divisor, unit = unit_for(report["per_rank"]["peak"])
    lines = [f"{config['model']}: {count(report['n_params'])} parameters; {config['strategy']}, world "
             f"{config['world']}, batch {config['batch']} ({config['batch'] // config['world']} per rank), seq "
             f"{config['seq']}, {config['dtype']}, {config['optimizer']}"
             f"{', activation checkpointing' if config['checkpointing'] else ''}",
             f"rank {report['rank']}, one training step, in {unit} (10^{len(str(int(divisor))) - 1} bytes):",
             f"  {'':16s} {'measured':>10s} {'formula':>10s}  difference"]
    for row in ROWS:
        measured, formula = report["per_rank"][row], report["analytic"].get(row)
        why = report["difference"][row]["text"] if row in report["difference"] else ""
        lines.append(f"  {row:16s} {amount(measured, divisor):>10s} {amount(formula, divisor):>10s}  {why}")
    phases = report["phases"]
    lines.append("  by phase (total / unsharded): " + "; ".join(
        f"{phase} {amount(phases[phase]['total'], divisor)} / {amount(phases[phase]['unsharded'], divisor)}"
        for phase in ("after forward", "after backward", "after optimizer step")))
    lines.append(report["fits_line"])
    return "\n".join(lines)
