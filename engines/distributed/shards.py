"""What one rank holds and what it sends: exact local bytes, DTensor shards, precisions, collectives.

FSDP2 (`fully_shard`) turns every parameter into a `DTensor`: a tensor that knows its
global shape and its placement on the mesh (`Shard(0)`: split along dim 0 in
`torch.chunk` pieces), while `to_local()` is the piece this rank stores. Under DDP the
parameters stay plain tensors, replicated. `shard_layout` records each parameter's
placement and its global and local rows; `local_bytes` counts the bytes a rank really
holds. `precision` reads the dtypes a step used: the forward's output (the compute
dtype; bf16 under a `MixedPrecisionPolicy`), the parameters the optimizer updates (the
master weights, fp32) and Adam's moments. `Collectives` counts the collectives of a step
by kind with torch's `CommDebugMode`, on a step of its own after the reported ones (DDP:
the gradient buckets' all-reduce; FSDP: an all-gather per unit in forward, again in
backward when it resharded, and a reduce-scatter of the gradients per unit).
"""
from collections import Counter
from collections.abc import Mapping

import torch
from torch import nn

from engines.distributed.launch import COLLECTIVES



def local_bytes(tensors) -> int:
    """Exact bytes this rank holds for `tensors` (the local shard of a DTensor)."""
    total = 0
    for t in tensors:
        if t is None:
            continue
        t = t.to_local() if hasattr(t, "to_local") else t
        total += t.numel() * t.element_size()
    return total


def optimizer_tensors(optimizer: torch.optim.Optimizer):
    for state in optimizer.state.values():
        yield from (v for v in state.values() if torch.is_tensor(v))


def shard_layout(model: nn.Module) -> dict[str, float]:
    """`dtensor/<parameter>/shard_dim` (−1: replicated), `/rows` (global size along that dim, or
    dim 0) and `/local_rows` (this rank's piece) for every DTensor parameter; {} under DDP."""
    out: dict[str, float] = {}
    for name, parameter in model.named_parameters():
        if not hasattr(parameter, "placements"):
            continue
        placement = parameter.placements[0]
        dim = placement.dim if placement.is_shard() else -1
        axis = max(dim, 0)
        out[f"dtensor/{name}/shard_dim"] = float(dim)
        out[f"dtensor/{name}/rows"] = float(parameter.shape[axis])
        out[f"dtensor/{name}/local_rows"] = float(parameter.to_local().shape[axis])
    return out


def precision(output: torch.Tensor, optimizer: torch.optim.Optimizer) -> dict[str, float]:
    """Bytes per value of the forward's output (compute), of the parameters the optimizer
    updates (master weights) and of its first moment."""
    master = optimizer.param_groups[0]["params"][0]
    moments = [v for state in optimizer.state.values() for k, v in state.items() if k == "exp_avg"]
    local = lambda t: t.to_local() if hasattr(t, "to_local") else t  # noqa: E731
    out = {"precision/compute": float(output.element_size()), "precision/master": float(local(master).element_size())}
    if moments:
        out["precision/adam"] = float(local(moments[0]).element_size())
    return out


class Collectives:
    """The collectives issued inside the `with` block, by kind (`collectives/all-gather`, ...);
    `kinds` maps each kind to words of torch's op names (default: the DDP page's four)."""

    def __init__(self, kinds: Mapping[str, tuple[str, ...]] = COLLECTIVES) -> None:
        self.kinds = kinds

    def __enter__(self) -> "Collectives":
        from torch.distributed.tensor.debug import CommDebugMode
        self.mode = CommDebugMode()
        self.mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.mode.__exit__(*exc)

    def metrics(self) -> dict[str, float]:
        counts: Counter = Counter({kind: 0 for kind in self.kinds})
        for op, count in self.mode.get_comm_counts().items():
            name = str(op).lower()
            kind = next((k for k, words in self.kinds.items() if any(w in name for w in words)), "other")
            counts[kind] += count
        return {f"collectives/{kind}": float(count) for kind, count in counts.items()}
