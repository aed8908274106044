"""DDP vs FSDP memory, drawn: the measured bars beside the model, memory against world size
and through a step, and the what-if panel (the analytic model at the sizes the view asks for).

Every figure reads the frame through `Records` and the run's `summary`; arms keep their
colours (`arm_colors` over the scenario's arm universe), memory categories and ZeRO stages
take category colours, which no arm uses.
"""
import numpy as np
import plotly.graph_objects as go

from engines.distributed.memory_model import GB, PRECISIONS, model_states
from scenarios.ddp_fsdp_memory.summary import ALLOCATOR, CATEGORIES, arm_values, within
from scenarios.ddp_fsdp_memory.timeline import timeline_figure, timeline_of
from scenarios.plotting import category_color, full_width, layout
from scenarios.records import Records
from scenarios.words import MIB

CATEGORY_COLORS = {c: category_color(i) for i, c in enumerate(CATEGORIES + ALLOCATOR)}
PHASES = ["after forward", "after backward", "after optimizer step", "peak"]
STAGES = (("ddp", "DDP"), ("zero1", "ZeRO-1"), ("zero2", "ZeRO-2"), ("zero3", "ZeRO-3 / FSDP"))
PRECISION_WORDS = {"mixed (bf16 + fp32 Adam)": "mixed precision: bf16 weights and grads, fp32 Adam", "fp32 Adam": "fp32 weights, grads and Adam"}


def top_world(summary: dict) -> int:
    return max((a["world_size"] for a in summary["arms"].values()), default=0)


def memory_timeline_figure(records: Records, summary: dict) -> go.Figure:
    top = top_world(summary)
    timelines = {}
    for arm, a in summary["arms"].items():
        if a["world_size"] == top:
            values = arm_values(records, arm)
            timelines[arm] = timeline_of(values, int(values.get("rank_0/shape/layers", 0)))
    return timeline_figure(timelines, CATEGORIES + ALLOCATOR, CATEGORY_COLORS)


def bars_figure(records: Records, summary: dict) -> go.Figure:
    top = top_world(summary)
    labels, stacks, allocated = [], {c: [] for c in CATEGORIES}, []
    for arm, a in summary["arms"].items():
        if a["world_size"] != top:
            continue
        values = arm_values(records, arm)
        for rank in range(top):
            labels.append(f"{a['strategy']}<br>rank {rank}")
            for c in CATEGORIES:
                stacks[c].append(values.get(f"rank_{rank}/peak/{c}", 0.0) / MIB)
            if (total := values.get(f"rank_{rank}/peak/allocated")) is not None:  # CUDA only
                allocated.append((labels[-1], total / MIB))
        labels.append(f"{a['strategy']}<br>model")
        modelled = {**a["estimated"], "activations": a["estimated_activation_bytes"] or 0.0,
                    "unsharded parameters": a["estimated_unsharded_bytes"],
                    "communication buffers": a["estimated_bucket_bytes"]}
        for c in CATEGORIES:
            stacks[c].append(modelled.get(c, 0.0) / MIB)
    fig = go.Figure()
    for c in (c for c in CATEGORIES if any(stacks[c])):
        fig.add_bar(x=labels, y=stacks[c], name=c, marker_color=CATEGORY_COLORS[c],
                    hovertemplate=f"{c}<br>%{{x}}<br>%{{y:.3f}} MiB<extra></extra>")
    if allocated:  # the allocator's peak beside the tracked one: blocks, caches and what no tracker files
        fig.add_scatter(x=[x for x, _ in allocated], y=[y for _, y in allocated], mode="markers", name="CUDA allocated",
                        marker=dict(symbol="line-ew-open", size=28, color=CATEGORY_COLORS["allocated"], line=dict(width=3)),
                        hovertemplate="CUDA allocator, peak<br>%{x}<br>%{y:.3f} MiB<extra></extra>")
    fig.update_layout(barmode="stack")
    fig = layout(fig, f"Peak memory per rank by category, N={top}: measured, and the model beside it",
                 "each rank's measured peak; model = ZeRO model states + activations + gathered parameters "
                 "(+ DDP's buckets)", "MiB")
    return full_width(fig.update_layout(legend_title_text="category"))


def vs_world_figure(summary: dict, colors: dict[str, str]) -> go.Figure:
    """Per strategy, in the colour of its largest-N arm: measured model state against N, and the model (grey ◇)."""
    fig = go.Figure()
    by_strategy: dict[str, list] = {}
    for arm, a in summary["arms"].items():
        by_strategy.setdefault(a["strategy"], []).append((arm, a))
    for wider, (strategy, pairs) in zip(range(len(by_strategy) - 1, -1, -1), by_strategy.items()):
        items = [a for _, a in sorted(pairs, key=lambda pair: pair[1]["world_size"])]
        n, largest = [a["world_size"] for a in items], max(pairs, key=lambda pair: pair[1]["world_size"])[0]
        # FSDP's stages hold the same state between steps: earlier strategies wider, so a line on another shows both
        fig.add_scatter(x=n, y=[a["measured_state_bytes"] / MIB for a in items], name=f"{strategy} measured",
                        mode="lines+markers", line=dict(color=colors.get(largest), width=1.5 + 3 * wider),
                        marker=dict(size=6 + 3 * wider), hovertemplate=f"{strategy}<br>N=%{{x}}<br>%{{y:.3f}} MiB<extra></extra>")
        # grey rings: a dashed line in the strategy's colour vanished into the measured line it matches
        fig.add_scatter(x=n, y=[a["estimated_state_bytes"] / MIB for a in items], name="model (ZeRO's formula)",
                        mode="markers", legendgroup="model", showlegend=wider == 0, legendrank=1001,  # last
                        marker=dict(symbol="diamond-open", size=20, color="dimgray", line_width=2),
                        hovertemplate=f"{strategy}, model<br>N=%{{x}}<br>%{{y:.3f}} MiB<extra></extra>")
    fig.update_xaxes(dtick=1)
    return layout(fig, "Model state per rank vs world size (◇: the model)", "world size N (ranks)",
                  "params + grads + Adam on rank 0 (MiB)")


def phases_figure(records: Records, summary: dict, colors: dict[str, str]) -> go.Figure:
    """Rank 0's tracked bytes per phase. DDP holds the same on every N and FSDP's stages meet after backward, so
    the largest N is solid beneath (earlier strategies wider), smaller N thin on top, a dash per strategy."""
    fig = go.Figure()
    top, order = top_world(summary), list(summary["arms"])
    strategies = list(dict.fromkeys(a["strategy"] for a in summary["arms"].values()))
    for arm in sorted(order, key=lambda arm: -summary["arms"][arm]["world_size"]):  # stable: keeps strategy order
        values, a = arm_values(records, arm), summary["arms"][arm]
        i, smaller = strategies.index(a["strategy"]), a["world_size"] < top
        totals = [sum(values.get(f"rank_0/{p}/{c}", 0.0) for c in CATEGORIES) / MIB for p in PHASES]
        line = dict(width=2, dash=("dash", "dot", "dashdot", "longdash")[i % 4]) if smaller else dict(width=max(2, 7 - 2.5 * i))
        fig.add_scatter(x=PHASES, y=totals, name=arm, mode="lines+markers", legendrank=order.index(arm),
                        line=dict(color=colors.get(arm), **line), marker=dict(size=6 if smaller else max(7, 13 - 3 * i)),
                        hovertemplate=f"{arm}<br>%{{x}}<br>%{{y:.3f}} MiB<extra></extra>")
    return layout(fig, "Rank 0's memory at the phases of step 1", "phase of step 1", "tracked bytes (MiB)")


def what_if_figure(config, summary: dict) -> go.Figure:
    """The ZeRO model per device for the view's parameters, devices and precision (no run needed)."""
    bpp = PRECISIONS[config.whatif_precision]
    devices = np.unique(np.logspace(0, np.log10(1024), 40).astype(int))
    fig = go.Figure()
    for i, (stage, name) in enumerate(STAGES):
        gb = [model_states(config.whatif_params_billion * 1e9, int(n), stage, bpp).total / GB for n in devices]
        at = model_states(config.whatif_params_billion * 1e9, config.whatif_devices, stage, bpp).total / GB
        fig.add_scatter(x=devices, y=gb, name=f"{name}: {at:,.1f} GB at N={config.whatif_devices}", mode="lines",
                        line=dict(color=category_color(i)),
                        hovertemplate=f"{name}<br>N=%{{x}}<br>%{{y:,.2f}} GB<extra></extra>")
    fig.add_vline(x=config.whatif_devices, line_dash="dot", line_color="gray")
    error, act_error = summary.get("max_state_error"), summary.get("max_activation_error")
    lines = ["run to validate the model"] if error is None else [
        "model vs measured, small runs:", f"model states {within(error)}",
        *([f"activations {within(act_error)}"] if act_error is not None else [])]
    # short lines in the bottom-left corner: every stage starts at DDP's value at N = 1 and ZeRO-3 falls as 1/N,
    # the plot's diagonal, so the corner under it holds no line (one long line ran out of the chart)
    fig.add_annotation(text="<br>".join(lines), xref="paper", yref="paper", x=0.01, y=0.02, showarrow=False,
                       xanchor="left", yanchor="bottom", align="left", font=dict(size=11))
    fig.update_xaxes(type="log")
    words = f"{PRECISION_WORDS[config.whatif_precision]} ({bpp.params:g} + {bpp.grads:g} + {bpp.optimizer:g} bytes per parameter)"
    return layout(fig, f"What if: {config.whatif_params_billion:g}B parameters, {words}", "devices N (log scale)",
                  "model state per device (GB, log scale)", log_y=True).update_layout(legend_title_text="ZeRO stage")
