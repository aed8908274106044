"""Seeds as arms: several seeds of one config trained in one run, and each seed's records apart again.

"Repeat over seeds" draws a band from N runs that differ only in the seed. A scenario whose arms
train as one batched model (engines/loop/batched.py) can take the seeds as more arms of that
model (`Scenario.seed_phases`), so the N seeds cost about one run. Its records of arm `a` for
seed `s` are reported as `seed_arm(a, s)`; `split` turns the run's rows and events back into
one frame per seed, the one a run of that seed alone gives (tests/test_seeded.py), which is
stored as that seed's run.
"""
import pandas as pd

from scenarios.driver import COLUMNS, Event

OPEN, CLOSE = " ⟨seed ", "⟩"


def seed_arm(arm: str, seed: int) -> str:
    """`arm` of seed `seed` inside a run of several seeds: 'β=0.1 ⟨seed 3⟩'."""
    return f"{arm}{OPEN}{seed}{CLOSE}"


def arm_and_seed(name: str) -> tuple[str, int | None]:
    """('β=0.1', 3) from 'β=0.1 ⟨seed 3⟩'; (name, None) for a name without a seed."""
    arm, mark, rest = name.rpartition(OPEN)
    if not mark or not rest.endswith(CLOSE) or not rest[:-len(CLOSE)].isdigit():
        return name, None
    return arm, int(rest[:-len(CLOSE)])


def named(arms: list[str], seeds: list[int]) -> list[str]:
    """Every arm of every seed, seed by seed; a single seed keeps the plain names (a run of its own)."""
    return list(arms) if len(seeds) == 1 else [seed_arm(arm, seed) for seed in seeds for arm in arms]


def split(frame: pd.DataFrame, events: list[Event], seeds: list[int]) -> dict[int, tuple[pd.DataFrame, list[Event]]]:
    """Per seed: its rows and events with the plain arm names (rows of no seed belong to none)."""
    parts = frame["arm"].map(arm_and_seed) if len(frame) else pd.Series([], dtype=object)
    plain, of_seed = parts.map(lambda p: p[0]), parts.map(lambda p: p[1])
    result = {}
    for seed in seeds:
        mine = (of_seed == seed).to_numpy(bool) if len(frame) else []
        rows = frame[mine].assign(arm=plain[mine]).reset_index(drop=True) if len(frame) else frame
        result[seed] = (rows[COLUMNS], [Event(arm_and_seed(e.arm)[0], e.step, e.kind, e.message)
                                        for e in events if arm_and_seed(e.arm)[1] == seed])
    return result
