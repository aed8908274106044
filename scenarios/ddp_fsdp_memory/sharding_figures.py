"""DDP vs FSDP memory, how the ranks split the work: DTensor shards, collectives, precisions.

`engines.distributed.shards` records, for the measured step of every rank: each FSDP2 parameter's
placement and its global and local rows (`rank_R/dtensor/<parameter>/...`), the
collectives of one step (an extra step after the arm's last) by kind (`rank_R/collectives/<kind>`, counted with
`CommDebugMode`), and the bytes per value of the forward's output, of the parameters the
optimizer updates and of Adam's moments (`rank_R/precision/...`).
"""
import plotly.graph_objects as go

from engines.distributed.launch import COLLECTIVES
from scenarios.ddp_fsdp_memory.summary import arm_values
from scenarios.plotting import category_color, full_width, layout
from scenarios.records import Records

ROLES = {"compute": "compute (the forward's output)", "master": "master weights (what Adam updates)",
         "adam": "Adam's moments"}


def shown_arms(summary: dict) -> list[str]:
    """The measured arms at the largest world size, in order."""
    top = max((a["world_size"] for a in summary["arms"].values()), default=0)
    return [arm for arm, a in summary["arms"].items() if a["world_size"] == top]


def placement(shard_dim: float) -> str:
    return "Replicate()" if shard_dim < 0 else f"Shard(dim={int(shard_dim)})"


def shard_table(values: dict[str, float], rank: int) -> list[tuple[str, float, float, float]]:
    """(parameter, shard_dim, global rows, local rows) of one rank's DTensor parameters, in order."""
    head, rows = f"rank_{rank}/dtensor/", []
    for key in values:
        if key.startswith(head) and key.endswith("/local_rows"):
            name = key[len(head):-len("/local_rows")]
            dim, total = values.get(f"{head}{name}/shard_dim"), values.get(f"{head}{name}/rows")
            if dim is not None and total is not None:
                rows.append((name, dim, total, values[key]))
    return rows


def dtensor_figure(records: Records, summary: dict) -> go.Figure:
    """The first FSDP arm's parameters: the rows each rank keeps (its `to_local()`) of each DTensor."""
    fig = go.Figure()
    arm = next((a for a in shown_arms(summary) if records.has("rank_0/dtensor/", a)), None)
    if arm is not None:
        values, world = arm_values(records, arm), summary["arms"][arm]["world_size"]
        for rank in range(world):
            table = shard_table(values, rank)
            if not table:
                continue
            fig.add_bar(x=[name for name, *_ in table], y=[local for *_, local in table], name=f"rank {rank}",
                        marker_color=category_color(rank),
                        customdata=[[placement(dim), total] for _, dim, total, _ in table],
                        hovertemplate=f"rank {rank}<br>%{{x}}<br>%{{customdata[0]}}: %{{y}} of %{{customdata[1]}} rows"
                                      "<extra></extra>")
        fig.update_layout(barmode="group")
    fig = layout(fig, f"Each rank's local shard of every FSDP2 parameter (a DTensor){f', {arm}' if arm else ''}",
                 "parameter", "rows held on the rank (of the parameter's dim 0)")
    fig.update_xaxes(tickangle=-60)
    return full_width(fig.update_layout(legend_title_text="rank"))


def collectives_figure(records: Records, summary: dict) -> go.Figure:
    """Per arm, the collectives rank 0 issued in one step (an extra step after the arm's last), by kind."""
    fig = go.Figure()
    arms = [arm for arm in shown_arms(summary) if records.has("rank_0/collectives/", arm)]
    for i, kind in enumerate(COLLECTIVES):
        counts = [records.last(arm, f"rank_0/collectives/{kind}") or 0.0 for arm in arms]
        if any(counts):
            fig.add_bar(x=arms, y=counts, name=kind, marker_color=category_color(i),
                        hovertemplate=f"%{{x}}<br>%{{y:.0f}} {kind}<extra></extra>")
    fig.update_layout(barmode="group")
    return layout(fig, "Collectives in one training step (rank 0, counted by CommDebugMode)", "arm",
                  "collectives issued").update_layout(legend_title_text="collective")


def precision_figure(records: Records, summary: dict) -> go.Figure:
    """Per arm: bytes per value of the compute, of the master weights and of Adam's moments."""
    fig = go.Figure()
    arms = [arm for arm in shown_arms(summary) if records.has("rank_0/precision/", arm)]
    for i, (role, label) in enumerate(ROLES.items()):
        sizes = [records.last(arm, f"rank_0/precision/{role}") for arm in arms]
        if any(size is not None for size in sizes):
            fig.add_bar(x=arms, y=sizes, name=label, marker_color=category_color(i),
                        hovertemplate=f"%{{x}}<br>{label}: %{{y:.0f}} bytes per value<extra></extra>")
    fig.update_layout(barmode="group")
    sizes = {size for trace in fig.data for size in trace.y if size is not None}  # alike (all fp32): say what differs
    same = f" (all {sizes.pop():g} here: strategies with fsdp-zero3-bf16 add an arm computing in bf16)" if len(sizes) == 1 else ""
    return layout(fig, "Bytes per value: what the forward computes in, and what the optimizer keeps" + same, "arm",
                  "bytes per value (4: fp32, 2: bf16)").update_layout(legend_title_text="tensor")
