"""Every run is estimated before it starts (scenarios/cost.py): every scenario estimates its time and
memory from the config alone, a seed repeat counts every seed, and the estimate lies within 2× of the
measured time — on each scenario's `tiny` config in the default run, on its three `timed` configs
under `-m slow` (bench/estimates.py prints the same comparison, and fits the rates); and the progress
bar follows the work left.

A shared machine slows the wall clock, not a run's own CPU seconds: a run is too slow for its
estimate only when both its wall and its CPU time say so (the CPU seconds of rank processes count
over the cores they share), and too fast only by the wall clock. Each check gets three tries (the first
run of an engine in a process also pays its imports)."""
import functools
import math
import resource
import time

import pytest

from engines.loop.records import Diverged, StepRecord
from explorer.page.autorun import LARGE_SECONDS, large, run_estimate
from scenarios import all_scenarios, driver, get_scenario
from scenarios.driver import Arm, Run, together

SCENARIOS = all_scenarios()
IN_PROCESS = [s for s in SCENARIOS if not s.rank_processes(s.validate(s.tiny))]
CORES = 2
TRIES = 3


def cpu_seconds() -> tuple[float, float]:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime, children.ru_utime + children.ru_stime


def measured(scenario, overrides: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds over the cores the run's processes share) of one run."""
    processes = scenario.rank_processes(scenario.validate(overrides))
    started, (cpu, children) = time.perf_counter(), cpu_seconds()
    scenario.run(overrides)
    wall, (cpu_after, children_after) = time.perf_counter() - started, cpu_seconds()
    rank_cpu = children_after - children
    return wall, (cpu_after - cpu - rank_cpu) + rank_cpu / max(1, min(processes, CORES))


@functools.cache
def speed_now() -> float:
    """The reference workload's CPU seconds on this machine now (engines.loop.runtime)."""
    from engines.loop.runtime import reference_cpu_seconds
    return reference_cpu_seconds()


def within_twice(scenario, overrides: dict) -> str | None:
    """None when a try lands within 2× of the estimate; else what every try measured. The rates were
    fitted on some machine at some load: the estimate is scaled by how much slower or faster the
    reference workload runs here now than it ran beside the fit (a ratio, so no machine's speed is
    asserted)."""
    scale = speed_now() / scenario.rates_reference if scenario.rates_reference else 1.0
    estimate = scale * scenario.estimate(scenario.validate(overrides)).seconds
    tries = []
    for _ in range(TRIES):
        wall, cpu = measured(scenario, overrides)
        if min(wall, cpu) <= 2 * estimate and wall >= estimate / 2:
            return None
        tries.append(f"wall {wall:.2f} s, cpu {cpu:.2f} s")
    return (f"{scenario.id} {overrides}: estimate {estimate:.2f} s (×{scale:.2f}: this machine's speed now against "
            f"the fit's), measured " + "; ".join(tries))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
def test_every_scenario_estimates_its_time_and_memory(scenario) -> None:
    """Defaults, tiny and three timed configs each get a finite, positive time and a finite memory estimate."""
    assert len(scenario.timed) == 3, f"{scenario.id}: {len(scenario.timed)} timed configs, not 3"
    for overrides in ({}, scenario.tiny, *scenario.timed):
        estimate = scenario.estimate(scenario.validate(overrides))
        assert estimate is not None, f"{scenario.id} has no rates: fit them with bench/estimates.py {scenario.id}"
        assert math.isfinite(estimate.seconds) and estimate.seconds > 0, (scenario.id, overrides, estimate)
        assert math.isfinite(estimate.bytes) and estimate.bytes >= 0, (scenario.id, overrides, estimate)


def test_the_slider_maxima_of_memory_tricks_are_said_before_they_run() -> None:
    """The issue's repro: 64 layers of 512, batch 256, 20 timing repeats, 2000 steps, estimated past the
    60 s after which auto-run waits for Run, and said."""
    scenario = get_scenario("memory-tricks")
    config = scenario.validate({"layers": 64, "width": 512, "batch": 256, "timing_repeats": 20, "steps": 2000})
    estimate = run_estimate(scenario, config, 1)
    sentence = large(estimate)
    assert estimate.seconds > LARGE_SECONDS and sentence is not None and "would take about" in sentence, sentence


def test_a_seed_repeat_is_estimated_as_every_seed_run_in_turn() -> None:
    """Ten seeds run one after another: ten times the time, the same peak memory."""
    scenario = get_scenario("vanishing-gradients")
    config = scenario.validate({"depth": 64, "width": 256, "residual": True, "steps": 3000})
    one, ten = run_estimate(scenario, config, 1), run_estimate(scenario, config, 10)
    assert ten.seconds == pytest.approx(10 * one.seconds) and ten.bytes == one.bytes, (one, ten)
    longer = scenario.validate({"steps": 3000})  # ~20 s a seed
    assert large(run_estimate(scenario, longer, 1)) is None, run_estimate(scenario, longer, 1)
    sentence = large(run_estimate(scenario, longer, 10), 10)
    assert run_estimate(scenario, longer, 10).seconds > LARGE_SECONDS and sentence.startswith("These 10 seeds"), sentence


@pytest.mark.parametrize("scenario", IN_PROCESS, ids=lambda s: s.id)
def test_the_tiny_config_takes_about_its_estimate(scenario) -> None:
    """Within 2× of the measured time at the tiny config (a second or less)."""
    problem = within_twice(scenario, scenario.tiny)
    assert problem is None, problem


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
def test_the_estimate_is_within_twice_the_measured_time_on_three_configs(scenario) -> None:
    problems = [p for overrides in scenario.timed if (p := within_twice(scenario, overrides))]
    assert not problems, problems


class Progress:
    """A sink that keeps every progress fraction it hears."""

    def __init__(self) -> None:
        self.fractions: list[float] = []

    def add(self, rows) -> None: ...
    def event(self, event) -> None: ...
    def note(self, text: str) -> None: ...
    def stop_requested(self) -> bool:
        return False

    def progress(self, fraction: float) -> None:
        self.fractions.append(fraction)


def steps(count: int, diverge_at: int | None = None):
    for step in range(count):
        if step == diverge_at:
            yield Diverged(step, "diverged at step 1: loss is nan")
            return
        yield StepRecord(step, {"loss": 1.0})


def test_progress_after_an_early_divergence_follows_the_work_left(monkeypatch) -> None:
    """Two arms of 100 steps, one diverging at step 1: the bar stays near 0 (it used to jump to 50%) and
    reaches half when half of the 101 steps that run are done."""
    monkeypatch.setattr(driver, "PROGRESS_EVERY_S", 0.0)  # hear every step
    sink = Progress()
    Run(sink).drive(together(Arm("diverges", steps(100, diverge_at=1), 100), Arm("trains", steps(100), 100)))
    fractions = sink.fractions
    assert fractions[1] < 0.05, f"after the divergence {fractions[1]:.2f}"
    assert abs(fractions[50] - 0.5) < 0.02, f"at step 50 of the arm left {fractions[50]:.2f}"
    assert fractions == sorted(fractions) and fractions[-1] == 1.0, "never backwards, and done at the end"
