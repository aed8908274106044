"""Which parts of a person's model are watched, and what their outputs are.

Every module that owns trainable parameters of its own counts (Linear, Conv, Embedding,
LayerNorm, an attention block's projections, a model's bare `nn.Parameter`s), named by its
module path, in the order the model registers them: input to output for nn.Sequential and for
most models. Wrappers are looked through: DistributedDataParallel and DataParallel (`.module`)
and torch.compile's (`._orig_mod`), so the names are the person's own.
"""
from dataclasses import dataclass

import torch
from torch import nn


class WatchError(ValueError):
    """A model or setting that cannot be watched: one line saying why."""


@dataclass(frozen=True)
class Layer:
    path: str        # the module path ("blocks.0.attn.qkv"; "(root)" for the model's own parameters)
    kind: str        # its class ("Linear")
    after: str = ""  # the class of the module registered next beside it (Dropout and Identity passed
                     # over): "ReLU" in nn.Sequential(Linear, ReLU); "" when none (a functional activation)


PASS_THROUGH = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "Identity")


def unwrap(model: nn.Module) -> nn.Module:
    """The module the person built, inside DistributedDataParallel / DataParallel and torch.compile."""
    while True:
        if isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
            model = model.module
        elif isinstance(getattr(model, "_orig_mod", None), nn.Module):
            model = model._orig_mod
        else:
            return model


def is_compiled(model: nn.Module) -> bool:
    """Compiled by `torch.compile(model)` (a wrapper) or `model.compile()` (in place, any submodule)."""
    if isinstance(getattr(model, "_orig_mod", None), nn.Module):
        return True
    return any(getattr(module, "_compiled_call_impl", None) is not None for module in unwrap(model).modules())


def trainable_modules(model: nn.Module) -> list[tuple[Layer, nn.Module, list[nn.Parameter]]]:
    """Every module with trainable parameters of its own, in registration order. A parameter two
    modules share (tied embeddings) belongs to the first; a module left with none is not listed."""
    seen: set[int] = set()
    found = []
    after = _next_siblings(unwrap(model))
    for path, module in unwrap(model).named_modules():
        params = [p for p in module.parameters(recurse=False) if p.requires_grad and id(p) not in seen]
        seen.update(id(p) for p in params)
        if params:
            found.append((Layer(path or "(root)", type(module).__name__, after.get(id(module), "")), module, params))
    return found


def _next_siblings(model: nn.Module) -> dict[int, str]:
    """id(module) -> the class of the next child of its parent that is not a pass-through module."""
    following: dict[int, str] = {}
    for parent in model.modules():
        children = [type(child).__name__ for child in parent.children()]
        for i, child in enumerate(parent.children()):
            later = [kind for kind in children[i + 1:] if kind not in PASS_THROUGH]
            following.setdefault(id(child), later[0] if later else "")
    return following


def checked_every(every: object) -> int:
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise WatchError(f"every must be a whole number ≥ 1 (measure every k-th optimizer step), got {every!r}")
    return every


def first_tensor(output) -> torch.Tensor | None:
    """A module's output as one tensor: itself, or the first tensor of a tuple, list or dict
    (attention returns (output, weights))."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, (tuple, list)):
        return next((o for o in output if isinstance(o, torch.Tensor)), None)
    return None
