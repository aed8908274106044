"""Drawing a stored run into the current figures so that it can never pass for the current run.

A stored run is drawn by the scenario's own `figures` from its own records and config; its
traces are then copied into the current figure of the same name:
- colour: the arm's own colour (colours belong to arm identities, scenarios/plotting.py), so
  "relu" is the same blue in both runs; only when an arm of the other run would take a
  colour that another arm of this figure holds does it get a free one;
- style: every copied trace is lighter; lines are broken in a way of their own (`NEXT_DASH`), markers the
  open version of their symbol, bars a hatched fill with an outline;
- name: "<trace> [what differs]", and the legend groups the traces by run (this run first);
- axes: an axis the other run's figure drew on a log scale is log here too (when every value
  on it is positive), and a fixed range grows to hold the copied traces.
Heatmaps, and bars stacked on one another, are not copied: two runs' cells, or two runs'
bars in one stack, would read as one run.
"""
import math
import numbers
import zlib

import numpy as np
import plotly.graph_objects as go

from scenarios.plotting import HASHED_SLOTS, palette_color

OVERLAY_OPACITY = 0.6
# A copied line is broken in its own way, never into another line style of the figure: a scenario's
# solid, dashed and dotted lines carry meaning ("train dashed, validation solid"), so a copied solid
# line is long dashes with short gaps (not "dash"), a dashed one longer dashes, a dotted one sparser dots.
NEXT_DASH = {None: "12px,3px", "solid": "12px,3px", "dash": "longdash", "dot": "2px,7px", "dashdot": "longdashdot",
             "longdash": "longdashdot", "longdashdot": "longdash"}
THIS_RUN = "this run"
COPIED = ("scatter", "scattergl", "bar")


def arm_of(name: str, arms: list[str]) -> str | None:
    """The arm a trace belongs to: its name is the arm, or starts with the arm and a space."""
    return next((a for a in sorted(arms, key=len, reverse=True) if name == a or name.startswith(a + " ")), None)


def trace_color(trace) -> str | None:
    line = getattr(trace, "line", None)
    color = line.color if line is not None else None
    marker = getattr(trace, "marker", None)
    if not isinstance(color, str) and marker is not None and isinstance(marker.color, str):
        color = marker.color
    return color if isinstance(color, str) else None


def merge_traces(figure: go.Figure, own: go.Figure, tag_label: str, run_id: str, arms: list[str],
                 current_arms: list[str]) -> bool:
    """Copy the traces of `own` (the stored run's figure) into `figure`, drawn as an overlay.
    True if any was copied."""
    tag = f" [{tag_label}]"
    layout_keys = set(figure.layout.to_plotly_json())
    stacked = figure.layout.barmode in ("stack", "relative")
    held = _held_colors(figure, current_arms)
    shared = _held_colors(own, arms)  # colours the scenario itself gives several arms (DPO keys them by β)
    group, copied = f"run {run_id}", []
    for trace in own.data:
        if trace.type not in COPIED or trace.hoverinfo == "skip" or (trace.type == "bar" and stacked):
            continue
        axes = [(trace.xaxis or "x").replace("x", "xaxis", 1), (trace.yaxis or "y").replace("y", "yaxis", 1)]
        if any(axis not in ("xaxis", "yaxis") and axis not in layout_keys for axis in axes):
            continue  # the current figure has no such subplot
        name = str(trace.name) if trace.name is not None else ""
        clone = type(trace)(trace)
        clone.name = name + tag if name else f"[{tag_label}]"
        clone.legendgroup = group
        clone.legendgrouptitle = None if copied else dict(text=f"[{tag_label}] · run {run_id}")
        arm = arm_of(name, arms)
        color = trace_color(clone)
        if arm is not None and color is not None and not held.get(color, {arm}) <= shared.get(color, set()) | {arm}:
            _recolor(clone, _free_color(arm, held))
        if arm is not None:
            held.setdefault(trace_color(clone) or "", set()).add(arm)
        if clone.hovertemplate:
            clone.hovertemplate = clone.hovertemplate.replace("<extra>", f"<br>[{tag_label}]<extra>", 1)
        style_overlay(clone)
        figure.add_trace(clone)
        copied.append(clone)
    if copied:
        include_axes(figure, own, copied)
    return bool(copied)


def style_overlay(trace) -> None:
    """Lighter, a broken line of its own, open markers, hatched bars: what a copied trace looks like."""
    trace.opacity = (trace.opacity if trace.opacity is not None else 1.0) * OVERLAY_OPACITY
    color = trace_color(trace)
    if trace.type == "bar":
        trace.marker.line = dict(color=color or "gray", width=2)
        trace.marker.pattern = dict(shape="/", fgcolor=color or "gray", solidity=0.3)
        trace.marker.color = "rgba(255,255,255,0)"
        return
    if trace.stackgroup:  # a stacked area: the other run's stack as its own outlines, not piled on ours
        trace.stackgroup, trace.fill = f"{trace.stackgroup} [{trace.name}]", "none"
        trace.line.width = 1.5
    mode = trace.mode or "lines+markers"
    if "lines" in mode:
        trace.line.dash = NEXT_DASH.get(trace.line.dash, NEXT_DASH[None])
    if "markers" in mode:
        symbol = trace.marker.symbol
        trace.marker.symbol = ([open_symbol(s) for s in symbol] if isinstance(symbol, (list, tuple))
                               else open_symbol(symbol))


def open_symbol(symbol) -> str:
    """The hollow form of a marker symbol ('circle' -> 'circle-open'); a hollow one becomes another."""
    name = str(symbol) if symbol is not None else "circle"
    if name.isdigit():
        name = "circle"
    return "x-thin-open" if "open" in name else name + "-open"


def group_current(figure: go.Figure) -> None:
    """The current run's traces in one legend group, titled, ahead of the overlays' groups."""
    first = True
    for trace in figure.data:
        if trace.legendgroup and trace.legendgroup.startswith("run "):
            continue
        trace.legendgroup = THIS_RUN
        if first and trace.showlegend is not False:
            trace.legendgrouptitle = dict(text=THIS_RUN)
            first = False
    figure.update_layout(legend=dict(groupclick="toggleitem", tracegroupgap=6))


def include_axes(figure: go.Figure, own: go.Figure, copied: list) -> None:
    """Axis decisions that consider the copied traces: log where the other run's figure chose log,
    fixed ranges widened to hold them."""
    theirs_keys = set(own.layout.to_plotly_json())
    for key in [k for k in figure.layout if k[:5] in ("xaxis", "yaxis")]:
        mine, theirs = figure.layout[key], own.layout[key] if key in theirs_keys else None
        letter, ref = key[0], key[0] + key[5:]
        values = _values(figure.data, letter, ref)
        if theirs is not None and theirs.type == "log" and mine.type in (None, "-", "linear") and values \
                and min(values) > 0:
            mine.type = "log"
            if mine.title.text and "log scale" not in mine.title.text:
                mine.title.text += " (log scale)"
            mine.range = None
        if mine.range is not None and mine.autorange is not True:
            added = _values(copied, letter, ref)
            if mine.type == "log":
                added = [math.log10(v) for v in added if v > 0]
            if added and all(_is_number(v) for v in mine.range):
                mine.range = [min(mine.range[0], min(added)), max(mine.range[1], max(added))]


def _values(traces, letter: str, ref: str) -> list[float]:
    found = []
    for trace in traces:
        if (getattr(trace, letter + "axis", None) or letter) != ref or trace.type not in COPIED:
            continue
        data = getattr(trace, letter, None)
        if data is not None:
            found += [float(v) for v in data if _is_number(v) and math.isfinite(v)]
    return found


def _held_colors(figure: go.Figure, arms: list[str]) -> dict[str, set[str]]:
    """colour -> the arm identities drawn in it in `figure`."""
    held: dict[str, set[str]] = {}
    for trace in figure.data:
        arm, color = arm_of(str(trace.name or ""), arms), trace_color(trace)
        if arm is not None and color is not None:
            held.setdefault(color, set()).add(arm)
    return held


def _free_color(label: str, held: dict[str, str]) -> str:
    slot = HASHED_SLOTS + zlib.crc32(label.encode()) % HASHED_SLOTS  # past the hashed labels' colours
    while palette_color(slot) in held:
        slot += 1
    return palette_color(slot)


def _recolor(trace, color: str) -> None:
    if getattr(trace, "line", None) is not None:
        trace.line.color = color
    if getattr(trace, "marker", None) is not None and isinstance(trace.marker.color, str):
        trace.marker.color = color


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
