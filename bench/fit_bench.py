"""How long `tdx fit` takes, and how much memory it holds, for large models (not a test).

    python bench/fit_bench.py [--rows 7b-zero3,7b-ddp,...]

Each row runs `python -m explorer fit ... --json` in a fresh process, as a person would,
and reports its wall time, its CPU time (user + system: on a shared machine the honest
figure for what the command costs), its largest resident set, and the peak per rank it
measured. Fake tensors hold no data, so a 7B model is measured in a few hundred MB.
"""
import argparse
import datetime
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPT_7B = ["--arch", "gpt", "--layers", "32", "--hidden", "4096", "--heads", "32", "--vocab", "50304"]
LLAMA_8B = ["--arch", "llama", "--layers", "32", "--hidden", "4096", "--heads", "32", "--kv-heads", "8",
            "--vocab", "128256", "--ffn", "14336"]
ROWS = {
    "7b-zero3": GPT_7B + ["--strategy", "fsdp-zero3", "--world", "64", "--batch", "64", "--seq", "2048",
                          "--dtype", "bf16"],
    "7b-zero3-1024": GPT_7B + ["--strategy", "fsdp-zero3", "--world", "1024", "--batch", "1024", "--seq", "2048",
                               "--dtype", "bf16"],
    "7b-zero2-ckpt": GPT_7B + ["--strategy", "fsdp-zero2", "--world", "64", "--batch", "64", "--seq", "2048",
                               "--dtype", "bf16-mixed", "--checkpointing"],
    "7b-ddp": GPT_7B + ["--strategy", "ddp", "--world", "64", "--batch", "64", "--seq", "2048", "--dtype", "bf16"],
    "llama-8b-zero3": LLAMA_8B + ["--strategy", "fsdp-zero3", "--world", "64", "--batch", "64", "--seq", "8192",
                                  "--dtype", "bf16-mixed", "--checkpointing"],
}


def run_row(arguments: list[str]) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "explorer", "fit", *arguments, "--json"], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(done.stderr.strip().splitlines()[-1])
    report = json.loads(done.stdout)
    return {"wall_s": wall, "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "rss_mb": after.ru_maxrss / 1024, "params_b": report["n_params"] / 1e9,
            "peak_gb": report["per_rank"]["peak"] / 1e9, "formula_gb": report["analytic"]["peak"] / 1e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="7b-zero3", help=f"comma-separated, of: {', '.join(ROWS)}")
    names = parser.parse_args().rows.split(",")
    print(f"{datetime.date.today()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    print(f"{'row':16s} {'params':>7s} {'wall s':>7s} {'cpu s':>6s} {'RSS MB':>7s} {'peak/rank':>10s} {'formula':>8s}")
    for name in names:
        row = run_row(ROWS[name])
        print(f"{name:16s} {row['params_b']:6.2f}B {row['wall_s']:7.1f} {row['cpu_s']:6.1f} {row['rss_mb']:7.0f} "
              f"{row['peak_gb']:8.2f}GB {row['formula_gb']:6.2f}GB")


if __name__ == "__main__":
    main()
