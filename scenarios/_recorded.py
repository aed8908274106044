"""Claims on single recorded numbers, shared by the attention, positions and contrastive pages."""
from collections.abc import Callable

from scenarios.claims import Computed, fmt
from scenarios.records import Records


def percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def recorded(records: Records, arm: str, metric: str, step: int | None = None, text: str = "{}",
             shown: Callable[[float], str] | None = None) -> Computed | None:
    """The value of `metric` at `step` (default: the arm's last) as a claim; None when it is not there."""
    step = records.last_step(arm, metric) if step is None else step
    value = records.at(arm, metric, step) if step is not None else None
    if value is None:
        return None
    return Computed(text, value, lambda r: r.at(arm, metric, step), shown=shown(value) if shown else fmt(value))


def listed(claims: list) -> tuple[str, list]:
    """', '.join of a slot per claim that is there, and those claims (missing ones dropped)."""
    present = [claim for claim in claims if claim is not None]
    return ", ".join(["{}"] * len(present)), present
