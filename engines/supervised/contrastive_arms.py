"""Contrastive τ arms trained together: one batched encoder for the whole τ sweep.

The arms of `engines.supervised.contrastive.train_tau_arm` share the encoder's initial weights,
the batches of view pairs, the probe sets and Adam's settings; only τ differs. So the K
encoders are one `StackedMLP`, τ is a (K, 1, 1) tensor, one Adam (elementwise) steps them all,
and `engines.loop.batched.train_arms` runs them. The batch's geometry, the probe and the PCA are
measured per arm on logged steps by the very functions the sequential arm calls, so each arm's
records equal `train_tau_arm`'s for it alone (tests/test_batched_scenarios.py). Several seeds of one run
are more arms: each with its seed's encoder init, pairs and probe sets (tests/test_seeded.py).
"""
import math
from collections.abc import Iterator, Sequence
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from engines.loop.batched import ArmItems, train_arms
from engines.loop.stacked import StackedMLP, arm_cross_entropy, arm_linear
from engines.supervised.contrastive import (PCA_POINTS, LatentViews, TauArm, alignment, cosine_similarities, encoder,
                                            hardest_negative_weight, pca_2d, pca_metrics, probe_sets, ridge_probe,
                                            task_of, uniformity)


def per_arm(fn, *tensors: Tensor) -> Tensor:
    """`fn` of each arm's slices, stacked: (K,). For measurements of logged steps, computed as one arm computes them."""
    return torch.stack([fn(*arm) for arm in zip(*tensors)])


def per_seed(values: dict[int, Tensor], seeds: Sequence[int]) -> Tensor:
    """One seed's tensor as it is, or each arm's seed's stacked: (K, ...)."""
    return next(iter(values.values())) if len(values) == 1 else torch.stack([values[s] for s in seeds])


def seeded_pairs(tasks: dict[int, LatentViews], seeds: Sequence[int], batch: int) -> Iterator[tuple[Tensor, Tensor]]:
    """Each arm's pairs of views from its seed's stream (arms of one seed read the same pairs)."""
    streams = {seed: task.pairs(batch) for seed, task in tasks.items()}
    while True:
        drawn = {seed: next(stream) for seed, stream in streams.items()}
        yield (per_seed({s: d[0] for s, d in drawn.items()}, seeds), per_seed({s: d[1] for s, d in drawn.items()}, seeds))


def train_tau_arms(names: Sequence[str], specs: Sequence[TauArm], steps: int, log_every: int,
                   snapshots: int = 8) -> Iterator[ArmItems | None]:
    """`train_tau_arm` for every spec at once; the specs differ in τ and seed alone (several seeds of one run)."""
    spec = specs[0]
    if any(replace(s, tau=spec.tau, seed=spec.seed) != spec for s in specs):
        raise ValueError("batched τ arms must share every setting but τ and the seed")
    seeds = [s.seed for s in specs]
    tasks = {seed: task_of(replace(spec, seed=seed)) for seed in dict.fromkeys(seeds)}
    model = StackedMLP([[m for m in encoder(s.embedding_dim, s.seed + 3) if isinstance(m, nn.Linear)] for s in specs])
    probes = {seed: probe_sets(task, seed) for seed, task in tasks.items()}
    fit = (per_seed({s: p[0][0] for s, p in probes.items()}, seeds), [probes[s][0][1] for s in seeds])
    scored = (per_seed({s: p[1][0] for s, p in probes.items()}, seeds), [probes[s][1][1] for s in seeds])
    tau = torch.tensor([s.tau for s in specs])[:, None, None]  # (K, 1, 1)
    logged, pca_every = {"count": 0}, max(1, (steps // log_every) // snapshots)
    log_n = math.log(spec.batch)
    partners = torch.arange(spec.batch)

    def objective(batch, logging: bool):
        e1, e2 = model(batch[0]), model(batch[1])  # (K, N, d)
        a, b = F.normalize(e1, dim=-1), F.normalize(e2, dim=-1)
        scores = arm_linear(a, b) / tau  # (K, N, N): a bᵀ/τ, rounded as `a @ b.T` rounds
        loss = arm_cross_entropy(scores, partners, exact_value=logging)
        if not logging:
            return loss
        a, b, scores, e1, e2 = a.detach(), b.detach(), scores.detach(), e1.detach(), e2.detach()
        cosines = [cosine_similarities(x, y) for x, y in zip(e1, e2)]
        return loss, {"log_n": torch.tensor(log_n), "mi_bound": log_n - loss.detach(), "alignment": per_arm(alignment, a, b),
                      "uniformity": per_arm(uniformity, a), "hardest_negative_weight": per_arm(hardest_negative_weight, scores),
                      **{name: torch.stack([c[name] for c in cosines]) for name in cosines[0]}}

    def measure(step: int, alive: Tensor) -> dict:
        with torch.no_grad():
            fitted, held = F.normalize(model(fit[0]), dim=-1), F.normalize(model(scored[0]), dim=-1)  # (K, n, d)
            values: dict = {"probe_accuracy": torch.stack([ridge_probe((f, fy), (h, hy), spec.classes)
                                                           for f, fy, h, hy in zip(fitted, fit[1], held, scored[1])])}
            if logged["count"] % pca_every == 0 or step == steps - 1:
                points = [pca_metrics(pca_2d(h[:PCA_POINTS], hy[:PCA_POINTS])) if live else {}
                          for h, hy, live in zip(held, scored[1], alive.tolist())]
                for name in next(p for p in points if p):
                    values[name] = [p.get(name) for p in points]
        logged["count"] += 1
        return values

    params = list(model.parameters())
    optimizer = torch.optim.Adam(params, lr=spec.lr, foreach=True)  # elementwise: one Adam per arm, in one call
    yield from train_arms(names, params, optimizer, seeded_pairs(tasks, seeds, spec.batch), objective, steps,
                          log_every=log_every, on_log=measure)
