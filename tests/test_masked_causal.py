"""Masked vs causal, and word2vec: the exact fill of the source, the counted PMI, Levy & Goldberg's identity,
3CosAdd on known offsets, and the page's refusals."""
import math

import numpy as np
import pytest
import torch

from engines.sequence.masked_causal import exact_fill, fill_positions, fill_posteriors
from engines.sequence.next_token import topic_corpus
from engines.sequence.relational import analogy_questions, pair_counts, world
from engines.sequence.word2vec import SGNSArm, analogy_hits, noise_distribution, pmi, sgns_records, shifted_pmi
from scenarios import get_scenario
from scenarios.base import ConfigError

SCENARIO = get_scenario("masked-vs-causal")


def test_the_exact_fill_is_the_source_line_probability_renormalized_over_the_hidden_word() -> None:
    """P(x_j | rest) ∝ P(whole line with x_j = w): brute force over every word equals the chain's two-factor formula."""
    source, _, held_out = topic_corpus(2, 3, 8, 3)
    lines = held_out[: 40 * 8].reshape(-1, 8)
    positions = fill_positions(len(lines), 8, 9)
    left, both = fill_posteriors(source, lines, positions)
    worst = 0.0
    for line, j, row in zip(lines, positions, both):
        joint = []
        for word in range(source.words):
            trial = line.copy()
            trial[j] = source.topics + word
            joint.append(math.exp(source.log_prob(trial).sum()))
        brute = np.array(joint) / sum(joint)
        worst = max(worst, float(np.abs(brute - row).max()))
    assert worst < 1e-9, f"max |brute force − formula| = {worst:.2e}"
    facts = exact_fill(source, lines, positions)
    assert facts["bayes/both_accuracy"] >= facts["bayes/left_accuracy"] - 1e-12, facts
    assert facts["bayes/both_nats"] <= facts["bayes/left_nats"] + 1e-12, facts


def test_pair_counts_are_every_context_within_the_window_of_each_sentence() -> None:
    """The vectorized count equals a loop over sentences, positions and offsets."""
    corpus = world(4, 300, 2)
    counts = pair_counts(corpus, 3)
    brute = np.zeros_like(counts)
    for sentence in corpus.sentences:
        for i, w in enumerate(sentence):
            for j, c in enumerate(sentence):
                if 0 < abs(i - j) <= 3:
                    brute[w, c] += 1
    assert np.array_equal(counts, brute), f"{np.abs(counts - brute).sum():.0f} pairs counted differently"
    assert np.array_equal(counts, counts.T), "a window both ways counts (w, c) as often as (c, w)"


def test_the_shifted_pmi_at_alpha_one_is_pmi_minus_ln_k() -> None:
    """ln(#(w,c)/(#(w)·k·P_n(c))) with P_n the context marginal is PMI − ln k, to float rounding."""
    counts = pair_counts(world(6, 500, 1), 2)
    seen = counts > 0
    gap = np.abs(shifted_pmi(counts, 5, noise_distribution(counts, 1.0))[seen] - (pmi(counts)[seen] - math.log(5))).max()
    assert gap < 1e-12, f"max gap {gap:.2e}"


def test_sgns_dot_products_approach_pmi_minus_ln_k_on_frequent_pairs() -> None:
    """Levy & Goldberg 2014: with α = 1 and a dimension near the vocabulary's, w·c → PMI − ln k (frequent pairs)."""
    arm = SGNSArm(countries=4, sentences=3000, window=2, negatives=5, dim=32, power=1.0, steps=500, lr=0.03,
                  log_every=250, seed=1)
    last = [r for r in sgns_records(arm) if r is not None][-1].metrics
    r, gap = last["identity/correlation_plain"], last["identity/mean_gap"]
    assert r > 0.97 and gap < 0.15, f"correlation {r:.4f}, mean |w·c − (PMI − ln k)| {gap:.3f} nats"
    assert last["identity/correlation"] == pytest.approx(r, abs=1e-9), "at α = 1 both targets are one"


def test_3cosadd_finds_every_answer_when_roles_are_one_offset() -> None:
    """Vectors built as entity + role (plus noise) answer every analogy question of the world."""
    corpus = world(8, 10, 0)
    generator = torch.Generator().manual_seed(0)
    vectors = torch.randn(len(corpus.words), 16, generator=generator) * 0.05
    roles = torch.randn(3, 16, generator=generator)
    for country in range(corpus.countries):
        entity = torch.randn(16, generator=generator)
        for k, role in enumerate(("country", "capital", "people")):
            vectors[corpus.entity(role, country)] = entity + roles[k]
    hits = analogy_hits(vectors, torch.as_tensor(analogy_questions(corpus)))
    assert bool(hits.all()), f"{int((~hits).sum())} of {len(hits)} questions missed"


@pytest.mark.parametrize("values, field", [({"mask_rate": 0.6}, "mask_rate"), ({"mask_rate": 0.0}, "mask_rate"),
                                           ({"line_length": 32, "context": 16}, "line_length"),
                                           ({"negatives": 0}, "negatives")])
def test_bad_settings_are_refused_naming_the_field(values, field) -> None:
    with pytest.raises(ConfigError, match=field):
        SCENARIO.validate(values)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 3])
def test_the_masked_model_fills_past_the_left_only_ceiling_the_causal_one_cannot_cross(seed) -> None:
    """At the defaults the bidirectional model beats the left-only Bayes fill and the causal model."""
    from scenarios.records import Records
    from scenarios.masked_causal.figures import CAUSAL, EXACT, MASKED, SGNS
    records = Records(SCENARIO.run({"seed": seed}).frame)
    masked, causal = records.last(MASKED, "fill/accuracy"), records.last(CAUSAL, "fill/accuracy")
    left = records.first(EXACT, "bayes/left_accuracy")
    assert masked > left > causal - 0.05, f"seed {seed}: masked {masked:.3f}, left ceiling {left:.3f}, causal {causal:.3f}"
    assert records.last(SGNS, "analogy/accuracy") > 0.9, records.last(SGNS, "analogy/accuracy")
    assert records.last(SGNS, "identity/correlation") > 0.9, records.last(SGNS, "identity/correlation")


def test_names_of_two_points_that_nearly_coincide_are_placed_apart() -> None:
    """egypt and india sat 0.01 apart on the plane, their names printed over each other: the second
    name takes the first free spot (below), and a lone point keeps the top."""
    from scenarios.masked_causal.figures import label_positions
    points = [(0.88, 0.30, "egypt"), (0.89, 0.31, "india"), (0.18, 0.09, "delhi"), (0.20, 0.05, "cairo"),
              (1.10, 1.05, "italy"), (0.10, 0.63, "paris"), (0.95, -0.30, "spain"), (1.15, -0.25, "japan")]
    spots = label_positions(points)
    assert spots[0] == "top center" and spots[1] != "top center", spots
    assert spots[2] == "top center" and spots[3] != "top center", spots
    assert spots[4] == "top center", spots
