"""Fit each scenario's cost model (`Scenario.rates`, scenarios/cost.py) on this machine, and print how
its estimates compare with measured runs.

    python bench/estimates.py [SCENARIO ...] [--repeat 2] [--memory] [--large]

Per scenario: one untimed run of `tiny` (imports, first-call costs: a worker has paid them before a
run), then every calibration config — `tiny`, the three `timed`, the defaults and the `EXTRA` ones
below — `--repeat` times, keeping the least CPU seconds (this process's and its children's: with one
intra-op thread, as a worker trains, a run's CPU seconds are its wall seconds on a quiet machine, and
this machine is shared). Fits the rates by non-negative least squares on the relative error and
prints them, to paste into the scenario with the date and `rates_reference` (the CPU seconds of
engines.loop.runtime's reference workload, measured beside the runs: tests/test_estimates.py scales
an estimate by the machine's speed then and now), and each config's measured seconds beside the
current estimate and the fitted one. `--large` adds the `LARGE` configs (tens of seconds: does the fit
carry to big settings?) to the table without fitting on them; `--memory` runs the config estimated to
hold the most again in a fresh process and prints its peak RSS growth beside the estimate's bytes. The distributed scenarios keep
their own models (their launch.py); they are measured, not fitted. Not a test.
"""
import argparse
import itertools
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engines.loop.runtime import configure, reference_cpu_seconds  # noqa: E402
from scenarios import all_scenarios, get_scenario  # noqa: E402
from scenarios.base import Estimate  # noqa: E402
from scenarios.cost import price  # noqa: E402

# Configs the fit also uses: each moves a term the tiny/timed/default configs hold still.
EXTRA: dict[str, list[dict]] = {
    "autodiff": [{"pretrain_steps": 50, "finetune_steps": 50}, {"pretrain_steps": 3000, "finetune_steps": 10}],
    "vanishing-gradients": [{"depth": 4, "width": 256, "steps": 300}, {"depth": 48, "width": 32, "steps": 200},
                            {"depth": 16, "width": 128, "steps": 30, "contrast": "none"}],
    "generalization": [{"n": 5000, "width": 32, "steps": 100}, {"width": 8, "steps": 1000, "sweep": "none"},
                       {"width": 512, "steps": 50, "sweep": "none"}],
    "dead-relu": [{"depth": 12, "width": 32, "steps": 200, "networks": 32, "born_dead_depth": 5},
                  {"networks": 512, "born_dead_depth": 100, "born_dead_widths": "2,4,8,16,32", "steps": 20},
                  {"width": 128, "depth": 2, "steps": 300, "networks": 32}, {"steps": 50, "born_dead_depth": 50}],
    "warmup": [{"layers": 12, "steps": 100}, {"layers": 4, "steps": 30, "contrast": "none"}],
    "pretrain-finetune": [{"domain_steps": 600, "pretrain_steps": 10, "sft_steps": 10, "classifier_steps": 10},
                          {"sft_steps": 400, "length": 2, "pretrain_steps": 10, "domain_steps": 10, "classifier_steps": 10}],
    "attention": [{"keys": 64, "steps": 10}, {"pairs": 12, "layers": 2, "steps": 200, "heads": "4,8"},
                  {"steps": 40, "heads": "1,2"}],
    "positions": [{"train_length": 16, "layers": 2, "steps": 200}, {"train_length": 4, "steps": 40},
                  {"train_length": 12, "steps": 500}],
    "lora-rank": [{"ranks": "1,4,16,64", "steps": 100}, {"ranks": "1,2,4,8", "steps": 20, "target_layers": "fc2"},
                  {"steps": 1000, "ranks": "8,16,32,64"}],
    "optimizers": [{"steps": 2000, "net_steps": 100}, {"net_steps": 2000, "steps": 100}],
    "batch-size-clipping": [{"batch_sizes": "32,1024", "steps": 500, "rnn_steps": 10, "seq_len": 5},
                            {"batch_sizes": "8,64,512", "rnn_steps": 500, "seq_len": 10, "steps": 10},
                            {"rnn": "tanh", "rnn_steps": 200, "seq_len": 50, "steps": 100}],
    "quantization": [{"width": 128, "train_steps": 600, "qat_steps": 300},
                     {"width": 16, "train_steps": 2000, "qat_bits": "none"},
                     {"width": 256, "train_steps": 50, "qat_bits": "2,3,4", "qat_steps": 200},
                     {"train_steps": 50, "schemes": "per-tensor: symmetric vs asymmetric", "qat_bits": "none", "bits": "8"},
                     {"width": 32, "qat_steps": 1000, "qat_bits": "2", "train_steps": 100}],
    "distillation-temperature": [
        {"teacher_steps": 1500, "teacher_width": 64, "student_steps": 20, "temperatures": "4"},
        {"student_width": 256, "student_steps": 300, "transfer_size": 1000, "teacher_steps": 50},
        {"student_steps": 30, "teacher_steps": 20},
        {"transfer_size": 20, "student_steps": 1000, "temperatures": "1,20", "teacher_steps": 20}],
    "contrastive": [{"batch": 256, "steps": 300, "temperatures": "0.1"},
                    {"batch": 16, "steps": 1000, "temperatures": "0.02,1"},
                    {"batch": 512, "embedding_dim": 2, "steps": 100, "temperatures": "0.1"},
                    {"steps": 30, "temperatures": "0.02,0.05,0.1,0.2,0.5,1"}],
    "memory-tricks": [{"layers": 64, "width": 64, "batch": 32, "timing_repeats": 5, "steps": 50},
                      {"layers": 2, "width": 512, "batch": 256, "timing_repeats": 20, "steps": 50},
                      {"steps": 2000, "timing_repeats": 1, "layers": 4, "width": 32},
                      {"layers": 60, "width": 256, "batch": 256, "timing_repeats": 1, "steps": 20}],
    "dpo-beta": [{"level": "sequence", "pairs": 4096, "sequence_steps": 50, "betas": "0.1,1"},
                 {"level": "tabular", "tabular_steps": 300, "pairs": 4096, "labels": "hard"},
                 {"level": "sequence", "sequence_steps": 25, "betas": "0.02,0.05,0.1,0.2,0.5,1,2,5"}],
    "tokenization": [{"prose_kib": 256, "vocab_size": 4096, "budget_steps": 10},
                     {"prose_kib": 16, "vocab_size": 256, "budget_steps": 300}, {"prose_kib": 128, "vocab_size": 512, "budget_steps": 10}],
    "masked-vs-causal": [{"steps": 600, "w2v_steps": 20}, {"steps": 20, "w2v_steps": 3000},
                         {"steps": 300, "context": 8, "line_length": 8, "w2v_steps": 20}],
    "next-token": [{"steps": 300, "context": 16, "line_length": 8, "prose_vocab": 256}, {"steps": 20, "prose_vocab": 1024},
                   {"steps": 100, "context": 64, "prose_vocab": 256}],
    "rlhf-ppo": [{"pairs": 64, "steps": 200, "group": 32, "ppo_epochs": 1}, {"reward_steps": 2000, "pairs": 256, "steps": 20},
                 {"reward_steps": 1500, "pairs": 4096, "steps": 10},
                 {"level": "tabular", "steps": 200, "reward_steps": 100},
                 {"steps": 1000, "ppo_epochs": 8, "group": 2, "reward_steps": 20}],
    "mixed-precision": [{"steps": 1500}, {"steps": 30}],
    "compositional": [{"steps": 600, "eval_commands": 32}, {"steps": 50, "eval_commands": 512, "layers": 1},
                      {"d_model": 96, "steps": 100, "eval_commands": 32}, {"steps": 100, "batch_size": 256, "layers": 1},
                      {"opposite": True, "after": True, "steps": 50, "eval_commands": 32},
                      {"thrice": True, "steps": 100, "layers": 1, "batch_size": 32},
                      {"batch_size": 512, "steps": 50, "d_model": 64, "eval_commands": 32}],
}
# Big settings, measured with --large to see that the fit carries there (not fitted on).
LARGE: dict[str, list[dict]] = {
    "vanishing-gradients": [{"depth": 64, "width": 256, "steps": 1000, "contrast": "none"}],
    "memory-tricks": [{"layers": 64, "width": 512, "batch": 256, "timing_repeats": 2, "steps": 100}],
    "generalization": [{"width": 512, "steps": 1000, "n": 5000}],
    "distillation-temperature": [{"teacher_width": 512, "teacher_steps": 3000, "student_steps": 1000}],
    "positions": [{"train_length": 16, "layers": 2, "heads": 4, "steps": 600}],
    "contrastive": [{"batch": 512, "embedding_dim": 64, "steps": 600}],
}


def cpu_seconds() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def measure(scenario, overrides: dict, repeat: int) -> tuple[float, float]:
    """(least CPU seconds, least wall seconds) of `repeat` runs."""
    cpu, wall = [], []
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), cpu_seconds()
        scenario.run(overrides)
        wall.append(time.perf_counter() - started)
        cpu.append(cpu_seconds() - started_cpu)
    return min(cpu), min(wall)


def fit(terms: list[dict[str, float]], seconds: list[float]) -> dict[str, float]:
    """Non-negative rates minimizing Σ ((estimate − measured) / measured)², by trying every subset of
    terms (a handful) and keeping the best all-non-negative least-squares solution."""
    names = sorted({name for row in terms for name in row})
    matrix = np.array([[row.get(name, 0.0) for name in names] for row in terms]) / np.array(seconds)[:, None]
    target = np.ones(len(seconds))
    best, best_error = {}, float("inf")
    for size in range(1, len(names) + 1):
        for subset in itertools.combinations(range(len(names)), size):
            coef, *_ = np.linalg.lstsq(matrix[:, subset], target, rcond=None)
            error = float(np.sum((matrix[:, subset] @ coef - target) ** 2))
            if (coef >= 0).all() and error < best_error:
                best, best_error = {names[i]: float(c) for i, c in zip(subset, coef)}, error
    return best


def calibration_configs(scenario) -> list[dict]:
    configs = [scenario.tiny, *scenario.timed, {}, *EXTRA.get(scenario.id, [])]
    return [json.loads(c) for c in dict.fromkeys(json.dumps(c, sort_keys=True) for c in configs)]


def peak_growth_bytes(scenario_id: str, overrides: dict) -> float:
    """Peak RSS growth of one run in a fresh process, over the process after a tiny run."""
    code = ("import json, resource, sys; sys.path.insert(0, %r)\n"
            "from engines.loop.runtime import configure; configure()\n"
            "from scenarios import get_scenario; s = get_scenario(%r); s.run(s.tiny)\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "s.run(json.loads(%r))\n"
            "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)") % (
        str(ROOT), scenario_id, json.dumps(overrides))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def report(scenario, repeat: int, memory: bool, large: bool) -> None:
    configs = calibration_configs(scenario)
    scenario.run(scenario.tiny)  # untimed: imports and first calls
    reference = reference_cpu_seconds()  # measured beside the runs: the same machine, the same load
    rows = []
    for overrides in configs + (LARGE.get(scenario.id, []) if large else []):
        cpu, wall = measure(scenario, overrides, 1 if overrides in LARGE.get(scenario.id, []) else repeat)
        rows.append((overrides, cpu, wall))
    distributed = scenario.rank_processes(scenario.validate(scenario.tiny)) > 0
    fitted = {} if distributed else fit([scenario.work(scenario.validate(o)).terms | {"run": 1.0} for o, *_ in
                                         rows[:len(configs)]], [cpu for _, cpu, _ in rows[:len(configs)]])
    biggest = max(configs, key=lambda o: price({}, scenario.work(scenario.validate(o)))[1] if not distributed
                  else scenario.estimate(scenario.validate(o)).bytes)
    print(f"\n== {scenario.id}")
    if fitted:
        print("    rates = {" + ", ".join(f'"{k}": {v:.3g}' for k, v in fitted.items()) + "}")
        print(f"    rates_reference = {reference:.4f}  # the machine's reference workload, CPU s, as they were fitted")
    print(f"    {'cpu s':>7} {'wall s':>7} {'est s':>7} {'ratio':>6} {'fit s':>7} {'ratio':>6}"
          + ("   peak MB   est MB" if memory else "") + "  config")
    for overrides, cpu, wall in rows:
        config = scenario.validate(overrides)
        estimate = scenario.estimate(config) or Estimate(0.0)  # None before its first rates
        refit = price(fitted, scenario.work(config))[0] if fitted else float("nan")
        measured = wall if distributed else cpu  # the distributed models are of wall time (their cores shared)
        line = (f"    {cpu:7.2f} {wall:7.2f} {estimate.seconds:7.2f} {measured / max(estimate.seconds, 1e-9):6.2f} "
                f"{refit:7.2f} {measured / refit:6.2f}")
        if memory and overrides == biggest:  # one fresh process each: only the config that holds the most
            line += f"  {peak_growth_bytes(scenario.id, overrides) / 1e6:8.0f} {estimate.bytes / 1e6:8.0f}"
        print(line + "  " + (json.dumps(overrides) if overrides else "defaults"), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", help="scenario ids (default: all)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--large", action="store_true")
    args = parser.parse_args()
    configure()
    for scenario in [get_scenario(s) for s in args.scenarios] or all_scenarios():
        report(scenario, args.repeat, args.memory, args.large)


if __name__ == "__main__":
    main()
