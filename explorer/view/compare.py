"""Comparing runs: overlay stored runs on the current figures, and isolate one setting's effect.

Overlay needs nothing from a scenario: a stored run is drawn by the scenario's own `figures`
from its own records and config, and its traces are copied into the current figure of the
same name, renamed `"<trace> [<what differs>]"` and drawn as an overlay (explorer/view/overlay.py).
The isolation view takes the stored runs that differ from the current config in one field
only and plots a metric's final value (last logged step, per arm) against that field.
"""
from dataclasses import dataclass
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from scenarios.base import Scenario
from scenarios.plotting import arm_colors, layout

MAX_LABEL_CHARS = 48
MAX_LISTED_TICKS = 8  # an integer setting's measured values as its ticks, up to this many


def field_label(name: str, spec: dict[str, Any] | None = None) -> str:
    """A Config field as the page names it (the sidebar's label): its `title` where it has one
    (`sram_kib` -> "SRAM (KiB)"), else its name in words (`sequence_steps` -> "sequence steps")."""
    return (spec or {}).get("title") or name.replace("_", " ")


@dataclass(frozen=True)
class Overlay:
    run_id: str
    label: str               # what differs from the current config, e.g. "depth=30"
    frame: pd.DataFrame
    config: dict[str, Any]


def differences(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """The fields where `other` differs from `base`, with other's values, in `base`'s field order."""
    names = list(base) + [name for name in other if name not in base]
    return {name: other.get(name) for name in names if base.get(name) != other.get(name)}


def short_label(diff: dict[str, Any], run_id: str) -> str:
    """'depth=30, activation=relu', shortened when long; 'run <id>' when nothing differs."""
    if not diff:
        return f"run {run_id}"
    parts = [f"{name}={value}" for name, value in diff.items()]
    label = ", ".join(parts)
    while len(label) > MAX_LABEL_CHARS and len(parts) > 1:
        parts.pop()
        label = ", ".join(parts) + f" +{len(diff) - len(parts)} more"
    return label


def overlay_frame(frame: pd.DataFrame, overlays: list[Overlay]) -> pd.DataFrame:
    """The current rows with each overlay's rows appended, arms renamed `arm [label]` (metrics.csv)."""
    parts = [frame] + [o.frame.assign(arm=o.frame["arm"].astype(str) + f" [{o.label}]") for o in overlays]
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else frame


def shows(figure: go.Figure, overlay: Overlay) -> bool:
    """Whether a figure drew the overlay's renamed arms (in a trace name or a subplot title)."""
    tag = f"[{overlay.label}]"
    return any(tag in str(t.name) for t in figure.data) or any(tag in str(a.text) for a in figure.layout.annotations)


def final_values(frame: pd.DataFrame, metric: str) -> dict[str, float]:
    """Per arm, the metric's value at its last logged step."""
    rows = frame[frame["metric"] == metric].sort_values("step", kind="stable")
    return {str(arm): float(group["value"].iloc[-1]) for arm, group in rows.groupby("arm", sort=False)}


def isolation_table(config: dict[str, Any], runs: list[tuple[str, dict[str, Any], pd.DataFrame]],
                    field: str, metric: str) -> pd.DataFrame:
    """Rows (value, arm, final, run_id) for the runs that differ from `config` only in `field`.

    `runs` is newest first; for each value of the field the newest run counts.
    """
    rows, seen = [], set()
    for run_id, other, frame in runs:
        diff = differences(config, other)
        if set(diff) - {field} or other.get(field) in seen:
            continue
        seen.add(other.get(field))
        for arm, value in final_values(frame, metric).items():
            rows.append({"value": other.get(field), "arm": arm, "final": value, "run_id": run_id})
    return pd.DataFrame(rows, columns=["value", "arm", "final", "run_id"])


def isolation_figure(scenario: Scenario, table: pd.DataFrame, field: str, metric: str,
                     arm_order: list[str]) -> go.Figure:
    """The metric's final value against the field, one line per arm, in the arms' own colors."""
    spec = scenario.field_specs()[field]
    label = field_label(field, spec)
    arms = arm_order + [a for a in table["arm"].unique() if a not in arm_order]
    colors = arm_colors(arms, scenario.arm_universe())
    numeric = spec["kind"] in ("int", "float")
    order = spec["choices"] if spec["kind"] == "choice" else [False, True] if spec["kind"] == "bool" else None
    fig = go.Figure()
    for arm, rows in table.groupby("arm", sort=False):
        if numeric:
            rows = rows.sort_values("value")
        elif order is not None:
            rows = rows.assign(_at=rows["value"].map(order.index)).sort_values("_at")
        fig.add_scatter(x=[str(v) if not numeric else v for v in rows["value"]], y=rows["final"], name=arm,
                        mode="lines+markers", line=dict(color=colors.get(arm)), customdata=rows["run_id"],
                        hovertemplate=f"{arm}<br>{label} %{{x}}<br>final {metric} %{{y:.4g}}"
                                      "<br>run %{customdata}<extra></extra>")
    values = table["final"]
    log_y = bool(len(values) and (values > 0).all() and values.max() / values.min() > 100)
    layout(fig, f"Final {metric} against {label}", label + (" (log scale)" if spec.get("scale") == "log" else ""),
           f"{metric} at the last logged step" + (" (log scale)" if log_y else ""), log_y=log_y)
    if spec.get("scale") == "log":
        fig.update_xaxes(type="log")
    elif order is not None:
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=[str(v) for v in order])
    elif spec["kind"] == "int":  # a setting of whole numbers is labelled at whole numbers, never 80.5
        measured = sorted({int(v) for v in table["value"]})
        fig.update_xaxes(**({"tickvals": measured} if len(measured) <= MAX_LISTED_TICKS else {"tickformat": "d"}))
    return fig
