"""The analytic model beside a fit measurement, and each difference named.

The formulas are the ddp-fsdp-memory scenario's (engines/distributed/memory_model.py): ZeRO's
model states per device (Rajbhandari et al. 2020) with the bytes per parameter of this run's
dtype and optimizer; the parameters FSDP gathers beyond its shards (the root and one block
with `reshard_after_forward=True`, every block with False); and Korthikanti et al.'s
activations per layer, s·b·h·(34 + 5·a·s/h) values at 16 bits, for the built-in
architectures only (an arbitrary model has no formula). With activation checkpointing each
layer keeps its input, s·b·h values, and backward recomputes one layer at a time.

Every measured figure is compared with its formula, and the difference gets a sentence
whose numbers are computed here: FSDP's padding (dim 0 is cut into ⌈d₀/N⌉-row pieces on
every rank), Adam's 4-byte step counter per tensor (not sharded), the gradients that exist
at the moment of the peak, the logits the activation formula leaves out.
"""
import math
from typing import Any

from engines.distributed.memory_model import BytesPerParam, model_states, transformer_activation_bytes, \
    transient_unsharded_bytes

DEVICES_GB = (24, 40, 80, 141)   # common accelerators' memory, in 10⁹ bytes
STEP_COUNTER_BYTES = 4           # Adam's `step`: a float32 scalar per parameter tensor


def bytes_per_param(dtype: str, optimizer: str) -> BytesPerParam:
    """Resident bytes per parameter: parameters and gradients in the parameter dtype (fp32 for
    bf16-mixed: FSDP reduces gradients in fp32, autocast leaves them fp32), and the optimizer's
    states (Adam 2, SGD with momentum 1) in the parameter dtype too."""
    size = 2 if dtype == "bf16" else 4
    return BytesPerParam(size, size, (1 if optimizer == "sgd" else 2) * size)


def activation_bytes(arch: dict, seq: int, batch: int, compute_bytes: int, checkpointing: bool) -> float:
    """Korthikanti et al.'s per-layer activations for `layers` layers (with checkpointing: each
    layer's input, plus one layer recomputed in backward), in the compute dtype."""
    per_layer = transformer_activation_bytes(seq, batch, arch["hidden"], arch["heads"], 1, compute_bytes)
    if checkpointing:
        return arch["layers"] * seq * batch * arch["hidden"] * compute_bytes + per_layer
    return arch["layers"] * per_layer


def analytic(spec: dict, sizes: dict, arch: dict | None) -> dict[str, float | None]:
    """Per-rank bytes by category from the formulas (None where there is none), and their sum."""
    world, strategy = spec["world"], spec["strategy"]
    bpp = bytes_per_param(spec["dtype"], spec["optimizer"])
    states = model_states(sizes["n_params"], world, "ddp" if strategy == "single" else strategy, bpp)
    compute_bytes = 4 if spec["dtype"] == "fp32" else 2
    reduce_bytes = 4 if spec["dtype"] != "bf16" else 2
    unit = sizes["unit_param_bytes"]
    out: dict[str, float | None] = {
        "parameters": states.params, "gradients": states.grads, "optimizer_state": states.optimizer,
        "unsharded": transient_unsharded_bytes(strategy, unit, sizes["all_param_bytes"], sizes["root_param_bytes"]),
        "activations": None if arch is None else activation_bytes(arch, spec["seq"], spec["batch"] // world,
                                                                  compute_bytes, spec["checkpointing"]),
        "temporaries": None,
        # DDP: a flat bucket copy of every gradient; FSDP: one unit's all-gather output and reduce-scatter input
        "communication": {"single": 0.0, "ddp": sizes["grad_bytes"]}.get(
            strategy, unit + unit / compute_bytes * reduce_bytes),
    }
    out["peak"] = sum(v for v in out.values() if v is not None)
    return out


def _gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:.3g} GB" if abs(nbytes) >= 1e8 else f"{nbytes / 1e6:.3g} MB"


def differences(measured: dict, formula: dict, phases: dict, spec: dict, sizes: dict,
                arch: dict | None) -> dict[str, dict[str, Any]]:
    """Per category: measured − formula in bytes and %, and why, from this run's numbers."""
    out: dict[str, dict[str, Any]] = {}
    fsdp = spec["strategy"].startswith("fsdp")
    pad_elements = sizes["padded_elements"] - sizes["n_params"] / spec["world"] if fsdp else 0.0
    for category, value in measured.items():
        model = formula.get(category)
        if model is None:
            why = {"temporaries": "no formula: scratch tensors of backward and of the optimizer step",
                   "activations": "no formula for an arbitrary model (the built-in architectures have one)"}
            said = why.get(category, "no formula")
            out[category] = {"bytes": None, "percent": None, "why": said, "text": said}
            continue
        delta = value - model
        why = _why(category, delta, value, model, phases, spec, sizes, arch, pad_elements)
        out[category] = {"bytes": delta, "percent": 100.0 * delta / model if model else None, "why": why,
                         "text": why if why == "equal" or why.endswith("than the formula")
                         else f"{_signed(delta)}: {why}"}
    return out


def _signed(nbytes: float) -> str:
    """A difference in bytes, its sign written and its unit fitted to its size (a table in GB rounds
    1.6 kB away: 0.429 and 0.429)."""
    size = abs(nbytes)
    text = next((f"{size / scale:.3g} {unit}" for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"))
                 if size >= scale), f"{size:.0f} B")
    return ("+" if nbytes > 0 else "−") + text


def _why(category: str, delta: float, value: float, model: float, phases: dict, spec: dict, sizes: dict,
         arch: dict | None, pad_elements: float) -> str:
    if abs(delta) <= 1e-9 * max(model, 1.0):
        return "equal"
    bpp = bytes_per_param(spec["dtype"], spec["optimizer"])
    if category == "parameters" and pad_elements:
        return (f"FSDP pads dim 0 of each parameter to a multiple of {spec['world']} ranks: rank 0 holds "
                f"{pad_elements:,.0f} padding elements ({_gb(pad_elements * bpp.params)})")
    if category == "optimizer_state":
        scratch = value - phases["after optimizer step"]["optimizer_state"]
        counters = STEP_COUNTER_BYTES * sizes["n_tensors"] if spec["optimizer"] != "sgd" else 0.0
        padding = pad_elements * bpp.optimizer
        parts = [f"the peak is in the optimizer step, whose scratch tensors count as its state ({_gb(scratch)})"] \
            if scratch > 0 else []
        parts += [f"Adam's step counters ({sizes['n_tensors']:.0f} tensors × 4 B, not sharded)"] if counters else []
        parts += [f"FSDP's padding ({_gb(padding)})"] if padding else []
        if parts and abs(delta - max(scratch, 0.0) - counters - padding) <= 1e-6 * model:
            return " + ".join(parts)
    if category == "gradients":
        after = phases["after backward"]["gradients"]
        if value < after:
            return f"the peak comes inside backward, before every gradient exists ({_gb(after)} after backward)"
        if pad_elements:
            return f"FSDP's padding ({_gb(pad_elements * bpp.grads)})"
    if category == "activations" and arch is not None:
        logits = spec["batch"] // spec["world"] * spec["seq"] * arch["vocab"] * (4 if spec["dtype"] == "fp32" else 6)
        return (f"the formula counts dropout masks and the s×s attention scores (this model has neither: fused "
                f"attention), and leaves out the embedding and the logits with their fp32 copy ({_gb(logits)})")
    if category == "unsharded" and sizes["unit_param_bytes"]:
        units = value / sizes["unit_param_bytes"]
        formula_units = model / sizes["unit_param_bytes"]
        return (f"at the peak FSDP holds {units:.2f} blocks' worth of gathered parameters "
                f"(the formula: {formula_units:.2f})")
    return f"{_gb(abs(delta))} {'more' if delta > 0 else 'less'} than the formula"


def fits_on(peak_bytes: float) -> list[dict[str, Any]]:
    """For each common accelerator: does the peak fit, and with how much headroom (negative: short)."""
    return [{"device_gb": gb, "fits": peak_bytes <= gb * 1e9, "headroom_bytes": gb * 1e9 - peak_bytes}
            for gb in DEVICES_GB]


def fits_line(peak_bytes: float, analytic_peak: float | None = None) -> str:
    """'The measured peak, 27.1 GB, fits on: 24 GB no (short 3.1 GB) · 40 GB yes (12.9 GB headroom) · ….'
    Where the analytic model's peak gives another answer for a device, the line says so: the verdict
    is the measured number's, and a reader who sees both numbers should not get yes and no at once."""
    parts = []
    for row in fits_on(peak_bytes):
        room = abs(row["headroom_bytes"]) / 1e9
        parts.append(f"{row['device_gb']} GB " + (f"yes ({room:.1f} GB headroom)" if row["fits"]
                                                    else f"no (short {room:.1f} GB)"))
    line = f"The measured peak, {_gb(peak_bytes)}, fits on: " + " · ".join(parts) + "."
    if analytic_peak is not None:
        other = [model["device_gb"] for model, measured in zip(fits_on(analytic_peak), fits_on(peak_bytes))
                 if model["fits"] != measured["fits"]]
        if other:
            devices = " and ".join(f"{gb} GB" for gb in other)
            line += (f" The analytic model's peak, {_gb(analytic_peak)}, would {'not ' if analytic_peak > peak_bytes else ''}"
                     f"fit on {devices}: the table's last column says where the two differ.")
    return line + " Not counted: the CUDA context and the allocator's cache."


def ceil_rows(numel: int, dim0: int, world: int) -> int:
    """Elements of rank 0's FSDP shard of a parameter: ⌈dim0/world⌉ rows of numel/dim0."""
    return math.ceil(dim0 / world) * (numel // dim0) if dim0 else 0
