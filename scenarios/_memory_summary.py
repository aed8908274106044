"""DDP vs FSDP memory, read: each arm's rank 0 measured against the model, and the page's lines.

`arm_summary` puts side by side what a run measured and what `engines.memory_model` says:
model states (the ZeRO model against exact `to_local()` bytes), the activations kept at the
end of forward (our layer's bookkeeping against the tracker), and the gathered FSDP
parameters (against the timeline's largest "unsharded parameters").
"""
import pandas as pd

from engines.memory_model import (PRECISIONS, encoder_activation_bytes, model_states, transformer_activation_bytes,
                                  transient_unsharded_bytes)
from scenarios._memory_timeline import timeline_of

FP32_ADAM = PRECISIONS["fp32 Adam"]
# On CUDA the worker reports the allocator's "allocated" (and "reserved") bytes instead of categories.
CATEGORIES = ["parameters", "gradients", "optimizer state", "activations", "unsharded parameters",
              "temporaries", "communication buffers", "allocated"]


SHAPE = ("seq_len", "batch", "hidden", "heads", "layers", "vocab")


def arm_summary(values: dict[str, float], strategy: str, world: int) -> dict:
    """Rank 0 of one arm: measured against modelled — model states, activations at the end of
    forward, unsharded parameters at their most — and what the timeline showed."""
    shape = {k: int(values.get(f"rank_0/shape/{k}", 0)) for k in SHAPE}
    bf16 = strategy.endswith("-bf16")  # bf16 compute; fp32 sharded parameters and Adam state as before
    n_params = values["rank_0/n_params"]
    estimate = model_states(n_params, world, strategy.removesuffix("-bf16"), FP32_ADAM)
    measured = sum(values.get(f"rank_0/exact/{k}", 0.0) for k in ("parameters", "gradients", "optimizer state"))
    timeline = timeline_of(values, shape["layers"])
    at = {(r.label, r.category): r.bytes for r in timeline.itertuples()}
    totals = timeline.groupby("mark")["bytes"].sum() if not timeline.empty else pd.Series(dtype=float)
    unsharded = timeline.loc[timeline["category"] == "unsharded parameters", "bytes"]
    forward_acts = at.get(("model forward end", "activations"))
    return {
        "strategy": strategy, "world_size": world, "on_cuda": bool(values.get("rank_0/on_cuda", 0.0)),
        "measured_state_bytes": measured, "estimated_state_bytes": estimate.total,
        "state_error": measured / estimate.total - 1,
        "estimated": {"parameters": estimate.params, "gradients": estimate.grads,
                      "optimizer state": estimate.optimizer},
        "estimated_activation_bytes": encoder_activation_bytes(**shape, bytes_per_value=2.0 if bf16 else 4.0)
        if shape["layers"] else None,
        "korthikanti_bytes": transformer_activation_bytes(*(shape[k] for k in SHAPE[:5]), 4.0),
        "measured_activation_bytes": forward_acts - at.get(("step start", "activations"), 0.0)
        if forward_acts is not None else None,
        # DDP's reducer keeps a flat copy of every gradient in its buckets (rebuilt in step 1's forward)
        "estimated_bucket_bytes": 4.0 * n_params if strategy == "ddp" else 0.0,
        "estimated_unsharded_bytes": transient_unsharded_bytes(
            strategy, values.get("rank_0/unit_param_bytes", 0.0), 4.0 * n_params,
            values.get("rank_0/root_param_bytes", 0.0)) * (0.5 if bf16 else 1.0),
        "max_unsharded_bytes": float(unsharded.max()) if len(unsharded) else 0.0,
        "unit_param_bytes": values.get("rank_0/unit_param_bytes"),
        "timeline_peak_bytes": float(totals.max()) if len(totals) else None,
        "peak_bytes": sum(values.get(f"rank_0/peak/{c}", 0.0) for c in CATEGORIES),
        "peak_reserved_bytes": values.get("rank_0/peak/reserved")}


def state_line(arm: str, a: dict) -> str:
    peak = f"{a['peak_bytes'] / 1e6:.2f} MB" + (
        f" allocated, {a['peak_reserved_bytes'] / 1e6:.2f} MB reserved by the CUDA allocator"
        if a["peak_reserved_bytes"] else "")
    return (f"- **{arm}**: rank 0 holds {a['measured_state_bytes'] / 1e6:.2f} MB of parameters, gradients and Adam "
            f"state (the model says {a['estimated_state_bytes'] / 1e6:.2f} MB, {a['state_error']:+.1%}); "
            f"its peak was {peak}.")


def gathered_line(arm: str, a: dict) -> str:
    how = (" — every block stays gathered from its forward until its backward." if a["strategy"].startswith("fsdp-zero2")
           else " — each block is resharded after its forward.")
    return (f"- Timeline, **{arm}**: at most {a['max_unsharded_bytes'] / 1e6:.2f} MB of unsharded parameters at once "
            f"({a['max_unsharded_bytes'] / a['unit_param_bytes']:.1f}× one block's {a['unit_param_bytes'] / 1e6:.2f} MB; "
            f"the model: {a['estimated_unsharded_bytes'] / 1e6:.2f} MB){how}")


def activation_lines(shown: list[dict]) -> list[str]:
    """Measured activations against our layer's bookkeeping and Korthikanti et al.'s formula;
    DDP's extra: its gradient buckets."""
    lines = []
    measured = [a for a in shown if a["measured_activation_bytes"] and a["estimated_activation_bytes"]
                and not a["strategy"].endswith("-bf16")]
    sample = min(measured, key=lambda a: a["strategy"] == "ddp", default=None)  # FSDP first: no buckets in it
    if sample is not None:
        lines.append(f"- Activations kept for backward at the end of forward ({sample['strategy']}, rank 0): "
                     f"{sample['measured_activation_bytes'] / 1e6:.3f} MB measured, "
                     f"{sample['estimated_activation_bytes'] / 1e6:.3f} MB by this layer's bookkeeping (12 values "
                     f"per token and hidden unit per block); Korthikanti et al.'s GPT-layer formula says "
                     f"{sample['korthikanti_bytes'] / 1e6:.3f} MB plus the head — it also keeps dropout masks, GeLU "
                     "inputs and the s×s attention scores, which this layer does not.")
    ddp = next((a for a in shown if a["strategy"] == "ddp" and a["measured_activation_bytes"]), None)
    if ddp is not None and ddp["estimated_activation_bytes"]:
        extra = ddp["measured_activation_bytes"] - ddp["estimated_activation_bytes"]
        lines.append(f"- DDP's forward adds {extra / 1e6:.3f} MB more: its reducer's gradient buckets, a flat copy of "
                     f"every gradient ({ddp['estimated_bucket_bytes'] / 1e6:.3f} MB), rebuilt during step 1's forward "
                     "— so the tracker files them under activations; the model bar shows them as communication buffers.")
    return lines
