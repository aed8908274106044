"""torch.optim's SGD and Adam/AdamW for K arms stacked in one tensor, each arm with its own hyperparameters.

`engines.loop.batched` trains K arms as one model: every parameter is one tensor whose
leading dimension is the arm. When the arms share their optimizer's settings, a plain
`torch.optim` optimizer over those tensors is already K independent optimizers (SGD and
Adam are elementwise: arm k's slice only ever meets arm k's gradient and state). When
the arms differ in learning rate, weight decay, momentum or Nesterov, torch.optim cannot
say so (its hyperparameters are one number per group), so these classes carry them as
per-arm tensors, broadcast over each parameter's trailing dimensions.

They repeat torch.optim's single-tensor arithmetic op for op, choosing ops that round the
same way: `p.add_(g, alpha=-lr)` is a fused multiply-add on CPU, which `addcmul` with a
tensor factor reproduces (a multiply then an add would not). tests/test_batched.py checks
each arm bit for bit against torch.optim on that arm alone.
"""
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor

Numbers = Sequence[float] | float


def per_arm(values: Numbers, arms: int) -> list[float]:
    """One float per arm: a number for every arm, or a sequence of `arms` numbers."""
    if isinstance(values, (int, float)):
        return [float(values)] * arms
    values = [float(v) for v in values]
    if len(values) != arms:
        raise ValueError(f"{len(values)} values for {arms} arms")
    return values


def _shaped(values: list[float], like: Tensor) -> Tensor:
    """(K,) numbers as a tensor that broadcasts over `like` (K, ...), in its dtype (rounded as torch rounds a
    scalar). Kept per values, dtype and rank: the same few are asked for at every step."""
    key = (tuple(values), like.dtype, like.device, like.dim())
    if key not in _SHAPED:
        if len(_SHAPED) > 4096:  # Adam's step sizes change every step: do not keep them all
            _SHAPED.clear()
        _SHAPED[key] = torch.tensor(values, dtype=like.dtype, device=like.device).view(-1, *[1] * (like.dim() - 1))
    return _SHAPED[key]


_SHAPED: dict[tuple, Tensor] = {}


class _Stacked(torch.optim.Optimizer):
    """Common to both: one group, per-arm hyperparameters as lists of floats in it (so `lr` logs per arm)."""

    def __init__(self, params: Iterable[Tensor], arms: int, defaults: dict) -> None:
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("stacked optimizers take one group of stacked parameters")
        for p in self.param_groups[0]["params"]:
            if p.shape[0] != arms:
                raise ValueError(f"a parameter of shape {tuple(p.shape)} does not lead with {arms} arms")
        self.arms = arms


class StackedSGD(_Stacked):
    """`torch.optim.SGD(lr, momentum, nesterov, weight_decay)` per arm (dampening 0). An arm with
    momentum 0 steps on its gradient alone, as torch's SGD without momentum does."""

    def __init__(self, params: Iterable[Tensor], arms: int, lr: Numbers, momentum: Numbers = 0.0,
                 nesterov: Sequence[bool] | bool = False, weight_decay: Numbers = 0.0) -> None:
        flags = [bool(nesterov)] * arms if isinstance(nesterov, bool) else [bool(n) for n in nesterov]
        super().__init__(params, arms, dict(lr=per_arm(lr, arms), momentum=per_arm(momentum, arms), nesterov=flags,
                                            weight_decay=per_arm(weight_decay, arms)))

    @torch.no_grad()
    def step(self, closure=None) -> None:
        group = self.param_groups[0]
        for p in group["params"]:
            if p.grad is None:
                continue
            grad = p.grad
            if any(group["weight_decay"]):
                grad = grad.addcmul(p, _shaped(group["weight_decay"], p))  # grad.add(p, alpha=λ), per arm
            if any(group["momentum"]):
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = buf = grad.detach().clone()
                else:
                    buf = state["momentum_buffer"]
                    buf.mul_(_shaped(group["momentum"], p)).add_(grad)
                if any(group["nesterov"]):
                    ahead = grad.addcmul(buf, _shaped(group["momentum"], p))  # grad.add(buf, alpha=μ)
                    grad = torch.where(_shaped(group["nesterov"], p).bool(), ahead, buf)
                else:
                    grad = buf
            p.addcmul_(grad, _shaped([-lr for lr in group["lr"]], p))  # p.add_(grad, alpha=-lr)


class StackedAdam(_Stacked):
    """`torch.optim.Adam(lr, betas, eps, weight_decay)` per arm; a `decoupled` arm is AdamW's
    (p ← p·(1 − lr·λ) before the Adam step), any other adds λp to its gradient (Adam's L2).
    Betas and eps are shared by the arms."""

    def __init__(self, params: Iterable[Tensor], arms: int, lr: Numbers, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: Numbers = 0.0, decoupled: Sequence[bool] | bool = False) -> None:
        flags = [bool(decoupled)] * arms if isinstance(decoupled, bool) else [bool(d) for d in decoupled]
        super().__init__(params, arms, dict(lr=per_arm(lr, arms), betas=betas, eps=eps,
                                            weight_decay=per_arm(weight_decay, arms), decoupled=flags))

    @torch.no_grad()
    def step(self, closure=None) -> None:
        group = self.param_groups[0]
        (beta1, beta2), eps, lrs, decays = group["betas"], group["eps"], group["lr"], group["weight_decay"]
        for p in group["params"]:
            if p.grad is None:
                continue
            grad, state = p.grad, self.state[p]
            if not state:
                state.update(step=0, exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
            state["step"] += 1
            if any(wd and decoupled for wd, decoupled in zip(decays, group["decoupled"])):  # AdamW's arms
                p.mul_(_shaped([1 - lr * wd if decoupled else 1.0
                                for lr, wd, decoupled in zip(lrs, decays, group["decoupled"])], p))
            if any(wd and not decoupled for wd, decoupled in zip(decays, group["decoupled"])):  # Adam's L2 arms
                grad = grad.addcmul(p, _shaped([0.0 if decoupled else wd
                                                for wd, decoupled in zip(decays, group["decoupled"])], p))
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            bias_correction1 = 1 - beta1 ** state["step"]
            bias_correction2 = 1 - beta2 ** state["step"]
            denom = (exp_avg_sq.sqrt() / bias_correction2 ** 0.5).add_(eps)
            step_size = _shaped([-(lr / bias_correction1) for lr in lrs], p)
            p.addcdiv_(exp_avg * step_size, denom)  # p.addcdiv_(exp_avg, denom, value=-step_size), per arm
