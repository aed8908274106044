"""Fitting L(N, D) = E + A/N^α + B/D^β to measured losses, with torch's own optimizers.

Chinchilla's Approach 3 (Hoffmann et al. 2022, as Besiroglu et al. 2024 re-ran it): in log space,

    log L̂(N, D) = LSE(a − α·log N,  b − β·log D,  e),   A = e^a, B = e^b, E = e^e

(the log-sum-exp keeps every term positive), minimising the Huber loss (δ = 1e-3) of
log L̂ − log L over the measured points. The surface has several basins, so it starts from a grid of
initial guesses: all of them are trained at once with Adam (Adam's update is per coordinate, so the
starts do not interact: one tensor of shape (starts, 5)), then L-BFGS (strong-Wolfe line search)
polishes the best few and the lowest objective wins. float64 throughout.
"""
import itertools

import numpy as np
import torch

from engines.sequence.scaling_law import Law

HUBER_DELTA = 1e-3
ADAM_STEPS, ADAM_LR = 300, 0.1
POLISHED = 2


def _starts() -> torch.Tensor:
    """(starts, 5) initial (a, b, e, α, β): Chinchilla's grid, coarser."""
    grid = itertools.product((0.0, 4.0, 8.0), (0.0, 4.0, 8.0), (-1.0, 0.0, 0.5), (0.2, 0.5, 1.0), (0.2, 0.5, 1.0))
    return torch.tensor(list(grid), dtype=torch.float64)


def _objective(theta: torch.Tensor, log_n: torch.Tensor, log_d: torch.Tensor, log_l: torch.Tensor) -> torch.Tensor:
    """Per start: the summed Huber loss of log L̂ − log L. theta: (starts, 5)."""
    a, b, e, alpha, beta = (theta[:, i:i + 1] for i in range(5))
    terms = torch.stack([a - alpha * log_n, b - beta * log_d, e.expand(-1, log_n.shape[0])])  # (3, starts, points)
    predicted = torch.logsumexp(terms, dim=0)
    return torch.nn.functional.huber_loss(predicted, log_l.expand_as(predicted), delta=HUBER_DELTA,
                                          reduction="none").sum(-1)


def fit_law(n, d, loss) -> tuple[Law, float]:
    """The law that fits the finite points (n, d, loss) best, and its Huber objective."""
    n, d, loss = (np.asarray(x, dtype=float) for x in (n, d, loss))
    keep = np.isfinite(loss) & (loss > 0)
    if keep.sum() < 5:
        raise ValueError(f"a fit of 5 parameters needs at least 5 finite points, got {int(keep.sum())}")
    log_n, log_d, log_l = (torch.tensor(np.log(x[keep]), dtype=torch.float64) for x in (n, d, loss))
    theta = _starts().requires_grad_(True)
    adam = torch.optim.Adam([theta], lr=ADAM_LR)
    for _ in range(ADAM_STEPS):
        adam.zero_grad()
        _objective(theta, log_n, log_d, log_l).sum().backward()
        adam.step()
    with torch.no_grad():
        values = _objective(theta, log_n, log_d, log_l)
        values = torch.where(torch.isfinite(values), values, torch.inf)
    best, best_value = None, float("inf")
    for index in torch.argsort(values)[:POLISHED].tolist():
        one = theta[index:index + 1].detach().clone().requires_grad_(True)
        lbfgs = torch.optim.LBFGS([one], lr=1.0, max_iter=200, tolerance_grad=1e-10, tolerance_change=1e-12,
                                  line_search_fn="strong_wolfe")

        def closure() -> torch.Tensor:
            lbfgs.zero_grad()
            value = _objective(one, log_n, log_d, log_l).sum()
            value.backward()
            return value
        lbfgs.step(closure)
        with torch.no_grad():
            value = float(_objective(one, log_n, log_d, log_l).sum())
        if np.isfinite(value) and value < best_value:
            best, best_value = one.detach()[0].tolist(), value
    if best is None:
        raise ValueError("no start of the fit reached a finite objective")
    a, b, e, alpha, beta = best
    return Law(float(np.exp(e)), float(np.exp(a)), float(np.exp(b)), alpha, beta), best_value
