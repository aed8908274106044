"""The Chinchilla form of a scaling law and what follows from it, in closed form (numpy only: the page draws with it).

    L(N, D) = E + A / N^α + B / D^β          (Hoffmann et al. 2022, Approach 3)

E is the loss no model reaches below (the source's entropy rate, if the form holds); A/N^α what a
model of N parameters lacks with unlimited data; B/D^β what D tokens lack with an unlimited model.
With compute C ≈ 6·N·D (a forward and a backward pass: 6 FLOPs per parameter per token), the loss
along an isoFLOP curve is L(N, C/6N); its minimum over N is where ∂L/∂N = 0:

    N_opt = G · (C/6)^a,   D_opt = (C/6)^b / G,   G = (α·A / (β·B))^(1/(α+β)),
    a = β/(α+β),   b = α/(α+β)                     (a + b = 1)

Chinchilla measured a ≈ b ≈ 0.5 (≈ 20 tokens per parameter); Kaplan et al. 2020 found N_opt ∝ C^0.73
counting non-embedding parameters at small scale (Pearce & Song 2024: much of the gap is that count).
"""
from dataclasses import dataclass

import numpy as np

FLOPS_PER_PARAM_TOKEN = 6.0
CHINCHILLA_A = CHINCHILLA_B = 0.5   # N_opt ∝ C^0.5, D_opt ∝ C^0.5 (Hoffmann et al. 2022)
KAPLAN_A = 0.73                     # N_opt ∝ C^0.73 (Kaplan et al. 2020), so D_opt ∝ C^0.27
FIELDS = ("E", "A", "B", "alpha", "beta")


@dataclass(frozen=True)
class Law:
    E: float
    A: float
    B: float
    alpha: float
    beta: float

    def loss(self, n, d):
        return self.E + self.A / np.power(n, self.alpha) + self.B / np.power(d, self.beta)

    @property
    def a(self) -> float:
        """N_opt ∝ C^a."""
        return self.beta / (self.alpha + self.beta)

    @property
    def b(self) -> float:
        """D_opt ∝ C^b."""
        return self.alpha / (self.alpha + self.beta)

    @property
    def G(self) -> float:
        return (self.alpha * self.A / (self.beta * self.B)) ** (1 / (self.alpha + self.beta))

    def optimum(self, compute):
        """(N_opt, D_opt) at compute C (FLOPs): the minimum of L along C = 6·N·D."""
        scaled = np.asarray(compute, dtype=float) / FLOPS_PER_PARAM_TOKEN
        return self.G * scaled ** self.a, scaled ** self.b / self.G

    def isoflop(self, compute: float, n):
        """L(N, C/6N) along one compute budget."""
        return self.loss(n, compute / (FLOPS_PER_PARAM_TOKEN * np.asarray(n, dtype=float)))


def budgets(compute: np.ndarray, count: int) -> np.ndarray:
    """`count` compute budgets evenly spaced in log between the grid's smallest and largest 6·N·D,
    each a whole power of ten's 1, 2 or 5 (round numbers to read), none repeated."""
    low, high = np.log10(compute.min()), np.log10(compute.max())
    inner = np.linspace(low, high, count + 2)[1:-1]  # inside the grid: each budget crosses several sizes
    return np.array(sorted({_round125(10 ** x) for x in inner}))


def _round125(value: float) -> float:
    decade = 10 ** np.floor(np.log10(value))
    return float(min((decade * m for m in (1, 2, 5, 10)), key=lambda v: abs(np.log(v / value))))
