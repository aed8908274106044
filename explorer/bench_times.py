"""How long a scenario's default run takes, for the home's cards: measured by bench/bench.py.

`DEFAULT_RUN_S` is the "default run (s)" column of the README's Speed table, copied as the
README quotes it (tests/test_home.py keeps the two equal). A scenario with no row there
shows its own `estimate` instead, said to be one; with neither, nothing is said.
"""
from scenarios.base import Scenario

MEASURED = "bench/bench.py, 2-core development machine, torch 2.13 CPU, median of 3 (README, Speed)"
DEFAULT_RUN_S: dict[str, float] = {
    "vanishing-gradients": 1.01,
    "dead-relu": 0.99,
    "warmup": 1.37,
    "lora-rank": 1.14,
    "quantization": 0.84,
    "distillation-temperature": 1.32,
    "dpo-beta": 1.56,
    "ddp-fsdp-memory": 4.61,
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
