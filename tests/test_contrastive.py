"""Contrastive learning, asserted: InfoNCE is log N at uniform similarity and log N − L stays
under the true mutual information, lower τ weighs the hardest negative more, our cosine
similarity is F.cosine_similarity, the embeddings separate the latent classes, and the page
says an optimum in τ only where the records show one.

Thresholds were calibrated over seeds 0-5 (ranges in the comments).
"""
import math

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from engines.supervised.contrastive import (alignment, cosine_similarities, hardest_negative_weight, info_nce, ridge_probe,
                                 uniformity)
from scenarios import get_scenario
from scenarios.base import COLUMNS
from scenarios.contrastive.figures import RAW, optimum_sentence
from scenarios.records import Records

SCENARIO = get_scenario("contrastive")
TAUS = [0.02, 0.05, 0.1, 0.5, 1.0]


def unit(n: int, d: int, seed: int) -> torch.Tensor:
    return F.normalize(torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64), dim=1)


@pytest.mark.parametrize("batch", [16, 128, 512])
def test_infonce_is_log_n_at_uniform_similarity(batch: int) -> None:
    """Every candidate equally similar (all embeddings alike, or τ → ∞): L = log N."""
    same = unit(1, 8, 0).expand(batch, 8)
    loss, _ = info_nce(same, same, tau=0.1)
    assert abs(loss.item() - math.log(batch)) < 1e-12, f"N {batch}: {loss.item()} vs log N {math.log(batch)}"
    a, b = unit(batch, 8, 1), unit(batch, 8, 2)
    flat, _ = info_nce(a, b, tau=1e9)
    assert abs(flat.item() - math.log(batch)) < 1e-6, f"τ → ∞: {flat.item()}"


@pytest.mark.parametrize("rho", [0.5, 0.9])
def test_log_n_minus_infonce_is_a_lower_bound_on_the_mutual_information(rho: float) -> None:
    """Gaussian pairs x, y with correlation ρ in each of d = 4 dims: I = −(d/2) log(1 − ρ²). With the
    optimal critic log p(y|x)/p(y) (and with a cosine critic) log N − L ≤ I; the optimal one comes close
    while I ≪ log N (ρ 0.5: I 0.575, bound 0.568, cosine −0.02; ρ 0.9: I 3.32, bound 3.11, cosine 2.04)."""
    d, n, batches = 4, 256, 40
    mutual = -d / 2 * math.log(1 - rho ** 2)
    generator = torch.Generator().manual_seed(5)
    bounds, cosine_bounds = [], []
    for _ in range(batches):
        x = torch.randn(n, d, generator=generator, dtype=torch.float64)
        y = rho * x + math.sqrt(1 - rho ** 2) * torch.randn(n, d, generator=generator, dtype=torch.float64)
        conditional = -((y[None, :, :] - rho * x[:, None, :]) ** 2).sum(-1) / (2 * (1 - rho ** 2))  # log p(y_j | x_i) + c
        critic = conditional + (y ** 2).sum(-1)[None, :] / 2  # − log p(y_j) + c: the density ratio
        bounds.append(math.log(n) - F.cross_entropy(critic, torch.arange(n)).item())
        cosine, _ = info_nce(F.normalize(x, dim=1), F.normalize(y, dim=1), tau=0.2)
        cosine_bounds.append(math.log(n) - cosine.item())
    bound, cosine_bound = sum(bounds) / batches, sum(cosine_bounds) / batches
    assert bound <= mutual + 0.05, f"ρ {rho}: log N − L = {bound:.3f} above I = {mutual:.3f}"
    assert cosine_bound <= bound + 0.05, f"ρ {rho}: cosine critic {cosine_bound:.3f} above the optimal {bound:.3f}"
    if mutual < 1:
        assert bound >= mutual - 0.1, f"ρ {rho}: the optimal critic's bound {bound:.3f} far below I = {mutual:.3f}"


def test_lower_tau_puts_more_weight_on_the_hardest_negative() -> None:
    """Fixed random unit embeddings, N = 256, d = 16: the share falls strictly with τ, toward 1/(N − 1)."""
    a, b = unit(256, 16, 3), unit(256, 16, 4)
    shares = [hardest_negative_weight(a @ b.T / tau).item() for tau in TAUS]
    assert all(x > y for x, y in zip(shares, shares[1:])), f"shares by τ {TAUS}: {shares}"
    flat = hardest_negative_weight(a @ b.T / 1e6).item()
    assert abs(flat * 255 - 1) < 1e-3, f"τ → ∞: {flat:.5f} vs 1/255 = {1 / 255:.5f}"


def test_cosine_similarity_is_torchs_and_the_geometry_follows_wang_and_isola() -> None:
    e1 = torch.randn(32, 8, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    e2 = e1 + 0.3 * torch.randn(32, 8, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    a, b = F.normalize(e1, dim=1), F.normalize(e2, dim=1)
    cos = cosine_similarities(e1, e2)
    every = a @ b.T
    assert abs(cos["cos_pos"] - every.diagonal().mean()) < 1e-12
    assert abs(cos["cos_neg"] - (every.sum() - every.diagonal().sum()) / (32 * 31)) < 1e-12
    assert abs(alignment(a, b) - ((a - b).norm(dim=1) ** 2).mean()) < 1e-12
    pairs = [(i, j) for i in range(32) for j in range(i + 1, 32)]
    explicit = math.log(sum(math.exp(-2 * (a[i] - a[j]).norm().item() ** 2) for i, j in pairs) / len(pairs))
    assert abs(uniformity(a).item() - explicit) < 1e-9


def test_the_ridge_probe_reads_separable_classes() -> None:
    generator = torch.Generator().manual_seed(8)
    labels = torch.randint(0, 4, (400,), generator=generator)
    x = F.one_hot(labels, 4).double() * 3 + 0.1 * torch.randn(400, 4, generator=generator, dtype=torch.float64)
    assert ridge_probe((x[:200], labels[:200]), (x[200:], labels[200:]), 4).item() == 1.0


def contrastive_run(seed: int) -> tuple[Records, int]:
    config = SCENARIO.validate({"seed": seed})
    return Records(SCENARIO.run(config).frame), config.steps - 1


def assert_contrastive_physics(records: Records, last: int, seed: int) -> None:
    """Seeds 0-5: probe 78-96% on 8 classes (chance 12.5%) against 65-83% on the raw views (+10 to +17
    points) and 50-70% at step 0; every loss ends below log N; at step 0 the hardest-negative share falls
    with τ (one encoder and batch for all)."""
    arms = [arm for arm in records.arms() if arm.startswith("τ=")]
    raw = records.first(RAW, "probe_accuracy")
    for arm in arms:
        probe, start = records.at(arm, "probe_accuracy", last), records.at(arm, "probe_accuracy", 0)
        assert probe >= 0.6, f"seed {seed}, {arm}: probe {probe:.3f}"
        assert probe >= raw + 0.05 and probe > start, f"seed {seed}, {arm}: probe {probe:.3f}, raw {raw:.3f}, start {start:.3f}"
        assert records.at(arm, "loss", last) < records.first(arm, "log_n"), f"seed {seed}, {arm}: loss above log N"
    shares = [records.at(arm, "hardest_negative_weight", 0) for arm in arms]
    assert all(x > y for x, y in zip(shares, shares[1:])), f"seed {seed}: step-0 shares {shares}"


def test_trained_embeddings_separate_the_latent_classes() -> None:
    assert_contrastive_physics(*contrastive_run(0), 0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_trained_embeddings_separate_the_classes_on_other_seeds(seed: int) -> None:
    assert_contrastive_physics(*contrastive_run(seed), seed)


def probe_frame(values: dict[str, float], step: int = 9) -> Records:
    return Records(pd.DataFrame([(arm, step, "probe_accuracy", v) for arm, v in values.items()], columns=COLUMNS))


def test_an_optimum_in_tau_is_said_only_where_the_records_show_one() -> None:
    """A middle best is called inside; a best at an end, or a tie, is not; every claim holds."""
    arms = ["τ=0.05", "τ=0.1", "τ=1"]
    inside = probe_frame(dict(zip(arms, [0.80, 0.90, 0.85])))
    sentence = optimum_sentence(inside, arms, 9, 512)
    assert "inside the sweep" in sentence.text and all(c.holds(inside) for c in sentence.claims)
    end = probe_frame(dict(zip(arms, [0.80, 0.85, 0.90])))
    sentence = optimum_sentence(end, arms, 9, 512)
    assert "at an end" in sentence.text and all(c.holds(end) for c in sentence.claims)
    assert not all(c.holds(end) for c in optimum_sentence(inside, arms, 9, 512).claims)
    assert optimum_sentence(probe_frame(dict(zip(arms, [0.9, 0.8, 0.9]))), arms, 9, 512) is None


def test_the_uniformity_axis_title_fits_a_half_width_chart() -> None:
    """On one line (70 characters, ~490 px at 14 px) the title ran past both edges of a half-width chart, whose
    plot is ~250 px wide at a 1280 px screen: each line of it at most 40 characters (~280 px)."""
    from tests.tiny_runs import tiny_frame
    figure = SCENARIO.figures(tiny_frame("contrastive"), SCENARIO.validate(SCENARIO.tiny))["align_uniform"]
    lines = str(figure.layout.xaxis.title.text).split("<br>")
    assert max(map(len, lines)) <= 40 and lines[0].startswith("uniformity"), \
        f"x title lines of {[len(line) for line in lines]} characters: {lines}"
