"""Sweeps at the cost of one run: what K arms trained as one batched model cost (a table, not a test).

    python bench/sweep_bench.py [--repeat 3] [--only dpo-beta ...]

Three tables, on this machine, one intra-op thread (as a worker trains):

1. per batched engine, at the scenario's default settings: the K-arm run's time ÷ the 1-arm
   time, for K = 1, 2, 4, 8, batched and (for contrast) sequential. The goal on the 2-core
   machine: ≤ 1.5× at K = 4 and ≤ 2.5× at K = 8;
2. each batched scenario's default run, sequential arms (`phases(config, batched=False)`)
   against batched;
3. repeat over seeds, 5 seeds of the default config: as 5 separate runs, and as one run with
   every seed's arms in the same batched models (`Scenario.run_seeds`), against one run;
4. one step of a tiny MLP for K arms: K sequential steps, `torch.func.vmap` over
   `functional_call` of stacked weights, and `StackedMLP`'s batched matmuls.

Times are CPU seconds of this process (`time.process_time`, the best of `--repeat`): the
machine is shared, and CPU time is what a run costs whatever else runs beside it.
"""
import argparse
import copy
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from engines.loop.runtime import configure, warm_up  # noqa: E402
from scenarios import get_scenario  # noqa: E402
from scenarios.base import Run  # noqa: E402

KS = (1, 2, 4, 8)
SEEDS = [0, 1, 2, 3, 4]
STEPS = 50  # steps timed per measurement of table 3


def cpu_seconds(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        fn()
        best = min(best, time.process_time() - started)
    return best


def drain(items) -> None:
    for _ in items:
        pass


# --- each batched engine with K arms, at its scenario's defaults -------------------------------
def dpo(level: str):
    from engines.rl import dpo as engine
    make = engine.tabular_level if level == "tabular" else engine.sequence_level
    common = dict(labels="soft", noise=0.0, pairs=512, seed=0)
    built = (make(8, steps=300, lr=0.1, log_every=3, **common) if level == "tabular"
             else make(steps=80, lr=0.01, log_every=4, **common))
    betas = [0.05, 0.1, 0.5, 1.0, 5.0, 0.2, 2.0, 0.02]

    def batched(k: int) -> None:
        drain(built.arm_records([f"β={b}" for b in betas[:k]], betas[:k]))

    def sequential(k: int) -> None:
        for beta in betas[:k]:
            drain(built.records(beta))
    return batched, sequential


def distillation():
    from engines.supervised import distill
    from engines.supervised.distill_arms import train_students
    from scenarios.distillation import N_CLASSES, N_FEATURES, Config, teacher_arm
    built: dict = {}
    drain(teacher_arm(Config(), built))
    temperatures = [None, 1.0, 2.0, 4.0, 8.0, 20.0, 3.0, 10.0]  # the hard-label arm first
    student = lambda: distill.mlp(N_FEATURES, 32, 1, N_CLASSES, seed=20)  # noqa: E731
    common = dict(alpha=0.9, t_squared=True, lr=0.2, steps=200, log_every=4)

    def batched(k: int) -> None:
        drain(train_students([f"arm {i}" for i in range(k)], [student() for _ in range(k)], built["transfer"],
                             built["test"], temperatures[:k], **common))

    def sequential(k: int) -> None:
        for t in temperatures[:k]:
            drain(distill.train_student(student(), built["transfer"], built["test"], t, **common))
    return batched, sequential


def contrastive():
    from engines.supervised.contrastive import TauArm, train_tau_arm
    from engines.supervised.contrastive_arms import train_tau_arms
    taus = [0.05, 0.1, 0.5, 1.0, 0.02, 0.2, 2.0, 0.01]

    def batched(k: int) -> None:
        drain(train_tau_arms([f"τ={t}" for t in taus[:k]], [TauArm(t) for t in taus[:k]], 200, 4))

    def sequential(k: int) -> None:
        for t in taus[:k]:
            drain(train_tau_arm(TauArm(t), 200, 4))
    return batched, sequential


def generalization():
    from engines.supervised.generalization import NoisyTeacherTask, generalization_arm
    from engines.supervised.generalization_arms import generalization_arms
    task = NoisyTeacherTask(200, 0.2, 0)
    settings = dict(width=64, decoupled=True, lr=2e-3, steps=200, patience=50, seed=0, log_every=4)
    pairs = [(0.0, 0.0), (0.5, 0.0), (0.0, 1.0), (0.5, 1.0)] * 2

    def batched(k: int) -> None:
        dropouts, decays = zip(*pairs[:k])
        drain(generalization_arms([f"arm {i}" for i in range(k)], task, dropouts=dropouts, weight_decays=decays,
                                  **settings))

    def sequential(k: int) -> None:
        for p, wd in pairs[:k]:
            drain(generalization_arm(task, dropout=p, weight_decay=wd, **settings))
    return batched, sequential


def optimizers():
    from engines.supervised.optimizers import mlp_arm
    from engines.supervised.optimizers_arms import mlp_arms
    kinds = ["sgd", "momentum", "nesterov"] * 3

    def batched(k: int) -> None:
        drain(mlp_arms([f"arm {i}" for i in range(k)], kinds[:k], 0.05, 0.9, 0.1, 200, 0))

    def sequential(k: int) -> None:
        for kind in kinds[:k]:
            drain(mlp_arm(kind, 0.05, 0.9, 0.1, 200, 0))
    return batched, sequential


def lora():
    from engines.supervised.lora import Sweep
    from engines.supervised.lora_arms import rank_arms
    ranks = (1, 2, 4, 8, 16, 32, 64, 64)
    sweep = Sweep(4, ranks, 0)

    def batched(k: int) -> None:
        drain(rank_arms(sweep, ranks[:k], "alpha = 2r", ("fc1", "fc2"), 200, 5e-3, 2))

    def sequential(k: int) -> None:
        for rank in ranks[:k]:
            drain(sweep.arm(rank, "alpha = 2r", ("fc1", "fc2"), 200, 5e-3, 2))
    return batched, sequential


ENGINES = {"dpo-beta tabular": lambda: dpo("tabular"), "dpo-beta sequence": lambda: dpo("sequence"),
           "distillation-temperature": distillation, "contrastive": contrastive, "generalization": generalization,
           "optimizers MLP": optimizers, "lora-rank": lora}
SCENARIOS = ["dpo-beta", "distillation-temperature", "contrastive", "generalization", "optimizers", "lora-rank"]


def sequential_run(scenario_id: str) -> None:
    scenario = get_scenario(scenario_id)
    Run().drive(scenario.phases(scenario.validate({}), batched=False))


# --- one step of a tiny MLP: vmap against batched matmuls ------------------------------------------
def step_costs(repeat: int) -> list[tuple]:
    from torch.func import functional_call, stack_module_state, vmap
    from engines.loop.stacked import StackedMLP, arm_cross_entropy
    from engines.supervised.models import DeepMLP
    x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))
    nets = [DeepMLP(16, 64, 3, 4, seed=k) for k in range(max(KS))]
    rows = []
    for k in KS:
        alone = [(net, torch.optim.Adam(net.parameters(), lr=1e-3, foreach=True)) for net in copy.deepcopy(nets[:k])]
        params, _ = stack_module_state(nets[:k])
        template = copy.deepcopy(nets[0]).to("meta")
        by_vmap = vmap(lambda p, xb, yb: F.cross_entropy(functional_call(template, p, (xb,)), yb), in_dims=(0, None, None))
        vmap_adam = torch.optim.Adam(params.values(), lr=1e-3, foreach=True)
        stacked = StackedMLP([[*net.linears, net.head] for net in nets[:k]])
        stacked_adam = torch.optim.Adam(stacked.parameters(), lr=1e-3, foreach=True)

        def steps(loss_of, optimizer) -> None:
            for _ in range(STEPS):
                losses = loss_of()
                optimizer.zero_grad()
                losses.sum().backward()
                losses.tolist()
                optimizer.step()
        sequential = cpu_seconds(lambda: [steps(lambda net=net: F.cross_entropy(net(x), y), opt) for net, opt in alone],
                                 repeat)
        by_vmap_s = cpu_seconds(lambda: steps(lambda: by_vmap(params, x, y), vmap_adam), repeat)
        stacked_s = cpu_seconds(lambda: steps(lambda: arm_cross_entropy(stacked(x), y), stacked_adam), repeat)
        rows.append((k, sequential, by_vmap_s, stacked_s))
    return rows


def table(header: tuple, rows: list[tuple]) -> None:
    widths = [max(len(str(r[i])) for r in [*rows, header]) for i in range(len(header))]
    print("| " + " | ".join(str(h).ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths)) + " |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", action="append", help="only these engines / scenario ids (repeatable)")
    args = parser.parse_args()
    configure()
    warm_up()
    print(f"{time.strftime('%Y-%m-%d')}: torch {torch.__version__}, {torch.get_num_threads()} intra-op thread(s), "
          f"{os.cpu_count()} cores; CPU seconds, best of {args.repeat}\n")
    rows = []
    for name, make in ENGINES.items():
        if args.only and not any(name.startswith(o) for o in args.only):
            continue
        batched, sequential = make()
        batched(1)  # the first call pays one-off costs (imports, first kernels)
        one = {"batched": cpu_seconds(lambda: batched(1), args.repeat), "sequential": None}
        ratios = {k: cpu_seconds(lambda: batched(k), args.repeat) / one["batched"] for k in KS[1:]}
        sequential_8 = cpu_seconds(lambda: sequential(8), 1) / cpu_seconds(lambda: sequential(1), args.repeat)
        rows.append((name, f"{one['batched']:.2f}", *(f"{ratios[k]:.2f}" for k in KS[1:]), f"{sequential_8:.1f}"))
    table(("engine, default settings", "1 arm (s)", "K=2 (×)", "K=4 (×)", "K=8 (×)", "sequential K=8 (×)"), rows)
    rows = []
    for scenario_id in SCENARIOS:
        if args.only and scenario_id not in args.only:
            continue
        scenario = get_scenario(scenario_id)
        scenario.run({})
        before = cpu_seconds(lambda: sequential_run(scenario_id), args.repeat)
        after = cpu_seconds(lambda: scenario.run({}), args.repeat)
        rows.append((scenario_id, f"{before:.2f}", f"{after:.2f}", f"{before / after:.1f}"))
    table(("scenario, default run", "sequential arms (s)", "batched arms (s)", "speed-up (×)"), rows)
    rows = []
    for scenario_id in SCENARIOS:
        scenario = get_scenario(scenario_id)
        if not scenario.batches_seeds or (args.only and scenario_id not in args.only):
            continue
        one = cpu_seconds(lambda: scenario.run({}), args.repeat)
        apart = cpu_seconds(lambda: [scenario.run({"seed": seed}) for seed in SEEDS], 1)
        together = cpu_seconds(lambda: scenario.run_seeds({}, SEEDS), args.repeat)
        rows.append((scenario_id, f"{one:.2f}", f"{apart:.2f}", f"{together:.2f}", f"{together / one:.2f}"))
    table(("scenario, 5 seeds", "one run (s)", "5 separate runs (s)", "5 seeds as one run (s)", "one run's (×)"), rows)
    if not args.only:
        per_step_ms = 1000 / STEPS
        rows = [(k, *(f"{seconds * per_step_ms:.2f}" for seconds in costs)) for k, *costs in step_costs(args.repeat)]
        table(("K", "K sequential steps (ms)", "vmap(functional_call) (ms)", "StackedMLP baddbmm (ms)"), rows)


if __name__ == "__main__":
    main()
