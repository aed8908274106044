"""Probes: what the instrumented loop measures inside a model, per layer.

- weight-gradient norms ‖∂L/∂W_l‖ for every probed layer in one fused `torch._foreach_norm`,
  summed in float64 (a float32 sum of squares underflows to 0 below ~1e-19);
- activation statistics by forward hooks: the std of each layer's output, and the
  fraction of units that are zero for every row of the batch ("dead on this batch");
- the back-propagated gradient ‖∂L/∂a_l‖ at each layer's output (a tensor hook set by the
  forward hook). This is what shrinks by f'·√(n·Var W) per layer; the weight gradient
  ∂L/∂W_l = (∂L/∂z_l) h_{l-1}ᵀ also carries the size of the layer's input;
- the update-to-weight ratio ‖ΔW_l‖ / ‖W_l‖ of one optimizer step.

Hooks only compute while the probe is `armed`, so steps that are not logged pay almost
nothing. Values stay tensors until `read()`, which makes one `.tolist()` call.
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
        self.armed = False
        self._act_std: list[torch.Tensor | None] = [None] * len(activations)
        self._act_dead: list[torch.Tensor | None] = [None] * len(activations)
        self._out_grad: list[torch.Tensor | None] = [None] * len(activations)
        self._handles = [act.register_forward_hook(self._hook(i)) for i, act in enumerate(activations)]
        self._before: list[torch.Tensor] | None = None

    def _hook(self, index: int):
        def hook(module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
            if not self.armed:
                return
            out = output.detach()  # (batch, width)
            self._act_std[index] = out.std()
            self._act_dead[index] = (out <= 0).all(dim=0).float().mean()
            if output.requires_grad:
                output.register_hook(self._grad_hook(index))
        return hook

    def _grad_hook(self, index: int):
        def hook(grad: torch.Tensor) -> None:
            self._out_grad[index] = grad.detach().double().norm()
        return hook

    def grad_norms(self) -> torch.Tensor:
        """‖∂L/∂W_l‖ for every layer, as one tensor (zeros where a layer has no gradient yet)."""
        grads = [w.grad if w.grad is not None else torch.zeros_like(w) for w in self.weights]
        return torch.stack(torch._foreach_norm(grads, 2, dtype=torch.float64))

    def snapshot(self) -> None:
        """Keep a copy of the weights, to measure the next optimizer step against."""
        self._before = [w.detach().clone() for w in self.weights]

    def update_ratios(self) -> torch.Tensor:
        """‖W_after − W_before‖ / ‖W_before‖ per layer, for the step since `snapshot()`."""
        if self._before is None:
            raise RuntimeError("update_ratios() needs a snapshot() before the optimizer step")
        after = [w.detach() for w in self.weights]
        deltas = torch._foreach_sub(after, self._before)
        ratios = torch.stack(torch._foreach_norm(deltas)) / torch.stack(torch._foreach_norm(self._before))
        self._before = None
        return ratios

    def activation_stats(self) -> dict[str, torch.Tensor]:
        """`act_std`, `frac_dead` and `out_grad` (‖∂L/∂a_l‖) per layer from the last armed pass."""
        if not self._handles or any(v is None for v in self._act_std):
            return {}
        stats = {"act_std": torch.stack(self._act_std), "frac_dead": torch.stack(self._act_dead)}
        if all(v is not None for v in self._out_grad):
            stats["out_grad"] = torch.stack(self._out_grad)
        return stats

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def __enter__(self) -> "LayerProbe":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
