"""Probes: what the instrumented loop measures inside a model, per layer.

- weight-gradient norms ‖∂L/∂W_l‖ for every probed layer in one fused `torch._foreach_norm`,
  summed in float64 (a float32 sum of squares underflows to 0 below ~1e-19);
- activation statistics from forward hooks: the std of each layer's output, and the
  fraction of units that are zero for every row of the batch ("dead on this batch");
- the back-propagated gradient ‖∂L/∂a_l‖ at each layer's output (a tensor hook set by the
  forward hook). This is what shrinks by f'·√(n·Var W) per layer; the weight gradient
  ∂L/∂W_l = (∂L/∂z_l) h_{l-1}ᵀ also carries the size of the layer's input;
- the update-to-weight ratio ‖ΔW_l‖ / ‖W_l‖ of one optimizer step.

Forward hooks exist only while the probe is `armed` (a logged step), so the steps in
between run the model's plain, hook-free path; the statistics are computed afterwards, all layers at once (stacked when
the layers share a shape, fused `_foreach` calls otherwise). Values stay tensors until the
training loop makes its one `.tolist()` call.
"""
from collections.abc import Sequence

import torch
from torch import nn


def layer_name(index: int) -> str:
    """`layer_01`, `layer_02`, ... (1-based, zero-padded so names sort in layer order)."""
    return f"layer_{index + 1:02d}"


class LayerProbe:
    """Measures `layers` (their `.weight`) and the outputs of `activations`, layer by layer."""

    def __init__(self, layers: Sequence[nn.Module], activations: Sequence[nn.Module] = ()) -> None:
        if activations and len(activations) != len(layers):
            raise ValueError(f"{len(activations)} activation modules for {len(layers)} layers")
        self.weights = [layer.weight for layer in layers]
        self._values = [w.detach() for w in self.weights]  # aliases: in-place optimizer steps show through
        self._activations = list(activations)
        self._outputs: list[torch.Tensor | None] = [None] * len(activations)
        self._out_grads: list[torch.Tensor | None] = [None] * len(activations)
        self._handles: list = []
        self._before: list[torch.Tensor] | None = None

    @property
    def armed(self) -> bool:
        return bool(self._handles)

    @armed.setter
    def armed(self, value: bool) -> None:
        """Arm before a logged step's forward pass (hooks on), disarm after (hooks off)."""
        if value and not self._handles:
            self._handles = [act.register_forward_hook(self._hook(i)) for i, act in enumerate(self._activations)]
        elif not value:
            self.close()

    def _hook(self, index: int):
        def hook(module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
            self._outputs[index] = output.detach()  # (batch, width)
            if output.requires_grad:
                output.register_hook(self._grad_hook(index))
        return hook

    def _grad_hook(self, index: int):
        def hook(grad: torch.Tensor) -> None:
            self._out_grads[index] = grad.detach()
        return hook

    def grad_norms(self) -> torch.Tensor:
        """‖∂L/∂W_l‖ for every layer, as one tensor (zeros where a layer has no gradient yet)."""
        grads = [w.grad if w.grad is not None else torch.zeros_like(w) for w in self.weights]
        return torch.stack(torch._foreach_norm(grads, 2, dtype=torch.float64))

    def snapshot(self) -> None:
        """Keep a copy of the weights, to measure the next optimizer step against."""
        self._before = torch._foreach_mul(self._values, 1.0)  # one fused copy of every layer

    def update_ratios(self) -> torch.Tensor:
        """‖W_after − W_before‖ / ‖W_before‖ per layer, for the step since `snapshot()`."""
        if self._before is None:
            raise RuntimeError("update_ratios() needs a snapshot() before the optimizer step")
        deltas = torch._foreach_sub(self._values, self._before)
        ratios = torch.stack(torch._foreach_norm(deltas)) / torch.stack(torch._foreach_norm(self._before))
        self._before = None
        return ratios

    def activation_stats(self) -> dict[str, torch.Tensor]:
        """`act_std`, `frac_dead` and `out_grad` (‖∂L/∂a_l‖) per layer from the last armed pass."""
        outputs = self._outputs
        if not outputs or any(out is None for out in outputs):
            return {}
        if all(out.shape == outputs[0].shape for out in outputs):
            stacked = torch.stack(outputs).flatten(2)  # (layers, batch, units)
            flat = stacked.flatten(1)  # (layers, batch·units)
            # std as ‖x − mean‖/√(n−1): same value as .std(), ~14x faster than its kernel here
            centered = flat - flat.mean(dim=1, keepdim=True)
            stats = {"act_std": torch.linalg.vector_norm(centered, dim=1) / (flat.shape[1] - 1) ** 0.5,
                     # a unit is dead on the batch when even its largest output is <= 0
                     "frac_dead": (stacked.amax(dim=1) <= 0).float().mean(dim=1)}
        else:
            stats = {"act_std": torch.stack([out.std() for out in outputs]),
                     "frac_dead": torch.stack([(out.flatten(1) <= 0).all(dim=0).float().mean() for out in outputs])}
        if all(grad is not None for grad in self._out_grads):
            stats["out_grad"] = torch.stack(torch._foreach_norm(self._out_grads, 2, dtype=torch.float64))
        self._outputs = [None] * len(outputs)  # do not hold a batch of activations between logs
        self._out_grads = [None] * len(outputs)
        return stats

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def __enter__(self) -> "LayerProbe":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
