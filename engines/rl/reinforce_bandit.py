"""The same REINFORCE estimator on a contextual bandit whose best arm a linear policy cannot pick.

Contexts are a fixed set of points x ∈ [−1, 1]²; each round one is drawn at random, the policy
picks one of K actions and gets a Bernoulli reward with mean

    μ_k(x) = 1/2 + 0.45·cos(2φ(x) − 2πk/K),   φ(x) the angle of x.

The doubled angle gives each action two *opposite* sectors of the plane, so the best action is
not a linear function of x: a softmax over linear scores (whose argmax regions are convex) cannot
follow it, a small MLP can. The set is finite, so the optimum E_x[max_k μ_k(x)] and every policy's
expected reward E_x[Σ_k π(k|x)·μ_k(x)] are exact sums, not estimates.

Each step draws a batch of rounds (one-step episodes) and ascends the REINFORCE gradient
mean_i (r_i − b(x_i))·∇log π(a_i|x_i) by Adam, with b = 0 or a learned state value v̂(x) (its own
MLP, fitted by squared error with its own Adam). `per_sample_variance` measures, at the same
weights, the spread of the per-round gradients with and without the baseline.
"""
import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import train

AMPLITUDE = 0.45
CONTEXTS = 512


@dataclass(frozen=True)
class Bandit:
    contexts: torch.Tensor  # (N, 2)
    means: torch.Tensor     # (N, K) μ_k(x)

    @property
    def optimum(self) -> float:
        return float(self.means.max(1).values.mean())

    def expected(self, probs: torch.Tensor) -> float:
        """E_x[Σ_k π(k|x)·μ_k(x)] for (N, K) action probabilities."""
        return float((probs * self.means).sum(1).mean())


def make_bandit(actions: int, seed: int) -> Bandit:
    generator = torch.Generator().manual_seed(seed)
    contexts = torch.rand(CONTEXTS, 2, generator=generator) * 2 - 1
    angle = torch.atan2(contexts[:, 1], contexts[:, 0])[:, None]  # (N, 1)
    offsets = 2 * math.pi * torch.arange(actions) / actions        # (K,)
    return Bandit(contexts, 0.5 + AMPLITUDE * torch.cos(2 * angle - offsets))


def mlp(inputs: int, hidden: int, outputs: int) -> nn.Module:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, outputs))


@dataclass(frozen=True)
class BanditArm:
    neural: bool    # an MLP policy, else softmax over linear scores
    baseline: bool  # a learned v̂(x) subtracted from the reward


def per_sample_variance(policy: nn.Module, x: torch.Tensor, actions: torch.Tensor,
                        weights: dict[str, torch.Tensor]) -> dict[str, float]:
    """Per round i, g_i = w_i·∇log π(a_i|x_i) at the current weights (torch.func: vmap of grad); for each
    weighting w, the total variance of the g_i over the batch (sum over parameters)."""
    params = {name: p.detach() for name, p in policy.named_parameters()}

    def logp(p: dict, xi: torch.Tensor, onehot: torch.Tensor) -> torch.Tensor:
        return (torch.log_softmax(functional_call(policy, p, (xi[None],))[0], -1) * onehot).sum()

    onehots = torch.nn.functional.one_hot(actions, policy(x[:1]).shape[-1]).to(x.dtype)
    per_round = vmap(grad(logp), in_dims=(None, 0, 0))(params, x, onehots)  # name -> (B, *shape)
    flat = torch.cat([g.reshape(len(x), -1) for g in per_round.values()], 1)  # (B, params)
    return {f"grad_var/{name}": float((w[:, None] * flat).var(0, correction=1).sum()) for name, w in weights.items()}


def train_bandit(spec: BanditArm, bandit: Bandit, steps: int, batch: int, lr: float, hidden: int, log_every: int,
                 seed: int) -> Iterator[StepRecord | Diverged | None]:
    """REINFORCE on `bandit` for `steps` batches of `batch` rounds; logs the exact expected reward of the
    policy, the batch's mean reward, and (with a baseline) both estimators' per-round gradient variance."""
    actions = bandit.means.shape[1]
    with torch.random.fork_rng(devices=[]):  # the initial weights from the seed, the global RNG left as it was
        torch.manual_seed(seed)
        policy = mlp(2, hidden, actions) if spec.neural else nn.Linear(2, actions)
        value = mlp(2, hidden, 1) if spec.baseline else None
    params = list(policy.parameters()) + (list(value.parameters()) if value is not None else [])
    optimizer = torch.optim.Adam(params, lr=lr)
    generator = torch.Generator().manual_seed(seed + 1)

    def rounds() -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        while True:
            picked = torch.randint(len(bandit.contexts), (batch,), generator=generator)
            x = bandit.contexts[picked]
            with torch.no_grad():
                chosen = torch.multinomial(torch.softmax(policy(x), -1), 1, generator=generator)[:, 0]
            reward = torch.bernoulli(bandit.means[picked, chosen], generator=generator)
            yield x, chosen, reward

    last: dict = {}

    def objective(round_: tuple, logging: bool):
        x, chosen, reward = round_
        logps = torch.log_softmax(policy(x), -1).gather(1, chosen[:, None])[:, 0]  # (B,)
        loss = torch.zeros((), dtype=logps.dtype)
        weight = reward
        if value is not None:
            estimate = value(x)[:, 0]
            weight = reward - estimate.detach()
            loss = loss + ((reward - estimate) ** 2).mean()  # v̂'s own squared error (its own parameters)
        loss = loss - (weight * logps).mean()  # the REINFORCE surrogate: its gradient is −mean_i w_i ∇log π
        last.update(x=x, chosen=chosen, reward=reward, weight=weight)
        return loss, {"batch_reward": reward.mean()}

    def on_log(step: int) -> dict[str, float]:
        with torch.no_grad():
            out = {"expected_reward": bandit.expected(torch.softmax(policy(bandit.contexts), -1))}
        if value is not None:
            out.update(per_sample_variance(policy, last["x"], last["chosen"],
                                           {"plain": last["reward"], "baseline": last["weight"]}))
        return out

    yield from train(policy, optimizer, rounds(), objective, steps, log_every=log_every, on_log=on_log, window=True)
