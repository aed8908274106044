"""REINFORCE from scratch on Sutton & Barto's short corridor with switched actions (Example 13.1).

The corridor: start S, a second state where the actions are *switched* (right moves left, left
moves right), a third state S2, then the goal G. Every step costs −1 (γ = 1). Left in S bumps
into the wall and stays. The policy sees the same features in every state, so it is one number,
p = P(right) = softmax(θ)[right] over two action preferences θ = (θ_right, θ_left).

For a fixed p the values solve a 3×3 linear system (the Bellman equations, `values`):

    v(S)  = −1 + p·v(1) + (1 − p)·v(S)
    v(1)  = −1 + p·v(S) + (1 − p)·v(S2)
    v(S2) = −1 + (1 − p)·v(1)            (right in S2 reaches G, value 0)

whose solution is v(S) = (2p − 4) / (p(1 − p)); its maximum is at p* = 2 − √2 ≈ 0.586 with
v* = −(6 + 4√2) ≈ −11.66. `optimum` finds both by solving the system on a grid of p and refining
by golden section: no closed form is used, the tests hold it to one.

REINFORCE (Williams 1992) climbs J(θ) = v_θ(S) by its Monte-Carlo gradient: run an episode,
then θ ← θ + α·Σ_t G_t·∇log π(A_t|θ), G_t the return from step t. The gradient comes from
torch autograd on the surrogate −Σ_t G_t·log π(A_t). With a baseline, G_t becomes δ_t = G_t −
v̂(S_t), where v̂ is a table of state values learned by its own step size, v̂(S_t) ← v̂(S_t) +
α_w·δ_t. Any baseline that does not depend on the action keeps the gradient's mean and can
shrink its variance; `gradient_samples` measures both estimators' per-episode gradients at
the same θ.
"""
import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from engines.loop.records import Diverged, StepRecord, divergence

RIGHT, LEFT = 0, 1
GOAL = 3
MAX_EPISODE_STEPS = 1000  # an episode this long is cut there (p near 0 or 1 never reaches G)
EDGE = 1e-6               # p is clipped to [EDGE, 1 − EDGE] where values are solved (v → −∞ at 0 and 1)
GRID = 2001               # points of p the Bellman system is solved at before the refinement


def values(p: torch.Tensor) -> torch.Tensor:
    """(n,) probabilities of right -> (n, 3) values of S, the switched state and S2, by
    torch.linalg.solve of (I − P_p)·v = r."""
    p = torch.as_tensor(p, dtype=torch.float64).reshape(-1).clamp(EDGE, 1 - EDGE)
    q, zero, one = 1 - p, torch.zeros_like(p), torch.ones_like(p)
    system = torch.stack([torch.stack([p, -p, zero], -1),     # S: left stays, right to 1
                          torch.stack([-p, one, -q], -1),     # 1: switched, right back to S, left on to S2
                          torch.stack([zero, -q, one], -1)], -2)  # S2: left back to 1, right to G (0)
    return torch.linalg.solve(system, -torch.ones(len(p), 3, dtype=torch.float64))


def optimum(tolerance: float = 1e-12) -> tuple[float, float]:
    """(p*, v*(S)): v(S) solved on a grid of p, then the best bracket refined by golden section."""
    grid = torch.linspace(0, 1, GRID, dtype=torch.float64)[1:-1]
    best = int(values(grid)[:, 0].argmax())
    low, high = float(grid[max(0, best - 1)]), float(grid[min(len(grid) - 1, best + 1)])
    ratio = (math.sqrt(5) - 1) / 2
    start = lambda p: float(values(torch.tensor([p]))[0, 0])  # noqa: E731
    while high - low > tolerance:
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        if start(a) > start(b):
            high = b
        else:
            low = a
    p_star = (low + high) / 2
    return p_star, start(p_star)


def value_curve(points: int = 99) -> Iterator[StepRecord]:
    """One record per p on a grid (step k: p = (k + 1)/(points + 1)): v(S), v(1), v(S2) solved."""
    grid = torch.arange(1, points + 1, dtype=torch.float64) / (points + 1)
    for k, (p, row) in enumerate(zip(grid.tolist(), values(grid).tolist())):
        yield StepRecord(k, {"curve/p": p, "curve/v_start": row[0], "curve/v_switched": row[1], "curve/v_s2": row[2]})


class Uniforms:
    """U(0, 1) draws from a local torch.Generator, taken in blocks (one draw per corridor step)."""

    def __init__(self, seed: int, block: int = 4096) -> None:
        self.generator, self.block, self.buffer = torch.Generator().manual_seed(seed), block, []

    def __call__(self) -> float:
        if not self.buffer:
            self.buffer = torch.rand(self.block, generator=self.generator, dtype=torch.float64).tolist()[::-1]
        return self.buffer.pop()


def episode(p: float, uniform: Uniforms) -> tuple[list[int], list[int]]:
    """One episode at P(right) = p: the states visited (0 = S, 1 = switched, 2 = S2) and the actions."""
    state, states, actions = 0, [], []
    while state != GOAL and len(states) < MAX_EPISODE_STEPS:
        right = uniform() < p
        states.append(state)
        actions.append(RIGHT if right else LEFT)
        if state == 0:
            state = 1 if right else 0
        elif state == 1:
            state = 0 if right else 2
        else:
            state = GOAL if right else 1
    return states, actions


def returns_to_go(length: int) -> list[float]:
    """G_t for a −1-per-step episode of `length` steps: −(length − t)."""
    return [-float(length - t) for t in range(length)]


def scores(theta: torch.Tensor) -> torch.Tensor:
    """(2, 2): row a is ∇_θ log π(a|θ), by autograd (the same in every state)."""
    rows = []
    for action in (RIGHT, LEFT):
        leaf = theta.detach().clone().requires_grad_(True)
        torch.log_softmax(leaf, 0)[action].backward()
        rows.append(leaf.grad)
    return torch.stack(rows)


def gradient_samples(theta: torch.Tensor, table: list[float], uniform: Uniforms, count: int) -> dict[str, float]:
    """At one θ, `count` fresh episodes: each one's gradient estimate Σ_t w_t·∇log π(A_t) with w_t = G_t
    (no baseline) and w_t = G_t − v̂(S_t) (the table). Their total variance (trace of the covariance over
    the episodes) and mean along the right-preference direction θ_right − θ_left."""
    p = float(torch.softmax(theta, 0)[RIGHT])
    score = scores(theta)
    plain, based = [], []
    for _ in range(count):
        states, actions = episode(p, uniform)
        returns = returns_to_go(len(states))
        acted = torch.tensor(actions)
        weights = torch.tensor(returns, dtype=torch.float64)
        baseline = torch.tensor([table[s] for s in states], dtype=torch.float64)
        plain.append(weights @ score[acted])
        based.append((weights - baseline) @ score[acted])
    out = {}
    for name, samples in (("plain", torch.stack(plain)), ("baseline", torch.stack(based))):
        out[f"grad_var/{name}"] = float(samples.var(0, correction=1).sum())
        out[f"grad_mean/{name}"] = float(samples.mean(0) @ torch.tensor([1.0, -1.0], dtype=torch.float64)) / 2
    return out


@dataclass(frozen=True)
class CorridorArm:
    lr: float                  # α_θ: the policy's step size
    lr_value: float = 0.0      # α_w: the baseline table's step size; 0: no baseline
    measure_variance: int = 0  # fresh episodes per log for `gradient_samples` (0: not measured)


def train_corridor(spec: CorridorArm, episodes: int, init_right: float, log_every: int,
                   seed: int) -> Iterator[StepRecord | Diverged | None]:
    """REINFORCE for `episodes` episodes, one update each; a record every `log_every` episodes: p and the
    exact v(S) of the policy after the update, and over the log window the mean return, mean exact v(S)
    and mean p of the policies that played, the longest episode and how many were cut."""
    uniform, extra = Uniforms(seed), Uniforms(seed + 7919)
    theta = torch.tensor([math.log(init_right / (1 - init_right)), 0.0], dtype=torch.float64, requires_grad=True)
    table = [0.0, 0.0, 0.0]  # v̂ of S, the switched state, S2
    window: list[tuple[float, float, int]] = []
    for index in range(episodes):
        with torch.no_grad():
            p = float(torch.softmax(theta, 0)[RIGHT])
        states, actions = episode(p, uniform)
        returns = returns_to_go(len(states))
        weights = returns
        if spec.lr_value > 0:
            weights = [g - table[s] for g, s in zip(returns, states)]  # δ_t, with v̂ before this episode's update
            for delta, s in zip(weights, states):
                table[s] += spec.lr_value * delta
        logps = torch.log_softmax(theta, 0)[torch.tensor(actions)]  # (T,)
        surrogate = -(torch.tensor(weights, dtype=torch.float64) * logps).sum()
        surrogate.backward()
        with torch.no_grad():
            theta -= spec.lr * theta.grad  # descent on the surrogate = ascent on J: its gradient is −Σ w_t ∇log π
        theta.grad = None
        window.append((p, returns[0], len(states)))
        if index % log_every and index != episodes - 1:
            yield None
            continue
        yield record(index, theta, window, table if spec.lr_value > 0 else None,
                     gradient_samples(theta.detach(), table, extra, spec.measure_variance) if spec.measure_variance else {})
        if (diverged := divergence(index, {"theta": float(theta.detach().abs().sum())})) is not None:
            yield diverged
            return
        window = []


def record(index: int, theta: torch.Tensor, window: list[tuple[float, float, int]], table: list[float] | None,
           extra: dict[str, float]) -> StepRecord:
    with torch.no_grad():
        p = float(torch.softmax(theta, 0)[RIGHT])
    played = torch.tensor([w[0] for w in window], dtype=torch.float64)
    metrics = {"p_right": p, "v_start": float(values(torch.tensor([p]))[0, 0]),
               "window/p_right": float(played.mean()), "window/v_start": float(values(played)[:, 0].mean()),
               "window/return": sum(w[1] for w in window) / len(window),
               "window/longest": float(max(w[2] for w in window)),
               "window/cut": float(sum(w[2] >= MAX_EPISODE_STEPS for w in window)), **extra}
    if table is not None:
        metrics.update({"baseline/v_start": table[0], "baseline/v_switched": table[1], "baseline/v_s2": table[2]})
    return StepRecord(index, metrics)
