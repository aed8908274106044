"""DDP vs FSDP memory, read: each arm's rank 0 measured against the model, and the run's summary.

`arm_summary` puts side by side what a run measured and what `engines.distributed.memory_model` says:
model states (the ZeRO model against exact `to_local()` bytes), the activations kept at the
end of forward (our layer's bookkeeping against the tracker), and the gathered FSDP
parameters (against the timeline's largest "unsharded parameters"). `summary` does that for
every measured arm, from `Records`, and adds the loss gaps between strategies.
"""
import math
import weakref

import numpy as np
import pandas as pd

from engines.distributed.memory_model import (PRECISIONS, encoder_activation_bytes, model_states, transformer_activation_bytes,
                                  transient_unsharded_bytes)
from scenarios.ddp_fsdp_memory.timeline import timeline_of
from scenarios.records import Records

FP32_ADAM = PRECISIONS["fp32 Adam"]
# The trackers' categories, on CPU and CUDA alike (they add up to the tracked total).
CATEGORIES = ["parameters", "gradients", "optimizer state", "activations", "unsharded parameters",
              "temporaries", "communication buffers"]
# On CUDA, beside them: the caching allocator's totals (reserved ⊇ allocated ⊇ the tracked tensors), drawn as lines.
ALLOCATOR = ["allocated", "reserved"]


SHAPE = ("seq_len", "batch", "hidden", "heads", "layers", "vocab")


def within(error: float) -> str:
    """|measured / model − 1| in words: 'equal to the byte' at exactly 0, else 'within' two significant
    digits of a percent ('within 0.012%'): a count of bytes off by 108 in 1.7 MB is not '0.0%'."""
    if error == 0:
        return "equal to the byte"
    percent = 100 * abs(error)
    return f"within {percent:.{max(0, 1 - math.floor(math.log10(percent)))}f}%"


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
    tracked = timeline[timeline["category"].isin(CATEGORIES)]  # not the allocator's totals beside them
    totals = tracked.groupby("mark")["bytes"].sum() if not tracked.empty else pd.Series(dtype=float)
    unsharded = timeline.loc[timeline["category"] == "unsharded parameters", "bytes"]
    forward_acts = at.get(("model forward end", "activations"))
    return {
        "strategy": strategy, "world_size": world, "on_cuda": bool(values.get("rank_0/on_cuda", 0.0)),
        "measured_state_bytes": measured, "estimated_state_bytes": estimate.total,
        "state_error": measured / estimate.total - 1,
        "estimated": {"parameters": estimate.params, "gradients": estimate.grads,
                      "optimizer state": estimate.optimizer},
        "estimated_activation_bytes": encoder_activation_bytes(**shape, bytes_per_value=2.0 if bf16 else 4.0)
        if all(shape.values()) else None,  # a record without its shape (from other code) has no estimate
        "korthikanti_bytes": transformer_activation_bytes(*(shape[k] for k in SHAPE[:5]), 4.0)
        if all(shape.values()) else None,
        "measured_activation_bytes": forward_acts - at.get(("step start", "activations"), 0.0)
        if forward_acts is not None else None,
        # DDP's reducer keeps a flat copy of every gradient in its buckets (filed under temporaries)
        "estimated_bucket_bytes": 4.0 * n_params if strategy == "ddp" else 0.0,
        "estimated_unsharded_bytes": transient_unsharded_bytes(
            strategy, values.get("rank_0/unit_param_bytes", 0.0), 4.0 * n_params,
            values.get("rank_0/root_param_bytes", 0.0)) * (0.5 if bf16 else 1.0),
        "max_unsharded_bytes": float(unsharded.max()) if len(unsharded) else 0.0,
        "unit_param_bytes": values.get("rank_0/unit_param_bytes"),
        "timeline_peak_bytes": float(totals.max()) if len(totals) else None,
        "peak_bytes": sum(values.get(f"rank_0/peak/{c}", 0.0) for c in CATEGORIES),
        "peak_allocated_bytes": values.get("rank_0/peak/allocated"),
        "peak_reserved_bytes": values.get("rank_0/peak/reserved")}


def arm_values(records: Records, arm: str) -> dict[str, float]:
    """Every metric of one arm at its last record (a plain read of `Records`)."""
    return {metric: records.last(arm, metric) for metric in records.metrics(arm)}


def measured_arms(records: Records) -> dict[str, dict]:
    """`arm_summary` (and its losses) of every arm whose rank 0 measurement has arrived: its strategy
    named by the arm, its world size by the rank's record."""
    arms = {}
    for arm in records.arms():
        values = arm_values(records, arm)
        if "rank_0/n_params" in values and "rank_0/world_size" in values:
            strategy = arm.split(" · ")[0]
            arms[arm] = {**arm_summary(values, strategy, int(values["rank_0/world_size"])),
                         "losses": records.values(arm, "loss").tolist()}
    return arms


def loss_gaps(arms: dict[str, dict]) -> tuple[dict[int, float], dict[int, float]]:
    """Per world size: the fp32 strategies' largest loss difference at any step, and bf16
    compute's largest difference from the first fp32 strategy."""
    loss_gap, bf16_gap = {}, {}
    for world in sorted({a["world_size"] for a in arms.values()}):
        fp32 = [a["losses"] for a in arms.values() if a["world_size"] == world and a["losses"]
                and not a["strategy"].endswith("-bf16")]
        if len(fp32) > 1 and all(len(c) == len(fp32[0]) for c in fp32):
            loss_gap[world] = float(np.max(np.ptp(np.array(fp32), axis=0)))
        bf16 = [a["losses"] for a in arms.values() if a["world_size"] == world and a["strategy"].endswith("-bf16")]
        if fp32 and bf16 and len(bf16[0]) == len(fp32[0]):
            bf16_gap[world] = float(np.max(np.abs(np.array(bf16[0]) - np.array(fp32[0]))))
    return loss_gap, bf16_gap


_READ: "weakref.WeakKeyDictionary[Records, dict]" = weakref.WeakKeyDictionary()


def summary(records: Records) -> dict:
    """Every measured arm against the model, the loss gaps, the largest model errors, and the
    headline (rank 0's model state under DDP and FSDP ZeRO-3 at the largest world measured).
    Read once per `Records` (figures and every claim ask for it); do not modify the result."""
    if records not in _READ:
        _READ[records] = _summary(records)
    return _READ[records]


def _summary(records: Records) -> dict:
    arms = measured_arms(records)
    loss_gap, bf16_gap = loss_gaps(arms)
    errors = [abs(a["state_error"]) for a in arms.values()]
    act_errors = [abs(a["measured_activation_bytes"] / a["estimated_activation_bytes"] - 1) for a in arms.values()
                  if a["measured_activation_bytes"] and a["estimated_activation_bytes"]]
    top = max((a["world_size"] for a in arms.values()), default=0)
    state = {a["strategy"]: a["measured_state_bytes"] / 1e6 for a in arms.values() if a["world_size"] == top}
    headline = {"DDP model state per rank (MB, largest N)": state.get("ddp"),
                "FSDP ZeRO-3 model state per rank (MB, largest N)": state.get("fsdp-zero3"),
                "largest model-state error vs ZeRO": max(errors) if errors else None,
                "largest loss gap between strategies": max(loss_gap.values()) if loss_gap else None}
    return {"headline": headline, "arms": arms, "loss_gap": loss_gap, "bf16_loss_gap": bf16_gap,
            "max_state_error": max(errors) if errors else None,
            "max_activation_error": max(act_errors) if act_errors else None}
