"""Rank 0's memory through one step, mark by mark: reading the records and drawing them.

`engines.distributed.worker` records, for the measured step, the memory at every boundary of the
model, its embedding, each block and its head (forward start/end, backward start/end, in
call order) as `rank_0/timeline/<i>/<category>` with `rank_0/timeline/<i>/where` naming
the mark (an index into `engines.distributed.launch.timeline_labels`). On CUDA it also records
the allocator's event history, thinned, as `rank_0/trace/<i>` (allocated bytes).

At a mark beside a collective the tracked bytes can differ between identical runs by one
gathered buffer (measured: 13,120 bytes, one block's parameters, as "temporaries" at a
block's backward marks): gloo holds it in its own thread until the collective's work is
released, so whether it is freed yet at the mark is a matter of timing.
"""
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engines.distributed.launch import timeline_labels
from scenarios.plotting import full_width, layout
from scenarios.words import MIB

SHORT = {"forward start": "F▸", "forward end": "F◂", "backward start": "B▸", "backward end": "B◂"}


def timeline_of(values: dict[str, float], layers: int) -> pd.DataFrame:
    """One arm's marks: columns mark (0, 1, …), label, category, bytes. Empty without a timeline."""
    labels = timeline_labels(layers)
    rows = []
    for key, value in values.items():
        parts = key.split("/")
        if len(parts) == 4 and parts[:2] == ["rank_0", "timeline"] and parts[3] != "where":
            mark = int(parts[2])
            where = values.get(f"rank_0/timeline/{parts[2]}/where", -1.0)
            known = where == int(where) and 0 <= where < len(labels)  # else a record from other code
            rows.append({"mark": mark, "label": labels[int(where)] if known else f"mark {mark}",
                         "category": parts[3], "bytes": value})
    frame = pd.DataFrame(rows, columns=["mark", "label", "category", "bytes"])
    return frame.sort_values(["mark", "category"], ignore_index=True)


def short_label(label: str) -> str:
    """"blocks.0 forward start" -> "blocks.0 F▸" for the axis; the hover keeps the long one."""
    for long, short in SHORT.items():
        if label.endswith(long):
            return label.removesuffix(long) + short
    return label


def trace_of(values: dict[str, float]) -> list[float]:
    keys = sorted(k for k in values if k.startswith("rank_0/trace/"))
    return [values[k] for k in keys]


def timeline_figure(timelines: dict[str, pd.DataFrame], categories: list[str], colors: dict[str, str]) -> go.Figure:
    """One row per arm: the tracked bytes by category, stacked, at every mark of the step."""
    arms = [arm for arm, t in timelines.items() if not t.empty]
    if not arms:
        fig = go.Figure()
        fig.add_annotation(text="no timeline recorded (switch on 'timeline' and run)", showarrow=False,
                           xref="paper", yref="paper", x=0.5, y=0.5)
        return layout(fig, "Rank 0's memory, block by block through step 1", "mark", "MiB")
    sequences = [tuple(timelines[arm].drop_duplicates("mark")["label"]) for arm in arms]
    same_marks = len(set(sequences)) == 1  # then one axis of marks at the bottom serves every row
    fig = make_subplots(rows=len(arms), cols=1, shared_xaxes=same_marks, vertical_spacing=0.06 if same_marks else 0.16,
                        subplot_titles=arms)
    shown: set[str] = set()
    for row, arm in enumerate(arms, start=1):
        table = timelines[arm]
        marks = table.drop_duplicates("mark")[["mark", "label"]]
        for category in [c for c in categories if c in set(table["category"])]:
            rows = table[table["category"] == category].set_index("mark").reindex(marks["mark"])
            stacked = category not in ("allocated", "reserved")  # CUDA's totals contain the categories: lines
            fig.add_scatter(
                x=marks["mark"], y=rows["bytes"].fillna(0.0) / MIB, name=category, legendgroup=category,
                showlegend=category not in shown, row=row, col=1, customdata=marks["label"],
                mode="lines", stackgroup=arm if stacked else None,
                line=dict(color=colors.get(category, "#333"), width=0.5 if stacked else 2,
                          dash=None if stacked else "dash"),
                hovertemplate=f"{arm}<br>%{{customdata}}<br>{category}: %{{y:.3f}} MiB<extra></extra>")
            shown.add(category)
        if row == len(arms) or not same_marks:
            fig.update_xaxes(tickmode="array", tickvals=marks["mark"], ticktext=[short_label(l) for l in marks["label"]],
                             tickangle=-60, row=row, col=1)
    fig.update_yaxes(matches="y")  # one scale for every arm: the heights compare
    fig = layout(fig, "Rank 0's memory, block by block through step 1 (F▸/F◂: forward start/end, B▸/B◂: backward)",
                 "", "MiB")
    fig.update_xaxes(title_text="marks of the measured step, in call order", row=len(arms), col=1)
    fig.update_layout(legend_title_text="category", hovermode="x unified",
                      height=max(420, (230 if same_marks else 330) * len(arms) + 120))
    return full_width(fig)


def trace_figure(traces: dict[str, list[float]], colors: dict[str, str]) -> go.Figure:
    """CUDA only: allocated bytes after each allocator event of the measured step."""
    fig = go.Figure()
    for arm, levels in traces.items():
        fig.add_scatter(y=[v / MIB for v in levels], name=arm, mode="lines", line=dict(color=colors[arm]),
                        hovertemplate=f"{arm}<br>event %{{x}}<br>%{{y:.2f}} MiB allocated<extra></extra>")
    return layout(fig, "CUDA allocator through the measured step (from torch.cuda.memory._snapshot)",
                  "allocator event (thinned)", "allocated (MiB)")
