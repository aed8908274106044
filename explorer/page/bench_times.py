"""How long a scenario's default run takes, for the home's cards: measured by bench/bench.py.

`DEFAULT_RUN_S` is the "default run (s)" column of the README's Speed table, copied as the
README quotes it (tests/test_home.py keeps the two equal). A scenario with no row there
shows its own `estimate` instead, said to be one; with neither, nothing is said.
"""
from scenarios.base import Scenario

MEASURED = "bench/bench.py, 2-core development machine, torch 2.13 CPU, median of 3, 2026-12-01 (README, Speed)"
DEFAULT_RUN_S: dict[str, float] = {
    "autodiff": 1.90,
    "vanishing-gradients": 2.19,
    "generalization": 2.09,
    "dead-relu": 2.13,
    "warmup": 3.13,
    "attention": 3.07,
    "positions": 3.49,
    "lora-rank": 2.29,
    "optimizers": 2.33,
    "batch-size-clipping": 2.24,
    "quantization": 2.09,
    "distillation-temperature": 2.32,
    "contrastive": 2.74,
    "memory-tricks": 0.88,
    "dpo-beta": 3.50,
    "rlhf-ppo": 1.92,
    "ddp-fsdp-memory": 9.82,
    "mixed-precision": 2.20,
    "collectives": 5.07,
    "tokenization": 3.76,        # these four: 2026-12-04 (README, Speed)
    "next-token": 3.75,
    "masked-vs-causal": 6.07,
    "pretrain-finetune": 7.33,
    "flash-attention": 0.79,     # 2026-12-05 (README, Speed)
    "moe": 3.10,                 # 2026-12-05 (README, Speed)
    "qlora": 4.10,               # 2026-12-05 09:02 UTC, load 2.7 (README, Speed)
    "scaling-laws": 8.39,        # 2026-12-05 09:02 UTC, load 2.7 (README, Speed)
    "reinforce": 2.63,           # 2026-12-05 09:02 UTC, load 2.7 (README, Speed)
    "grokking": 6.63,            # 2026-12-05 09:02 UTC, load 2.7 (README, Speed)
    "rlvr-grpo": 18.06,          # 2026-12-06 19:09 UTC, 600 updates, a slower machine (README, Speed)
    "compositional": 6.42,       # 2026-12-05 12:31 UTC, load 1.5, vanishing-gradients 1.11 beside it (README, Speed)
}


def seconds_label(seconds: float) -> str:
    """"~1 s", "~5 s", "~2 min": a rough figure, since the time depends on the machine."""
    return f"~{max(1, round(seconds))} s" if seconds < 90 else f"~{round(seconds / 60)} min"


def run_time(scenario: Scenario) -> str | None:
    """The default run's time in words, with where it comes from; None when nothing is known."""
    if scenario.id in DEFAULT_RUN_S:
        return f"default run {seconds_label(DEFAULT_RUN_S[scenario.id])}"
    estimate = scenario.estimate(scenario.validate({}))
    if estimate is not None:
        return f"default run {seconds_label(estimate.seconds)} (estimated)"
    return None
