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


# The plane at the defaults (seed 0, 2026-12-06): (country x, y, capital x, y, capital); egypt and india 0.05 apart,
# cairo and delhi 0.1, japan, kenya and spain within 0.7 on x: their names were printed over each other.
DEFAULT_PLANE = {"france": (0.775, 0.7, -1.783, 0.631, "paris"), "japan": (1.954, -0.286, -0.676, -0.594, "tokyo"),
                 "egypt": (0.975, 0.297, -1.524, 0.047, "cairo"), "peru": (0.857, 2.188, -1.827, 2.185, "lima"),
                 "italy": (1.793, 1.051, -0.707, 1.084, "rome"), "china": (1.039, -0.996, -1.551, -1.367, "beijing"),
                 "kenya": (1.722, -0.516, -0.843, -0.898, "nairobi"), "chile": (1.551, -1.203, -1.08, -1.763, "santiago"),
                 "spain": (1.293, -0.363, -1.368, -0.6, "madrid"), "india": (1.025, 0.314, -1.625, 0.088, "delhi")}


def plane_frame(plane: dict) -> "pd.DataFrame":
    """A frame holding only the skip-gram arm's plane snapshot, as the run records it."""
    import pandas as pd
    from engines.sequence.relational import vocabulary
    from scenarios.masked_causal.figures import SGNS
    index = {word: i for i, word in enumerate(vocabulary(len(plane)))}
    rows = [(SGNS, 800, f"plane/{axis}/{index[word]:03d}", value) for country, (x0, y0, x1, y1, capital) in plane.items()
            for word, x, y in ((country, x0, y0), (capital, x1, y1)) for axis, value in (("x", x), ("y", y))]
    return pd.DataFrame(rows, columns=["arm", "step", "metric", "value"])


def assert_names_apart(figure) -> None:
    """Every name's box (as plotly.js places it, at a half-width chart's plot size) clear of every other name by
    the gap, of every other point's marker, and inside the axis ranges."""
    from scenarios.masked_causal import labels
    assert figure.layout.xaxis.range and figure.layout.yaxis.range, "no ranges: plotly's pad holds the markers, not the names"
    (x0, x1), (y0, y1) = figure.layout.xaxis.range, figure.layout.yaxis.range
    width, height = labels.PLOT_PX
    names, boxes, marks = [], [], []
    for trace in figure.data:
        for x, y, text, spot in zip(trace.x, trace.y, trace.text, trace.textposition):
            px, py = (x - x0) / (x1 - x0) * width, (y - y0) / (y1 - y0) * height
            names.append(text)
            boxes.append(labels.label_box(px, py, text, spot))
            marks.append((px - labels.MARKER_PX / 2, py - labels.MARKER_PX / 2, px + labels.MARKER_PX / 2, py + labels.MARKER_PX / 2))
    gap = labels.GAP_PX
    for i, a in enumerate(boxes):
        assert -1e-6 <= a[0] and a[2] <= width + 1e-6 and -1e-6 <= a[1] and a[3] <= height + 1e-6, \
            f"{names[i]} at {[round(v) for v in a]} px: outside the {width:.0f} × {height:.0f} px plot"
        for j, b in enumerate(boxes[:i]):
            shared = labels.overlap_px((a[0] - gap, a[1] - gap, a[2] + gap, a[3] + gap), b)
            assert shared == 0, f"{names[i]} {[round(v) for v in a]} and {names[j]} {[round(v) for v in b]}: {shared:.0f} px² shared"
        for j, mark in enumerate(marks):
            if j != i:
                shared = labels.overlap_px(a, mark)
                assert shared == 0, f"{names[i]} covers {names[j]}'s marker: {shared:.0f} px²"


def test_names_on_the_default_runs_plane_do_not_overlap() -> None:
    """The default run's countries and capitals: egypt and india, cairo and delhi, japan, kenya and spain sit
    close; every name goes where its box meets no other name and no other point."""
    from scenarios.masked_causal.figures import plane_figure
    from scenarios.records import Records
    figure = plane_figure(Records(plane_frame(DEFAULT_PLANE)), {"skip-gram (SGNS)": "#2ca02c"}, len(DEFAULT_PLANE))
    assert len(figure.data) == len(DEFAULT_PLANE), len(figure.data)
    assert_names_apart(figure)


def test_names_of_points_that_coincide_are_placed_apart() -> None:
    """Three countries on one spot, their capitals on another: six names, none over another."""
    from scenarios.masked_causal.figures import plane_figure
    from scenarios.records import Records
    plane = dict(list(DEFAULT_PLANE.items())[:4])
    for country in list(plane)[:3]:
        plane[country] = (1.0, 0.3, -1.5, 0.05, plane[country][4])
    figure = plane_figure(Records(plane_frame(plane)), {"skip-gram (SGNS)": "#2ca02c"}, len(plane))
    assert_names_apart(figure)


def test_names_on_the_plane_of_a_default_skip_gram_run_do_not_overlap() -> None:
    """The skip-gram arm run at the defaults (seed 0; ~3 s), its plane drawn from its own records."""
    import pandas as pd
    from engines.sequence.word2vec import sgns_records
    from scenarios.masked_causal import Config, sgns_arm
    from scenarios.masked_causal.figures import SGNS, plane_figure
    from scenarios.records import Records
    config = Config()
    rows = [(SGNS, r.step, name, float(value)) for r in sgns_records(sgns_arm(config)) if r is not None
            for name, value in r.metrics.items() if name.startswith("plane/")]
    figure = plane_figure(Records(pd.DataFrame(rows, columns=["arm", "step", "metric", "value"])), {SGNS: "#2ca02c"},
                          config.countries)
    assert len(figure.data) == config.countries, len(figure.data)
    assert_names_apart(figure)


def test_the_analogy_title_never_breaks_inside_its_notation() -> None:
    """The page wraps a long title at spaces: "a : b :: c" / ": ? (3CosAdd)" broke the notation. Its parts are
    joined by no-break spaces, so every break the page may take falls outside it."""
    from tests.tiny_runs import tiny_frame
    figure = SCENARIO.figures(tiny_frame(SCENARIO.id), SCENARIO.validate(SCENARIO.tiny))["analogy"]
    title = str(figure.layout.title.text)
    words = title.split(" ")
    assert "a\u00a0:\u00a0b\u00a0::\u00a0c\u00a0:\u00a0?" in words, f"the title's break points split {words}"
