"""A tiny mixture-of-experts layer, trained on a clustered regression task.

**The layer.** A router (one Linear, model width → E logits) scores every token; each token
goes to its top-k experts (small MLPs, width → hidden → width). Top-1 (Switch, Fedus et al.
2021) scales the chosen expert's output by its router probability p_i; top-k > 1 (Shazeer et
al. 2017; GShard) by the k probabilities renormalized to sum to 1. The layer sits on a
residual: a token adds its experts' weighted outputs to itself.

**Capacity.** Every expert takes at most C = ⌈capacity_factor · T · k / E⌉ of a batch's T
tokens. Assignments are served first choices first, then second choices, each in token order;
an assignment past its expert's C is dropped: that expert's output is not added, and a token
dropped by every choice passes through on the residual alone.

**Losses on the router.** With f_i the fraction of the T·k assignments the router sends to
expert i (before capacity) and P_i the mean router probability of expert i over the tokens,
the Switch load-balancing loss is α·E·Σ_i f_i·P_i: at perfect balance (f_i = P_i = 1/E) it is
exactly α, and it grows as the load concentrates. The router z-loss (ST-MoE, Zoph et al.
2022) is the mean over tokens of (logsumexp of the router logits)²: it keeps the logits small.

**The task.** Inputs come from C Gaussian clusters, each with its own target function (a
few random sine waves), so experts that each take a cluster or two can specialize. Dense
baselines are the same network with one MLP in place of the layer: hidden width h (the
active parameters of one expert, what a top-1 token uses) or E·h (all the experts' parameters).
"""
import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import train

CAPACITY_FACTORS = (1.0, 1.25, 2.0)  # the drop fractions every log measures
N_FEATURES, N_WAVES = 8, 3


# --- router losses and dispatch -------------------------------------------------------------
def load_fractions(choices: torch.Tensor, n_experts: int) -> torch.Tensor:
    """f_i: the share of all T·k assignments in `choices` (T, k) that go to expert i: (E,)."""
    counts = torch.bincount(choices.flatten(), minlength=n_experts).to(torch.get_default_dtype())
    return counts / choices.numel()


def balance_loss(fractions: torch.Tensor, mean_probs: torch.Tensor, alpha: float) -> torch.Tensor:
    """Switch's α·E·Σ_i f_i·P_i: exactly α when f_i = P_i = 1/E."""
    return alpha * fractions.numel() * (fractions * mean_probs).sum()


def z_loss(logits: torch.Tensor) -> torch.Tensor:
    """ST-MoE's router z-loss: mean over tokens of (logsumexp_i logits_i)²."""
    return torch.logsumexp(logits, dim=-1).square().mean()


def capacity(capacity_factor: float, tokens: int, k: int, n_experts: int) -> int:
    return math.ceil(capacity_factor * tokens * k / n_experts)


def kept_mask(choices: torch.Tensor, n_experts: int, cap: int) -> torch.Tensor:
    """(..., T, k) bool: which assignments of `choices` (..., T, k) fit their expert's capacity `cap`,
    each group of T tokens on its own. First choices are served before second choices, each in token
    order (GShard's priority)."""
    *lead, tokens, k = choices.shape
    ordered = choices.transpose(-1, -2).reshape(*lead, k * tokens)  # all first choices, then all second choices
    one_hot = F.one_hot(ordered, n_experts)  # (..., k·T, E)
    position = (one_hot.cumsum(dim=-2) - 1).gather(-1, ordered[..., None]).squeeze(-1)  # place in its expert's queue
    return (position < cap).reshape(*lead, k, tokens).transpose(-1, -2)


def dropped_fraction(choices: torch.Tensor, n_experts: int, capacity_factor: float) -> float:
    """The share of the assignments in `choices` (..., T, k) past capacity at this factor, the
    capacity counted per group of T tokens."""
    tokens, k = choices.shape[-2:]
    kept = kept_mask(choices, n_experts, capacity(capacity_factor, tokens, k, n_experts))
    return (kept.numel() - int(kept.sum())) / kept.numel()


def expert_mlp(width: int, hidden: int) -> nn.Sequential:
    """width → hidden → width, the second Linear without bias: a dense baseline of hidden E·h holds
    exactly the parameters of E experts of hidden h."""
    return nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width, bias=False))


class Experts(nn.Module):
    """E expert MLPs (`expert_mlp`'s shape), their weights stacked so that all of them run in two
    batched matrix products."""

    def __init__(self, n_experts: int, width: int, hidden: int) -> None:
        super().__init__()
        mlps = [expert_mlp(width, hidden) for _ in range(n_experts)]  # each initialised as nn.Linear does
        self.w_in = nn.Parameter(torch.stack([m[0].weight.T for m in mlps]).detach())  # (E, width, hidden)
        self.b_in = nn.Parameter(torch.stack([m[0].bias for m in mlps]).detach()[:, None, :])  # (E, 1, hidden)
        self.w_out = nn.Parameter(torch.stack([m[2].weight.T for m in mlps]).detach())  # (E, hidden, width)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h (T, width) → every expert's output on every token: (E, T, width)."""
        return F.gelu(torch.matmul(h, self.w_in) + self.b_in) @ self.w_out

    def one(self, e: int, h: torch.Tensor) -> torch.Tensor:
        """Expert e alone on h (T, width): (T, width)."""
        return F.gelu(h @ self.w_in[e] + self.b_in[e]) @ self.w_out[e]


@dataclass
class Routing:
    """What one forward pass of the layer decided, for the losses and the logs."""
    logits: torch.Tensor   # (T, E)
    probs: torch.Tensor    # (T, E)
    choices: torch.Tensor  # (T, k) expert indices, best first
    gates: torch.Tensor    # (T, k) the weights of the chosen experts' outputs
    kept: torch.Tensor     # (T, k) bool: within capacity


class MoELayer(nn.Module):
    def __init__(self, width: int, hidden: int, n_experts: int, k: int, capacity_factor: float | None) -> None:
        super().__init__()
        self.n_experts, self.k, self.capacity_factor = n_experts, k, capacity_factor
        self.router = nn.Linear(width, n_experts)
        nn.init.zeros_(self.router.bias)  # no expert favoured before training
        self.experts = Experts(n_experts, width, hidden)
        self.routing: Routing | None = None

    def route(self, h: torch.Tensor) -> Routing:
        logits = self.router(h)  # (T, E)
        probs = logits.softmax(dim=-1)
        top, choices = probs.topk(self.k, dim=-1)  # (T, k)
        gates = top if self.k == 1 else top / top.sum(dim=-1, keepdim=True)
        tokens = h.shape[0]
        if self.capacity_factor is None:
            kept = torch.ones_like(choices, dtype=torch.bool)
        else:
            kept = kept_mask(choices, self.n_experts, capacity(self.capacity_factor, tokens, self.k, self.n_experts))
        return Routing(logits, probs, choices, gates, kept)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h (T, width) → h + Σ_{kept choices} gate · expert(h). Every expert runs on every token (at
        this size two batched products cost less than gathering); the (T, E) combine weights are
        zero except at a token's kept choices."""
        routing = self.routing = self.route(h)
        weights = torch.zeros_like(routing.probs).scatter_add(1, routing.choices, routing.gates * routing.kept)  # (T, E)
        return h + torch.einsum("te,etw->tw", weights, self.experts(h))


class Net(nn.Module):
    """stem (features → width) → mixer (the MoE layer, or h + MLP(h)) → head (width → 1)."""

    def __init__(self, stem: nn.Linear, mixer: nn.Module, head: nn.Linear) -> None:
        super().__init__()
        self.stem, self.mixer, self.head = stem, mixer, head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.mixer(self.stem(x)))


class Residual(nn.Module):
    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.block(h)


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# --- the task -----------------------------------------------------------------------------
class ClusterTask:
    """`clusters` Gaussian clusters in R^8 (centres N(0, spread²·I), points N(0, I) around them, all
    divided by `spread`, so the inputs are of unit scale); cluster
    c's target is Σ_j a_cj·sin(w_cj · x + φ_cj). A training set and a held-out set of each size."""

    def __init__(self, clusters: int, points: int, seed: int, spread: float = 3.0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.spread = spread
        self.centres = torch.randn(clusters, N_FEATURES, generator=generator) * spread  # (C, features)
        self.waves = torch.randn(clusters, N_FEATURES, N_WAVES, generator=generator) * spread / math.sqrt(N_FEATURES)  # (C, features, waves)
        self.phases = torch.rand(clusters, N_WAVES, generator=generator) * 2 * math.pi
        self.amplitudes = torch.randn(clusters, N_WAVES, generator=generator) / math.sqrt(N_WAVES)
        self.x, self.cluster, self.y = self.sample(points, generator)
        self.test_x, self.test_cluster, self.test_y = self.sample(points, generator)

    def sample(self, points: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        cluster = torch.randint(len(self.centres), (points,), generator=generator)
        x = (self.centres[cluster] + torch.randn(points, N_FEATURES, generator=generator)) / self.spread  # (points, features)
        angles = torch.einsum("pf,pfw->pw", x, self.waves[cluster]) + self.phases[cluster]  # (points, waves)
        y = (self.amplitudes[cluster] * torch.sin(angles)).sum(dim=1, keepdim=True)  # (points, 1)
        return x, cluster, y

    def batches(self, batch_size: int, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Shuffled minibatches forever, in an order fixed by `seed` (every arm sees the same)."""
        generator = torch.Generator().manual_seed(seed)
        while True:
            order = torch.randperm(len(self.x), generator=generator)
            for start in range(0, len(order) - batch_size + 1, batch_size):
                index = order[start:start + batch_size]
                yield self.x[index], self.y[index]


# --- the arms -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ArmSpec:
    """One arm: an MoE (top-k, with or without the balancing loss) or a dense MLP of `dense_hidden`."""
    k: int = 1
    alpha: float = 0.0          # balancing-loss weight (0: none)
    z_coef: float = 0.0         # z-loss weight (0: recorded, not trained on)
    dense_hidden: int = 0       # > 0: a dense arm of this hidden width instead of the MoE layer


def build(spec: ArmSpec, *, width: int, hidden: int, n_experts: int, capacity_factor: float | None, seed: int) -> Net:
    with torch.random.fork_rng(devices=[]):  # the same init stream for every arm, global RNG left as it was
        torch.manual_seed(seed)
        stem, head = nn.Linear(N_FEATURES, width), nn.Linear(width, 1)  # the same in every arm
        nn.init.zeros_(stem.bias)  # no offset common to every token, which would tilt the router at once
        if spec.dense_hidden:
            return Net(stem, Residual(expert_mlp(width, spec.dense_hidden)), head)
        return Net(stem, MoELayer(width, hidden, n_experts, spec.k, capacity_factor), head)


def train_arm(spec: ArmSpec, *, clusters: int, points: int, width: int, hidden: int, n_experts: int,
              capacity_factor: float | None, batch_size: int, lr: float, steps: int, seed: int,
              log_every: int) -> Iterator[StepRecord | Diverged | None]:
    """Adam on minibatches of the cluster task; every log adds the held-out MSE and, for an MoE arm,
    the load per expert (`load/expert_XX`, f_i on the held-out set), the largest share, the
    balancing loss at α = 1 (`aux_unit`), the z-loss and the dropped share at each factor in
    CAPACITY_FACTORS (`dropped/cf_1.25`), measured on held-out batches of `batch_size` tokens."""
    task = ClusterTask(clusters, points, seed + 1)
    model = build(spec, width=width, hidden=hidden, n_experts=n_experts, capacity_factor=capacity_factor, seed=seed)
    layer = model.mixer if isinstance(model.mixer, MoELayer) else None

    def objective(batch: tuple[torch.Tensor, torch.Tensor], logging: bool):
        x, y = batch
        mse = F.mse_loss(model(x), y)
        loss = mse
        if layer is not None and (spec.alpha or spec.z_coef):
            routing = layer.routing
            fractions = load_fractions(routing.choices, n_experts)
            loss = loss + balance_loss(fractions, routing.probs.mean(dim=0), spec.alpha) + spec.z_coef * z_loss(routing.logits)
        return loss, {"train_mse": mse.detach()}

    @torch.no_grad()
    def on_log(step: int) -> dict[str, float | torch.Tensor]:
        metrics: dict[str, float | torch.Tensor] = {"test_mse": F.mse_loss(model(task.test_x), task.test_y)}
        if step == 0:
            metrics["parameters"] = float(parameter_count(model.mixer))
            metrics["target_var"] = float(task.test_y.var(unbiased=False))
        if layer is None:
            return metrics
        routing = layer.route(model.stem(task.test_x))
        fractions = load_fractions(routing.choices, n_experts)
        metrics.update({f"load/expert_{e:02d}": f for e, f in enumerate(fractions.tolist())})
        metrics["top_share"] = fractions.max()
        metrics["aux_unit"] = balance_loss(fractions, routing.probs.mean(dim=0), 1.0)
        metrics["z_loss"] = z_loss(routing.logits)
        groups = routing.choices[:len(routing.choices) // batch_size * batch_size].reshape(-1, batch_size, spec.k)
        for factor in CAPACITY_FACTORS:
            metrics[f"dropped/cf_{factor:g}"] = dropped_fraction(groups, n_experts, factor)
        return metrics

    # SGD, not Adam: an expert's step then grows with the tokens it gets (Adam's ≈ lr-sized steps would
    # hide the rich-get-richer loop that makes an unbalanced router collapse)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    yield from train(model, optimizer, task.batches(batch_size, seed + 2), objective, steps, log_every=log_every,
                     on_log=on_log)
