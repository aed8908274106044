"""What an engine hands out: plain records of floats, and the one divergence rule.

Torch-free on purpose: the scenarios' contract and the UI read these types without
importing torch. Every loop in engines/ (the shared `training.train`, the distributed
worker's own) ends an arm through `divergence`, so "diverged at step k" means the same
thing everywhere: the first step whose loss, or any logged value, is NaN or infinite.
"""
import math
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class StepRecord:
    step: int
    metrics: dict[str, float]


@dataclass(frozen=True)
class Diverged:
    step: int
    message: str


@dataclass(frozen=True)
class Note:
    """What an arm is waiting for before its first record ("starting 3 rank processes"): shown
    beside the progress bar, not recorded."""
    text: str


def divergence(step: int, values: Mapping[str, float]) -> Diverged | None:
    """A `Diverged` naming the first non-finite value (the loss first, when it is one), else None."""
    for name, value in sorted(values.items(), key=lambda item: item[0] != "loss"):
        if not math.isfinite(value):
            return Diverged(step, f"diverged at step {step}: {name} is {value}")
    return None
