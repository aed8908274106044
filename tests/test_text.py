"""The text sources: prose from the standard library's docstrings, and a Markov source whose entropy rate is exact."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from engines.sequence.text import (HELD_OUT_EVERY, clean_paragraph, entropy_nats, markov_corpus, markov_source, prose,
                                   prose_paragraphs)

ROOT = Path(__file__).resolve().parent.parent


def test_the_entropy_rate_matches_a_monte_carlo_estimate() -> None:
    """Σ π(s) H(P(·|s)) against the mean −ln P(w_t | state) over a long sample, per token and per byte."""
    for order, branching, seed in ((1, 4, 0), (2, 3, 1), (3, 2, 2)):
        source = markov_source(12, order, branching, seed=seed)
        ids = source.sample(120_000, seed=7)
        estimate = float(-source.log_prob(ids).mean())
        assert abs(estimate - source.entropy_rate) < 0.02 * source.entropy_rate, \
            f"order {order}: Monte Carlo {estimate:.4f} nats against exact {source.entropy_rate:.4f}"
        bytes_per_token = len(source.text(ids).encode()) / len(ids)
        assert abs(bytes_per_token - source.bytes_per_token) < 0.01 * source.bytes_per_token, \
            f"order {order}: {bytes_per_token:.4f} bytes per word against exact {source.bytes_per_token:.4f}"
        per_byte = estimate / bytes_per_token
        assert abs(per_byte - source.entropy_rate_per_byte) < 0.03 * source.entropy_rate_per_byte, \
            f"order {order}: {per_byte:.4f} nats per byte against exact {source.entropy_rate_per_byte:.4f}"


def test_the_stationary_distribution_is_stationary_and_the_rate_below_the_unigram_entropy() -> None:
    """π P = π to rounding; conditioning on the state can only lower the entropy: H ≤ H(unigram) ≤ ln V."""
    source = markov_source(16, 2, 4, seed=3)
    vocab, states = source.vocab, source.vocab ** source.order
    moved = np.zeros(states)
    for state in np.flatnonzero(source.stationary):
        for word in np.flatnonzero(source.table[state]):
            moved[(state * vocab + word) % states] += source.stationary[state] * source.table[state, word]
    gap = np.abs(moved - source.stationary).max()
    assert gap < 1e-12, f"|πP − π| = {gap:.2e}"
    unigram = float(entropy_nats(source.word_marginal))
    assert source.entropy_rate < unigram < np.log(vocab), f"H {source.entropy_rate:.3f}, unigram {unigram:.3f}, ln V {np.log(vocab):.3f}"


def test_the_markov_source_is_deterministic_given_its_seeds() -> None:
    """The same seeds give the same table and samples; another seed gives others."""
    a, b = markov_source(10, 2, 3, seed=5), markov_source(10, 2, 3, seed=6)
    again = markov_source.__wrapped__(10, 2, 3, seed=5)  # built afresh, not the cached one
    assert np.array_equal(a.table, again.table) and not np.array_equal(a.table, b.table)
    assert np.array_equal(a.sample(500, 1), again.sample(500, 1)) and not np.array_equal(a.sample(500, 1), a.sample(500, 2))


def test_the_held_out_samples_share_no_window_with_the_training_sample() -> None:
    """Train and held-out are independent samples: no 24-word window of one appears in the other."""
    source = markov_source(16, 2, 4, seed=0)
    train, held_out = markov_corpus(source, 20_000, 4_000, seed=0)
    windows = {tuple(train[i:i + 24]) for i in range(len(train) - 24)}
    shared = sum(tuple(held_out[i:i + 24]) in windows for i in range(0, len(held_out) - 24, 8))
    assert shared == 0, f"{shared} held-out windows also occur in training"


def test_the_prose_split_is_disjoint_and_holds_out_every_tenth_paragraph() -> None:
    corpus = prose()
    overlap = set(corpus.train) & set(corpus.held_out)
    assert not overlap, f"{len(overlap)} paragraphs in both splits"
    paragraphs = prose_paragraphs()
    assert len(corpus.held_out) == len(paragraphs) // HELD_OUT_EVERY and corpus.held_out[0] == paragraphs[HELD_OUT_EVERY - 1]
    assert corpus.size_bytes > 50_000, f"only {corpus.size_bytes} bytes of prose"
    assert corpus.hash48 == int(corpus.sha256[:12], 16) and corpus.hash48 < 2 ** 53


def test_the_prose_is_the_same_in_a_fresh_interpreter_with_another_hash_seed() -> None:
    """Fixed module list, fixed order: another process (another PYTHONHASHSEED) hashes the same text."""
    code = "from engines.sequence.text import prose; c = prose(); print(c.sha256, c.size_bytes)"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-1000:]
    corpus = prose()
    assert result.stdout.split() == [corpus.sha256, str(corpus.size_bytes)], f"{result.stdout} against {corpus.sha256}"


def test_cleaning_keeps_prose_and_drops_code_doctests_and_fragments() -> None:
    assert clean_paragraph("Return a new   list containing\nall items from the iterable in ascending order.") == \
        "Return a new list containing all items from the iterable in ascending order."
    for code in (">>> sorted([3, 1, 2])\n[1, 2, 3]", "Usage:\n    foo(bar=1)", "x = {'a': [1, 2], 'b': (3, 4)} # __init__",
                 "See also."):
        assert clean_paragraph(code) is None, code


def test_the_topic_lines_entropy_rate_matches_a_monte_carlo_estimate() -> None:
    """(1/L) Σ_j H_j against the mean −ln P(token | line so far) of a long sample, per token and per byte."""
    from engines.sequence.topics import topic_lines
    for topics, own, branching, length, seed in ((2, 10, 3, 16, 0), (3, 8, 2, 8, 1), (1, 12, 4, 5, 2)):
        source = topic_lines(topics, 16, own, branching, length, seed=seed)
        ids = source.sample(12_000, seed=3)
        estimate = float(-source.log_prob(ids).mean())
        assert abs(estimate - source.entropy_rate) < 0.02 * source.entropy_rate, \
            f"topics {topics}: Monte Carlo {estimate:.4f} nats against exact {source.entropy_rate:.4f}"
        bytes_per_token = len(source.text(ids).encode()) / len(ids)
        assert abs(bytes_per_token - source.bytes_per_token) < 0.01 * source.bytes_per_token, \
            f"topics {topics}: {bytes_per_token:.4f} bytes per token against exact {source.bytes_per_token:.4f}"


def test_every_sampled_token_is_one_the_source_allows_and_each_line_keeps_its_topic() -> None:
    from engines.sequence.topics import topic_lines
    source = topic_lines(2, 16, 8, 3, 12, seed=4)
    ids = source.sample(300, seed=5)
    lines = ids.reshape(-1, source.line_length)
    allowed = source.allowed_next(lines[:, :-1])  # positions 1 … L−1
    taken = np.take_along_axis(allowed, lines[:, 1:, None], -1)
    assert taken.all(), f"{(~taken).sum()} sampled tokens the source forbids"
    words = lines[:, 1:] - source.topics
    foreign = ~source.allowed[lines[:, :1], words]
    assert not foreign.any(), f"{foreign.sum()} words outside their line's topic"
    rows = source.next_distribution(np.zeros(3, int), np.array([0, 1, 5]), np.array([0, 3, 7]))
    assert np.allclose(rows.sum(1), 1.0), rows.sum(1)
