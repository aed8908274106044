"""Collectives, read and drawn: bytes per rank against the ring formula, time per call against
size with its fitted latency and bandwidth, every result against the single-process answer, a
DTensor's shards through its redistributions, and the collectives of a DDP and an FSDP step.

Records (each rank reports its own; rank 0 also the shared ones): per op arm and size index,
`size_bytes`, `ring_bytes` (the ring algorithm's bytes per rank) and per rank `rank_R/sent_bytes`,
`/received_bytes`, `/seconds`, `/max_abs_error`, `/collectives/<kind>`; the "DTensor" arm per
transition; the "DDP" and "FSDP" arms per training step (`rank_R/forward/collectives/<kind>`, ...).
"""
import re

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.collectives.launch import OPS, STRATEGIES, TRANSITIONS, UNIVERSE
from scenarios.plotting import arm_colors, category_color, full_width, layout, legend_line
from scenarios.records import Records
from scenarios.words import MIB

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "broadcast", "scatter", "all-to-all")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross")  # one per op of OPS
OWNER_GREY = "#bdbdbd"  # a DTensor's element that every rank holds (replicated)


# --- readers (figures and claims share them) ------------------------------------------------
def ranks(records: Records, arm: str) -> list[int]:
    found = {int(m.group(1)) for name in records.metrics(arm) if (m := re.match(r"rank_(\d+)/", name))}
    return sorted(found)


def world(records: Records) -> int | None:
    sizes = [len(ranks(records, arm)) for arm in records.arms()]
    return max(sizes) if sizes else None


def per_rank(records: Records, arm: str, name: str, step: int) -> list[float]:
    values = [records.at(arm, f"rank_{r}/{name}", step) for r in ranks(records, arm)]
    return [v for v in values if v is not None]


def mean_sent_over_ring(records: Records, op: str, step: int | None = None) -> float | None:
    """Bytes sent per rank (mean over ranks) ÷ the ring algorithm's, at `step` (default: the last size)."""
    step = records.last_step(op, "size_bytes") if step is None else step
    ring = records.at(op, "ring_bytes", step) if step is not None else None
    sent = per_rank(records, op, "sent_bytes", step) if step is not None else []
    return float(np.mean(sent)) / ring if sent and ring else None


def seconds(records: Records, op: str) -> tuple[np.ndarray, np.ndarray]:
    """(S in bytes, the slowest rank's median seconds per call) over the sizes measured."""
    sizes = records.series(op, "size_bytes")
    times = [max(per_rank(records, op, "seconds", int(step)), default=np.nan) for step in sizes.index]
    keep = ~np.isnan(times)
    return sizes.to_numpy()[keep], np.array(times)[keep]


def fit(records: Records, op: str) -> tuple[float, float] | None:
    """Least-squares t = α + S/B over the sizes, with α ≥ 0: (α seconds, B bytes per second); None below
    two sizes or when the slope is not positive. Where the free fit's α comes out negative (small sizes'
    timings are noise on a loaded machine), the least squares under α ≥ 0 is the line through the
    origin: α is exactly 0, never a negative latency."""
    sizes, times = seconds(records, op)
    if len(sizes) < 2:
        return None
    slope, alpha = np.polyfit(sizes, times, 1)
    if alpha < 0:
        slope, alpha = float(np.dot(sizes, times) / np.dot(sizes, sizes)), 0.0
    return (float(alpha), float(1 / slope)) if slope > 0 else None


def fit_label(fitted: tuple[float, float]) -> str:
    alpha, bandwidth = fitted
    latency = f"α {alpha * 1e3:.2f} ms" if alpha > 0 else "α held at 0 (fitted below it)"
    return f"{latency}, B {bandwidth / 1e9:.2f} GB/s"


def max_error(records: Records) -> tuple[float, int] | None:
    """The largest |result − single-process answer| over every op, size and rank, and how many results."""
    errors = [v for op in OPS for name in records.metrics(op) if name.endswith("/max_abs_error")
              for v in records.values(op, name)]
    return (float(max(errors)), len(errors)) if errors else None


def count(records: Records, arm: str, name: str, step: int | None = None) -> float | None:
    """Rank 0's count of collectives `name` (e.g. "forward/collectives/all-gather") at `step` (default last)."""
    metric = f"rank_0/{name}"
    step = records.last_step(arm, metric) if step is None else step
    return None if step is None else records.at(arm, metric, step)


# --- figures -------------------------------------------------------------------------------------
def op_colors(present: list[str]) -> dict[str, str]:
    return arm_colors(present, UNIVERSE)


def bytes_figure(records: Records) -> go.Figure:
    """Per op, the bytes each rank sent ÷ S (mean over ranks) against S, and the ring's 2(N−1)/N and (N−1)/N."""
    fig, present = go.Figure(), [op for op in OPS if records.has("size_bytes", op)]
    colors, n = op_colors(present), world(records)
    for op in present:
        sizes = records.series(op, "size_bytes")
        ratios = [np.mean(per_rank(records, op, "sent_bytes", int(s))) / size if per_rank(records, op, "sent_bytes", int(s))
                  else None for s, size in sizes.items()]
        fig.add_scatter(x=sizes.to_numpy(), y=ratios, mode="lines+markers", name=op,  # they overlap: tell them apart
                        line=dict(color=colors[op], dash="dot" if "by hand" in op else "solid"),
                        marker=dict(symbol=SYMBOLS[OPS.index(op)], size=9),
                        hovertemplate=f"{op}<br>S %{{x:.3s}}B<br>sent per rank %{{y:.3f}}·S<extra></extra>")
    if n:  # named in the legend: a label on the line sat under the markers on it, or above the plot's top edge
        sizes = sorted({x for trace in fig.data for x in trace.x})
        for factor, name, dash in ((2 * (n - 1) / n, f"ring all-reduce 2(N−1)/N = {2 * (n - 1) / n:.3g}", "dash"),
                                   ((n - 1) / n, f"ring all-gather / reduce-scatter (N−1)/N = {(n - 1) / n:.3g}", "dot")):
            if len(sizes) > 1:
                legend_line(fig, factor, name, dash=dash)
            elif sizes:  # one size: a line from S to S draws nothing, so a level mark on the points
                fig.add_scatter(x=sizes, y=[factor], mode="markers", name=name, hovertemplate=f"{name}<extra></extra>",
                                marker=dict(symbol="line-ew-open", size=36, color="gray", line=dict(width=2)))
    fig.update_xaxes(type="log", exponentformat="SI")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return layout(fig, f"Bytes sent per rank ÷ S, and the ring formula{f' (N={n})' if n else ''}",
                  "tensor size S (bytes, log scale)", "bytes sent per rank ÷ S (mean over ranks)")


def mib(value: float | None) -> float | None:
    """Bytes in MiB, the unit the sentences use."""
    return None if value is None else value / MIB


def bytes_by_rank_figure(records: Records) -> go.Figure:
    """At the largest size, every rank's sent and received bytes per op, with the ring formula (—)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["sent", "received"], shared_yaxes=True)
    present = [op for op in OPS if records.has("size_bytes", op)]
    steps = {op: records.last_step(op, "size_bytes") for op in present}
    for r in sorted({r for op in present for r in ranks(records, op)}):
        for col, name in ((1, "sent_bytes"), (2, "received_bytes")):
            fig.add_bar(x=present, y=[mib(records.at(op, f"rank_{r}/{name}", steps[op])) for op in present], name=f"rank {r}",
                        marker_color=category_color(r), legendgroup=str(r), showlegend=col == 1, row=1, col=col,
                        hovertemplate=f"%{{x}}<br>rank {r} {name.split('_')[0]} %{{y:.4g}} MiB<extra></extra>")
    ring = [(op, value) for op in present if (value := records.at(op, "ring_bytes", steps[op])) is not None]
    for col in (1, 2):
        if ring:
            fig.add_scatter(x=[op for op, _ in ring], y=[mib(v) for _, v in ring], mode="markers", name="ring formula",
                            marker=dict(symbol="line-ew-open", size=36, color="black", line=dict(width=3)),
                            legendgroup="ring", showlegend=col == 1, row=1, col=col,
                            hovertemplate="%{x}<br>ring formula %{y:.4g} MiB<extra></extra>")
    fig.update_layout(barmode="group", title="Bytes per rank at the largest size; the ring formula (—)",
                      margin=dict(l=60, r=20, t=70, b=50), legend_title_text="rank")
    fig.update_yaxes(title_text="MiB (2²⁰ bytes)", row=1, col=1)
    fig.update_xaxes(title_text="collective")
    return full_width(fig)


def time_figure(records: Records) -> go.Figure:
    """Seconds per call (the slowest rank's median) against S, log-log, with the fitted α + S/B (dashed)."""
    fig, present = go.Figure(), [op for op in OPS if records.has("size_bytes", op)]
    colors = op_colors(present)
    for op in present:
        sizes, times = seconds(records, op)
        fitted = fit(records, op)
        label = op + (f": {fit_label(fitted)}" if fitted else "")
        fig.add_scatter(x=sizes, y=times, mode="markers", name=label, marker=dict(color=colors[op], size=8),
                        legendgroup=op, hovertemplate=f"{op}<br>S %{{x:.3s}}B<br>%{{y:.3s}}s per call<extra></extra>")
        if fitted:
            grid = np.geomspace(sizes.min(), sizes.max(), 30)
            fig.add_scatter(x=grid, y=fitted[0] + grid / fitted[1], mode="lines", line=dict(color=colors[op], dash="dash"),
                            legendgroup=op, showlegend=False, hoverinfo="skip")
    fig.update_xaxes(type="log", exponentformat="SI")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return layout(fig, "Time per call: α + S/B fitted (dashed)",
                  "tensor size S (bytes, log scale)", "seconds per call (slowest rank's median)", log_y=True)


def correctness_figure(records: Records) -> go.Figure:
    """|result − single-process answer|, the largest over the ranks, op × size."""
    fig, present = go.Figure(), [op for op in OPS if records.has("size_bytes", op)]
    if present:
        steps = sorted({int(s) for op in present for s in records.series(op, "size_bytes").index})
        sizes = [next((records.at(op, "size_bytes", s) for op in present if records.at(op, "size_bytes", s)), None)
                 for s in steps]
        z = [[max(per_rank(records, op, "max_abs_error", s), default=None) for s in steps] for op in present]
        fig.add_heatmap(x=[f"{size / 1024:,.0f} KiB" for size in sizes], y=present, z=z, zmin=0, zmax=1,
                        colorscale=[[0, "#e5f5e0"], [1e-9, "#fcbba1"], [1, "#de2d26"]],  # exact: pale green
                        text=[[("—" if v is None else f"{v:g}") for v in row] for row in z],
                        texttemplate="%{text}", showscale=False,
                        hovertemplate="%{y}<br>S %{x}<br>max |error| %{text}<extra></extra>")
    fig = layout(fig, "|result − single-process answer|, the largest over the ranks (integer-valued inputs: exact sums)",
                 "tensor size S", "collective")
    return full_width(fig.update_yaxes(type="category", autorange="reversed"))


def dtensor_figure(records: Records) -> go.Figure:
    """Per transition, the (rows × cols) tensor coloured by which rank holds each element."""
    fig = make_subplots(rows=1, cols=len(TRANSITIONS), horizontal_spacing=0.04,
                        subplot_titles=[transition_title(records, i) for i in range(len(TRANSITIONS))])
    shape = (records.first("DTensor", "rows"), records.first("DTensor", "cols"))
    held: set[int] = set()
    for index in range(len(TRANSITIONS)):
        owners = owner_grid(records, index, shape)
        if owners is None:
            continue
        held |= {r for row in owners for r in row}
        fig.add_heatmap(z=owners, colorscale=rank_scale(len(ranks(records, "DTensor"))), zmin=-1,
                        zmax=max(0, len(ranks(records, "DTensor")) - 1), showscale=False, xgap=1, ygap=1, row=1, col=index + 1,
                        hovertemplate="row %{y}, column %{x}<br>held by rank %{z} (−1: every rank)<extra></extra>")
        fig.update_yaxes(autorange="reversed", row=1, col=index + 1)
    # a heatmap has no legend of its own: one square per colour on the panels, named by the rank it stands for
    for r in sorted(held, key=lambda r: (r < 0, r)):
        fig.add_scatter(x=[None], y=[None], mode="markers", name="every rank (replicated)" if r < 0 else f"rank {r}",
                        marker=dict(symbol="square", size=14, color=OWNER_GREY if r < 0 else category_color(r)),
                        hoverinfo="skip", row=1, col=1)
    fig.update_xaxes(title_text="column")
    fig.update_yaxes(title_text="row", row=1, col=1)
    fig.update_layout(title="A DTensor's placement: which rank holds each element", margin=dict(l=40, r=20, t=90, b=80),
                      legend=dict(title_text="held by", orientation="h", yanchor="top", y=-0.15, x=0))
    return full_width(fig)


def transition_title(records: Records, index: int) -> str:
    issued = [f"{v:.0f} {k}" for k in KINDS if (v := count(records, "DTensor", f"collectives/{k}", index))]
    sent = records.at("DTensor", "rank_0/sent_bytes", index)
    tail = (", ".join(issued) or "no collective") + (f", {sent:.0f} B sent by rank 0" if sent is not None else "")
    return f"{TRANSITIONS[index]}<br><sup>{tail}</sup>"


def owner_grid(records: Records, index: int, shape) -> list[list[int]] | None:
    dim = records.at("DTensor", "shard_dim", index)
    if dim is None or None in shape:
        return None
    rows, cols = int(shape[0]), int(shape[1])
    grid = [[-1] * cols for _ in range(rows)]
    if dim < 0:
        return grid
    start = 0
    for r in ranks(records, "DTensor"):
        held = records.at("DTensor", f"rank_{r}/local_{'rows' if dim == 0 else 'cols'}", index) or 0
        for k in range(start, start + int(held)):
            for other in range(cols if dim == 0 else rows):
                grid[k if dim == 0 else other][other if dim == 0 else k] = r
        start += int(held)
    return grid


def rank_scale(n: int) -> list[list]:
    colors = [OWNER_GREY] + [category_color(r) for r in range(max(n, 1))]
    stops = np.linspace(0, 1, len(colors) + 1)
    return [[float(s), c] for i, c in enumerate(colors) for s in (stops[i], stops[i + 1])]


def training_figure(records: Records) -> go.Figure:
    """Rank 0's collectives per training step, forward and backward + optimizer step, DDP and FSDP."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=list(STRATEGIES), shared_yaxes=True)
    for col, strategy in enumerate(STRATEGIES, start=1):
        steps = sorted(int(s) for s in records.series(strategy, "units").index)
        labels = [f"step {s} {phase}" for s in steps for phase in ("forward", "backward + update")]
        for i, kind in enumerate(KINDS[:4]):
            counts = [count(records, strategy, f"{phase}/collectives/{kind}", s) or 0.0
                      for s in steps for phase in ("forward", "backward")]
            fig.add_bar(x=labels, y=counts, name=kind, marker_color=category_color(i), legendgroup=kind,
                        showlegend=col == 1, row=1, col=col,
                        hovertemplate=f"{strategy}<br>%{{x}}<br>%{{y:.0f}} {kind}<extra></extra>")
    fig.update_layout(barmode="group", title="Collectives per training step (rank 0, CommDebugMode): DDP and FSDP",
                      margin=dict(l=60, r=20, t=70, b=50), legend_title_text="collective")
    fig.update_yaxes(title_text="collectives issued", row=1, col=1)
    fig.update_xaxes(title_text="training step and phase")
    return full_width(fig)
