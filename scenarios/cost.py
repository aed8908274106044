"""What a run will cost, said before it starts: seconds and bytes from the config alone.

A scenario names the work its run grows with, `Scenario.work(config)`: a few terms counted
from the config (steps summed over the arms, multiply-adds, logged evaluations, …) and the
floats its run holds at once at its peak. `Scenario.rates` prices each term in seconds per
unit on this project's 2-core machine, one intra-op thread, as a worker trains; the rates
are fitted by `python bench/estimates.py SCENARIO`, which runs the scenario at a dozen
configs, takes each run's CPU seconds (the machine is shared: wall time there measures the
neighbours too), fits the rates by non-negative least squares on the relative error, and
prints them with each measured/estimated ratio. tests/test_estimates.py keeps every
estimate within 2× of the measured time on three configs per scenario (`Scenario.timed`).

    seconds = rates["run"] + Σ_term rates[term] · work.terms[term]
    bytes   = TENSOR_OVERHEAD · 4 · work.floats

The bytes are the run's own (a worker process with torch imported holds ~350 MB before it);
a scenario that starts processes of its own (the distributed ones) counts them whole in its own
`estimate`. Torch-free: the page asks before Run.
"""
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

FLOAT_BYTES = 4
# Peak RSS growth over the counted floats' bytes: autograd's saved tensors, temporaries, the allocator's slack.
# bench/estimates.py --memory, 2026-12-04: at 3.0 the measured peak was 0.30-1.72× the estimate on the 14
# scenarios whose largest config grows the process by 5 MB or more (geometric mean 0.69), so 2.0.
TENSOR_OVERHEAD = 2.0


@dataclass(frozen=True)
class Work:
    """What a run of one config does: the terms its time grows with, and the floats it holds at its peak
    (parameters, gradients, optimizer state, activations, data)."""

    terms: dict[str, float] = field(default_factory=dict)
    floats: float = 0.0


def price(rates: Mapping[str, float], work: Work) -> tuple[float, float]:
    """(seconds, bytes) of `work` at `rates` (see the module doc)."""
    unknown = set(rates) - set(work.terms) - {"run"}
    if unknown:
        raise KeyError(f"rates for terms the work does not count: {sorted(unknown)}")
    seconds = rates.get("run", 0.0) + sum(rates.get(name, 0.0) * value for name, value in work.terms.items())
    return seconds, TENSOR_OVERHEAD * FLOAT_BYTES * work.floats


def logs(steps: int, max_points: int = 100) -> int:
    """How many steps of `steps` log (engines.loop.training.log_every_for's cadence)."""
    every = max(1, math.ceil(steps / max_points))
    return math.ceil(steps / every)


def mlp_macs(sizes: Iterable[int]) -> float:
    """Multiply-adds of one example through Linear layers of these sizes (input, hidden…, output)."""
    sizes = list(sizes)
    return float(sum(a * b for a, b in zip(sizes, sizes[1:])))


def mlp_floats(sizes: Iterable[int]) -> float:
    """Parameters of Linear layers of these sizes (weights and biases)."""
    sizes = list(sizes)
    return float(sum(a * b + b for a, b in zip(sizes, sizes[1:])))
