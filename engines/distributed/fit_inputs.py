"""A person's model, made ready to measure: found by import path, fed, cast, cut into units.

- `load("pkg.module:factory")` imports the module (running its code: only ever a path the
  person typed) and returns the attribute; `FitError` names what is missing.
- `guess_inputs(model)`: token ids of shape (batch, seq) for a model whose first parameterized
  module is an `nn.Embedding`, (batch, in_features) floats for one that starts with an
  `nn.Linear`; anything else needs `--inputs MODULE:FUNCTION`, a function (batch, seq) -> inputs.
- `loss_of(output, inputs)`: cross-entropy against the tokens for a language model's logits
  (as training does: in fp32), else the mean of the output; Hugging Face-style outputs
  (`.loss`, `.logits`, dicts, tuples) are read too.
- `cast(model, dtype)` converts floating parameters and buffers, keeping tied ones tied.
- `units(model)`: the modules FSDP shards one at a time and checkpointing wraps — the
  children of every `nn.ModuleList` (a Transformer's blocks), or a root `nn.Sequential`'s
  children that hold parameters; none (the root is one unit) when neither exists.
"""
import importlib
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class FitError(ValueError):
    """Bad input to a fit measurement: one line that says what is wrong and what to do."""


class ModelError(RuntimeError):
    """The person's own code raised (building the model, making its inputs): its error, shown."""


def load(path: str, what: str = "model factory") -> Callable:
    """The callable `attribute` of `module` for "module:attribute"."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise FitError(f"{what} {path!r} is not MODULE:FUNCTION (e.g. my_pkg.models:build)")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):  # the path itself, not an import inside it
            raise FitError(f"{what} {path!r}: no module named {module_name!r} (is it on PYTHONPATH?)") from None
        raise
    found = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise FitError(f"{what} {path!r}: module {module_name!r} has no attribute {attribute!r}")
        found = getattr(found, part)
    if not callable(found):
        raise FitError(f"{what} {path!r} is a {type(found).__name__}, not something to call")
    return found


def build_model(factory: Callable[[], Any], path: str) -> nn.Module:
    """Call the factory (an nn.Module class or a function returning one); its own error is shown
    as a ModelError (a model that downloads its weights fails here, offline, with its message)."""
    try:
        model = factory()
    except Exception as error:  # noqa: BLE001 (anything the person's code raises is theirs to read)
        raise ModelError(f"{path} raised {type(error).__name__}: {error}") from error
    if not isinstance(model, nn.Module):
        raise FitError(f"{path} returned a {type(model).__name__}, not a torch.nn.Module")
    return model


def first_layer(model: nn.Module) -> nn.Module | None:
    """The first module (in definition order) that holds parameters of its own."""
    return next((m for m in model.modules() if any(True for _ in m.parameters(recurse=False))), None)


def class_name(module: nn.Module) -> str:
    """The module's own class name, under the FSDP<Name> class fully_shard gives it."""
    return next(c.__name__ for c in type(module).__mro__ if not c.__name__.startswith("FSDP"))


def guess_inputs(model: nn.Module, batch: int, seq: int, device: torch.device) -> tuple:
    """Example inputs for `model`'s forward, or a FitError asking for an input function."""
    first = first_layer(model)
    if isinstance(first, nn.Embedding):
        return (torch.randint(0, first.num_embeddings, (batch, seq), device=device),)  # token ids (batch, seq)
    if isinstance(first, nn.Linear):
        # in the first layer's dtype (a bf16 model is fed bf16); FSDP and autocast cast fp32 inputs themselves
        dtype = first.weight.dtype if first.weight.is_floating_point() else torch.float32
        return (torch.randn(batch, first.in_features, device=device, dtype=dtype),)  # (batch, in_features)
    kind = class_name(first) if first is not None else "no parameters"
    raise FitError(f"cannot guess the inputs of {class_name(model)}.forward (its first layer is {kind}, "
                   f"not an Embedding or a Linear): pass --inputs MODULE:FUNCTION, a function (batch, seq) "
                   f"-> example inputs")


def call_inputs(function: Callable, batch: int, seq: int, path: str) -> tuple:
    """The person's input function's result as positional arguments (a dict stays keyword arguments)."""
    try:
        made = function(batch, seq)
    except Exception as error:  # noqa: BLE001 (their code: its own error, shown)
        raise ModelError(f"inputs {path} raised {type(error).__name__}: {error}") from error
    if isinstance(made, (torch.Tensor, dict)):
        return (made,)
    if isinstance(made, (tuple, list)):
        return tuple(made)
    raise FitError(f"inputs {path} returned a {type(made).__name__}; return a tensor, a tuple of them or a dict")


def forward(model: nn.Module, inputs: tuple) -> Any:
    if len(inputs) == 1 and isinstance(inputs[0], dict):
        return model(**inputs[0])
    return model(*inputs)


def loss_of(output: Any, inputs: tuple) -> torch.Tensor:
    """A scalar to call backward on: the model's own loss if it returns one, else cross-entropy
    of (batch, seq, vocab) logits against the token ids, else the mean of the first output."""
    if isinstance(output, dict) or hasattr(output, "logits"):
        get = output.get if isinstance(output, dict) else lambda k: getattr(output, k, None)
        if torch.is_tensor(get("loss")):
            return get("loss")
        output = get("logits")
    if isinstance(output, (tuple, list)):
        output = output[0]
    if not torch.is_tensor(output):
        raise FitError(f"the model's forward returned a {type(output).__name__}; need a tensor (or .loss / .logits)")
    tokens = inputs[0] if inputs and torch.is_tensor(inputs[0]) and not inputs[0].is_floating_point() else None
    if tokens is not None and output.dim() == tokens.dim() + 1 and output.shape[:-1] == tokens.shape:
        # Next-token training computes the softmax in fp32 whatever the compute dtype (autocast does too).
        return F.cross_entropy(output.flatten(0, -2).float(), tokens.flatten())
    return output.float().mean()


def cast(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    """Floating parameters and buffers to `dtype`, in place; parameters shared by two modules stay one."""
    if dtype == torch.float32:
        return model
    done: dict[int, nn.Parameter] = {}
    for module in model.modules():
        for name, parameter in list(module._parameters.items()):
            if parameter is None or not parameter.is_floating_point():
                continue
            if id(parameter) not in done:
                done[id(parameter)] = nn.Parameter(parameter.detach().to(dtype), parameter.requires_grad)
            module._parameters[name] = done[id(parameter)]
        for name, buffer in list(module._buffers.items()):
            if buffer is not None and buffer.is_floating_point():
                module._buffers[name] = buffer.to(dtype)
    return model


def units(model: nn.Module) -> list[tuple[nn.Module, str, nn.Module]]:
    """(parent, child name, unit): every child of an nn.ModuleList not inside another unit, or a
    root nn.Sequential's children with parameters."""
    found: list[tuple[nn.Module, str, nn.Module]] = []
    taken: set[int] = set()
    for module in model.modules():
        if id(module) in taken or not isinstance(module, nn.ModuleList):
            continue
        for name, child in module.named_children():
            if any(True for _ in child.parameters()):
                found.append((module, name, child))
                taken.update(id(m) for m in child.modules())
    if not found and isinstance(model, nn.Sequential):
        found = [(model, name, child) for name, child in model.named_children()
                 if any(True for _ in child.parameters())]
    return found


def checkpoint_units(model: nn.Module) -> None:
    """Activation checkpointing per unit (torch's `checkpoint_wrapper`, non-reentrant): a unit keeps
    its input for backward and runs its forward again there."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    for parent, name, unit in units(model):
        setattr(parent, name, checkpoint_wrapper(unit))
