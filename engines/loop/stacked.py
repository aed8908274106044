"""Layers for K arms as one model: every weight carries a leading arm dimension.

Each arm's module is built exactly as the sequential path builds it (its own seed, its own
init), then `stacked` copies the arms' tensors into one leaf (K, ...): the batched model
starts where K separate models would. The layers compute every arm in one call:

- `StackedLinear`: y_k = x_k W_kᵀ + b_k for all k by one `torch.baddbmm` (on these sizes its
  output equals `F.linear`'s bit for bit, tests/test_batched.py). The input is shared by every
  arm, (batch, in), or per arm, (K, ..., in); the output is (K, ..., out).
- `StackedEmbedding`: per-arm tables (K, vocab, dim), looked up by `F.embedding` on the
  tables laid end to end (token t of arm k is row k·vocab + t), so the backward pass is
  embedding's own.
- `StackedMLP`: `DeepMLP`-shaped nets (Linear → activation, then a head) from K built ones.
- `arm_cross_entropy`, `arm_accuracy`: the per-arm losses and scores a batched objective returns.
- `ArmProbe`: `LayerProbe`'s weight-gradient norms and update-to-weight ratios, per arm.

Measured on this 2-core machine (bench/sweep_bench.py): for our tiny models a step is mostly
fixed per-op cost, so baddbmm over K arms costs about what one arm's step does, while
`torch.func.vmap` over `functional_call` costs ~2.4x a step at any K in dispatch alone.
"""
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def stacked(tensors: Sequence[Tensor], requires_grad: bool = True) -> Tensor:
    """One leaf (K, ...) holding each arm's tensor, detached from the modules it came from."""
    return torch.stack([t.detach() for t in tensors]).requires_grad_(requires_grad)


def arm_tensor(values: Sequence[float], like: Tensor) -> Tensor:
    """Per-arm numbers (K,) shaped to broadcast against a (K, ...) tensor like `like`, in its dtype."""
    return torch.tensor(list(values), dtype=like.dtype).view(-1, *[1] * (like.dim() - 1))


class _ArmLinear(torch.autograd.Function):
    """y = x Wᵀ + b per arm, with the backward pass `F.linear`'s own: ∂W = gᵀ x as `mm` computes it for a
    transposed weight (bmm's default backward forms (xᵀ g)ᵀ, which rounds differently)."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:  # (K, rows, in), (K, out, in), (K, out)
        # ctx-style forward: a `setup_context` would cost an inspect.signature per call (~0.1 ms, a third of a step)
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        if bias is None:
            return torch.bmm(x, weight.transpose(1, 2))
        return torch.baddbmm(bias[:, None, :], x, weight.transpose(1, 2))

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, weight = ctx.saved_tensors
        grad_x = torch.bmm(grad, weight) if ctx.needs_input_grad[0] else None
        grad_weight = torch.bmm(grad.transpose(1, 2), x) if ctx.needs_input_grad[1] else None
        grad_bias = grad.sum(1) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_weight, grad_bias


def arm_linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """`F.linear(x_k, W_k, b_k)` per arm: x (K, rows, in), weight (K, out, in) -> (K, rows, out); forward and
    backward round as `F.linear` does (also for x Wᵀ products that are no layer: similarity scores a bᵀ)."""
    return _ArmLinear.apply(x, weight, bias)


class StackedLinear(nn.Module):
    """K `nn.Linear`s of one shape as one: weight (K, out, in), bias (K, out) or None."""

    def __init__(self, linears: Sequence[nn.Linear], requires_grad: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(stacked([l.weight for l in linears]), requires_grad)
        has_bias = linears[0].bias is not None
        self.bias = nn.Parameter(stacked([l.bias for l in linears]), requires_grad) if has_bias else None

    @property
    def arms(self) -> int:
        return self.weight.shape[0]

    def forward(self, x: Tensor) -> Tensor:
        shared = x.dim() == 2  # (batch, in): every arm reads the same input
        flat = x.expand(self.arms, -1, -1) if shared else x.reshape(self.arms, -1, x.shape[-1])  # (K, rows, in)
        out = arm_linear(flat, self.weight, self.bias)  # (K, rows, out)
        return out if shared else out.view(*x.shape[:-1], out.shape[-1])


class StackedEmbedding(nn.Module):
    """K `nn.Embedding`s of one shape: tokens (batch, ...) shared, or (K, batch, ...) per arm -> (K, batch, ..., dim)."""

    def __init__(self, embeddings: Sequence[nn.Embedding], requires_grad: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(stacked([e.weight for e in embeddings]), requires_grad)

    def forward(self, tokens: Tensor, shared: bool = True) -> Tensor:
        arms, vocab = self.weight.shape[:2]
        if shared:
            tokens = tokens.expand(arms, *tokens.shape)
        offsets = (torch.arange(arms) * vocab).view(-1, *[1] * (tokens.dim() - 1))
        return F.embedding(tokens + offsets, self.weight.view(arms * vocab, -1))


class StackedMLP(nn.Module):
    """Linear → activation per hidden layer, then a linear head, for K nets. `layers[k]` is arm k's
    Linears in order, the head last: `[*m.linears, m.head]` of a `DeepMLP` without norms or residuals,
    the Linears of an `nn.Sequential(Linear, ReLU, …, Linear)`."""

    def __init__(self, layers: Sequence[Sequence[nn.Linear]], activation: Callable[[Tensor], Tensor] = torch.relu
                 ) -> None:
        super().__init__()
        self.linears = nn.ModuleList(StackedLinear([arm[i] for arm in layers]) for i in range(len(layers[0]) - 1))
        self.head = StackedLinear([arm[-1] for arm in layers])
        self.activation = activation

    def forward(self, x: Tensor) -> Tensor:
        for linear in self.linears:
            x = self.activation(linear(x))  # (K, batch, width)
        return self.head(x)  # (K, batch, out)


def arm_cross_entropy(logits: Tensor, targets: Tensor, exact_value: bool = False) -> Tensor:
    """`F.cross_entropy(logits_k, targets)` per arm, (K,), from logits (K, batch, classes) and targets (batch,)
    or (K, batch). Its gradient is cross_entropy's bit for bit. Its value may differ in the last bit (nll_loss
    sums the batch in its own cascade) unless `exact_value` (for logged steps): then each arm's value is
    cross_entropy's own, m + (e − m) = e exactly, with the gradient still flowing through m."""
    index = targets.expand(logits.shape[:2])[..., None]  # (K, batch, 1)
    if exact_value and not (torch.is_grad_enabled() and logits.requires_grad):  # a value alone: cross_entropy's
        return torch.stack([F.cross_entropy(arm, target) for arm, target in zip(logits, index[..., 0])])
    mean = -logits.log_softmax(-1).gather(-1, index).squeeze(-1).mean(1)
    if not exact_value:
        return mean
    with torch.no_grad():
        exact = torch.stack([F.cross_entropy(arm, target) for arm, target in zip(logits, index[..., 0])])
    return mean + (exact - mean.detach())  # the difference is exact (Sterbenz): the sum rounds to `exact`


def arm_accuracy(logits: Tensor, targets: Tensor) -> Tensor:
    """Per arm, the share of rows whose argmax is the target: (K,)."""
    return (logits.argmax(dim=-1) == targets).float().mean(1)


class ArmProbe:
    """Per arm and layer: ‖∂L/∂W_l‖ (float64 sums) and ‖ΔW_l‖/‖W_l‖ of one step, by `LayerProbe`'s own fused
    calls on every arm's slice of every layer at once (so each arm's numbers are `LayerProbe`'s)."""

    def __init__(self, weights: Sequence[Tensor]) -> None:
        self.weights = list(weights)  # each (K, out, in)
        self.arms = len(self.weights[0])
        self._before: list[Tensor] | None = None

    def _slices(self, tensors: Sequence[Tensor]) -> list[Tensor]:
        return [t[k] for k in range(self.arms) for t in tensors]  # arm-major: arm 0's layers, then arm 1's, ...

    def grad_norms(self) -> Tensor:
        """(K, layers), zeros where a layer has no gradient yet."""
        grads = [w.grad if w.grad is not None else torch.zeros_like(w) for w in self.weights]
        norms = torch._foreach_norm(self._slices(grads), 2, dtype=torch.float64)
        return torch.stack(norms).view(self.arms, len(self.weights))

    def snapshot(self) -> None:
        self._before = torch._foreach_mul(self._slices([w.detach() for w in self.weights]), 1.0)

    def update_ratios(self) -> Tensor:
        """(K, layers) for the step since `snapshot()`."""
        if self._before is None:
            raise RuntimeError("update_ratios() needs a snapshot() before the optimizer step")
        deltas = torch._foreach_sub(self._slices([w.detach() for w in self.weights]), self._before)
        ratios = torch.stack(torch._foreach_norm(deltas)) / torch.stack(torch._foreach_norm(self._before))
        self._before = None
        return ratios.view(self.arms, len(self.weights))
