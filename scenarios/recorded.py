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


def snapshot(records: Records, arm: str, prefix: str, step: int | None = None) -> tuple[int | None, dict[str, float]]:
    """Every metric of `arm` under `prefix` at `step` (default: the latest step that has any): one
    filter of the frame instead of a lookup per value (maps and point clouds have hundreds)."""
    frame = records.frame
    if frame.empty:
        return None, {}
    rows = frame[(frame["arm"] == arm) & frame["metric"].str.startswith(prefix)]
    if rows.empty:
        return None, {}
    step = int(rows["step"].max()) if step is None else step
    at = rows[rows["step"] == step]
    return step, dict(zip(at["metric"], at["value"].astype(float)))
