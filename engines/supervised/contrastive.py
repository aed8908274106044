"""Contrastive learning: an encoder trained with InfoNCE on two noisy views of one latent point.

The data: a latent point z lies in one of `classes` clusters (centres on a sphere of radius 3
in LATENT dimensions). Each view of it is a fixed random nonlinear mixing of (z + view
noise, nuisance), where the nuisance is fresh noise per view: what two views share is z, and
z is what separates the classes. The encoder (an MLP) never sees a class label.

InfoNCE over a batch of N pairs: with unit embeddings a_i, b_i of the two views, scores
s_ij = a_i·b_j/τ, and L = −mean_i log softmax_j(s_ij)[i] — cross-entropy over which of the N
candidates is the partner. At uniform similarity L = log N; van den Oord et al. 2018:
I(view₁; view₂) ≥ log N − L. Gradients weight each negative by its softmax share, so a
small τ concentrates them on the hardest (most similar) negatives (Wang & Liu 2021).

Measured on logged steps: alignment E‖a − b‖² and uniformity log E exp(−2‖a_i − a_j‖²)
(Wang & Isola 2020), the hardest negative's share of the negatives' weight, mean cosine
similarity of positives and negatives (`F.cosine_similarity`), a linear probe's accuracy on
the latent class (ridge regression on frozen embeddings, held-out split), and a PCA of the
held-out embeddings.
"""
import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import train
from engines.sequence.attention import init_seeded

LATENT, NUISANCE, OBSERVED, HIDDEN = 4, 4, 32, 64
PROBE_SIZE, PCA_POINTS = 512, 240  # probe: 512 to fit, 512 to score; PCA of the first 240 scored


class LatentViews:
    def __init__(self, classes: int, view_noise: float, nuisance: float, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        centres = torch.randn(classes, LATENT, generator=generator)
        self.centres = 3 * centres / centres.norm(dim=1, keepdim=True)  # (classes, latent)
        self.mixing = (torch.randn(LATENT + NUISANCE, HIDDEN, generator=generator) / math.sqrt(LATENT + NUISANCE),
                       torch.randn(HIDDEN, OBSERVED, generator=generator) / math.sqrt(HIDDEN))
        self.view_noise, self.nuisance = view_noise, nuisance
        self.generator = torch.Generator().manual_seed(seed + 1)

    def latents(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        classes = torch.randint(0, len(self.centres), (n,), generator=generator)
        return self.centres[classes] + 0.5 * torch.randn(n, LATENT, generator=generator), classes

    def observe(self, z: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """One view: tanh([z + noise, nuisance] W₁) W₂ + a little sensor noise: (n, OBSERVED)."""
        shifted = z + self.view_noise * torch.randn(z.shape, generator=generator)
        nuisance = self.nuisance * torch.randn(len(z), NUISANCE, generator=generator)
        x = torch.tanh(torch.cat([shifted, nuisance], 1) @ self.mixing[0]) @ self.mixing[1]
        return x + 0.1 * torch.randn(x.shape, generator=generator)

    def pairs(self, n: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            z, _ = self.latents(n, self.generator)
            yield self.observe(z, self.generator), self.observe(z, self.generator)

    def labelled(self, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """n single views with their latent class (for the probe and the PCA)."""
        generator = torch.Generator().manual_seed(seed)
        z, classes = self.latents(n, generator)
        return self.observe(z, generator), classes


def encoder(embedding_dim: int, seed: int) -> nn.Module:
    return init_seeded(nn.Sequential(nn.Linear(OBSERVED, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                                     nn.Linear(HIDDEN, embedding_dim)), seed)


def info_nce(a: torch.Tensor, b: torch.Tensor, tau: float) -> tuple[torch.Tensor, torch.Tensor]:
    """InfoNCE of unit embeddings a, b (N, d), partners on the diagonal: (loss, scores s = a bᵀ/τ)."""
    scores = a @ b.T / tau  # (N, N)
    return F.cross_entropy(scores, torch.arange(len(a))), scores


def hardest_negative_weight(scores: torch.Tensor) -> torch.Tensor:
    """Per anchor, the most similar negative's share of all negatives' softmax weight; mean over anchors.
    1/(N − 1) when every negative weighs the same; → 1 as τ → 0."""
    negatives = scores.masked_fill(torch.eye(len(scores), dtype=torch.bool), float("-inf"))
    return torch.softmax(negatives, dim=1).max(dim=1).values.mean()


def alignment(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """E‖a − b‖² over positive pairs (Wang & Isola 2020, α = 2)."""
    return (a - b).pow(2).sum(1).mean()


def uniformity(a: torch.Tensor) -> torch.Tensor:
    """log E exp(−2‖a_i − a_j‖²) over distinct pairs (Wang & Isola 2020, t = 2)."""
    return torch.pdist(a).pow(2).mul(-2).exp().mean().log()


def cosine_similarities(e1: torch.Tensor, e2: torch.Tensor) -> dict[str, torch.Tensor]:
    """Mean cosine similarity of positives (e1_i, e2_i) and of negatives (e1_i, e2_j), i ≠ j."""
    every = F.cosine_similarity(e1[:, None, :], e2[None, :, :], dim=-1)  # (N, N)
    off = ~torch.eye(len(e1), dtype=torch.bool)
    return {"cos_pos": F.cosine_similarity(e1, e2, dim=1).mean(), "cos_neg": every[off].mean()}


def ridge_probe(fit: tuple[torch.Tensor, torch.Tensor], score: tuple[torch.Tensor, torch.Tensor], classes: int,
                ridge: float = 1e-3) -> torch.Tensor:
    """Accuracy of a linear classifier (least squares onto one-hot labels, with a bias) on `score`."""
    def design(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x.double(), torch.ones(len(x), 1, dtype=torch.float64)], 1)
    x, y = design(fit[0]), F.one_hot(fit[1], classes).double()
    weights = torch.linalg.solve(x.T @ x + ridge * len(x) * torch.eye(x.shape[1], dtype=torch.float64), x.T @ y)
    return ((design(score[0]) @ weights).argmax(1) == score[1]).double().mean()


def pca_2d(x: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
    """The first two principal components of x (n, d), signs fixed so class 0's mean is positive."""
    centred = x.double() - x.double().mean(0)
    _, _, vh = torch.linalg.svd(centred, full_matrices=False)
    coords = centred @ vh[:2].T  # (n, 2)
    first = coords[classes == classes[0]].mean(0)
    return coords * torch.where(first < 0, -1.0, 1.0)


def pca_metrics(coords: torch.Tensor) -> dict[str, float]:
    flat = coords.tolist()
    return {f"pca/{axis}/{i:03d}": point[a] for i, point in enumerate(flat) for a, axis in enumerate(("x", "y"))}


@dataclass(frozen=True)
class TauArm:
    tau: float
    batch: int = 128
    embedding_dim: int = 16
    classes: int = 8
    view_noise: float = 0.3
    nuisance: float = 2.0
    lr: float = 3e-3
    seed: int = 0


def task_of(spec: TauArm) -> LatentViews:
    return LatentViews(spec.classes, spec.view_noise, spec.nuisance, spec.seed)


def probe_sets(task: LatentViews, seed: int):
    return task.labelled(PROBE_SIZE, seed + 5), task.labelled(PROBE_SIZE, seed + 6)


def train_tau_arm(spec: TauArm, steps: int, log_every: int, snapshots: int = 8) -> Iterator[StepRecord | Diverged | None]:
    """One τ: the same encoder init and batches as every other τ. The loss and its bound, the
    batch's geometry, and on logged steps the probe (and `snapshots` times the PCA)."""
    task, model = task_of(spec), encoder(spec.embedding_dim, spec.seed + 3)
    fit, scored = probe_sets(task, spec.seed)
    logged, pca_every = {"count": 0}, max(1, (steps // log_every) // snapshots)
    log_n = math.log(spec.batch)

    def objective(batch, logging: bool):
        e1, e2 = model(batch[0]), model(batch[1])
        a, b = F.normalize(e1, dim=1), F.normalize(e2, dim=1)
        loss, scores = info_nce(a, b, spec.tau)
        if not logging:
            return loss
        a, b, scores = a.detach(), b.detach(), scores.detach()
        return loss, {"log_n": torch.tensor(log_n), "mi_bound": log_n - loss.detach(), "alignment": alignment(a, b),
                      "uniformity": uniformity(a), "hardest_negative_weight": hardest_negative_weight(scores),
                      **cosine_similarities(e1.detach(), e2.detach())}

    def measure(step: int) -> dict:
        with torch.no_grad():
            embed = lambda x: F.normalize(model(x), dim=1)  # noqa: E731
            held = embed(scored[0])
            values = {"probe_accuracy": ridge_probe((embed(fit[0]), fit[1]), (held, scored[1]), spec.classes)}
            if logged["count"] % pca_every == 0 or step == steps - 1:
                values.update(pca_metrics(pca_2d(held[:PCA_POINTS], scored[1][:PCA_POINTS])))
        logged["count"] += 1
        return values

    optimizer = torch.optim.Adam(model.parameters(), lr=spec.lr, foreach=True)
    yield from train(model, optimizer, task.pairs(spec.batch), objective, steps, log_every=log_every, on_log=measure)


def raw_records(spec: TauArm) -> Iterator[StepRecord]:
    """The baseline on the raw observations: the same probe and PCA, and the classes of the PCA's points."""
    task = task_of(spec)
    fit, scored = probe_sets(task, spec.seed)
    points = scored[1][:PCA_POINTS]
    metrics = {"probe_accuracy": float(ridge_probe(fit, scored, spec.classes)),
               **pca_metrics(pca_2d(scored[0][:PCA_POINTS], points)),
               **{f"class/{i:03d}": float(c) for i, c in enumerate(points.tolist())}}
    yield StepRecord(0, metrics)
