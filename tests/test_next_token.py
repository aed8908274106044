"""Next-token prediction's physics: the entropy floor, the counted baselines, exposure bias, temperature, the units."""
import functools
import math

import numpy as np
import pytest

from engines.sequence.lm import LMSpec
from engines.sequence.next_token import LMArm, counted_ngrams, prose_corpus, topic_corpus, topic_lm_records
from scenarios import get_scenario
from scenarios.base import ConfigError

LINE, CONTEXT = 32, 32


@functools.cache
def teacher_forced(seed: int, steps: int) -> tuple[float, list[dict[str, float]]]:
    """The page's teacher-forced arm on topic lines (2 topics, branching 3): the exact rate and its records."""
    source = topic_corpus(2, 3, LINE, seed)[0]
    arm = LMArm(LMSpec(source.vocab, CONTEXT, d_model=48, layers=1, heads=2, seed=seed), steps, 1e-2, 25)
    return source.entropy_rate, [r.metrics for r in topic_lm_records(arm, 2, 3, LINE, seed) if r is not None]


def quarter_median(metrics: dict[str, float], mode: str, last: bool) -> float:
    profile = {int(k.rsplit("_", 1)[1]): v for k, v in metrics.items() if k.startswith(f"exposure/{mode}/")}
    positions = sorted(profile)
    picked = positions[-len(positions) // 4:] if last else positions[: len(positions) // 4]
    return float(np.median([profile[p] for p in picked]))


def check_floor(seed: int, steps: int) -> None:
    rate, records = teacher_forced(seed, steps)
    held = [m["heldout_nats"] for m in records]
    assert min(held) > rate, f"seed {seed}: held-out {min(held):.4f} nats crossed the entropy rate {rate:.4f}"
    first_gap, last_gap = held[0] - rate, held[-1] - rate
    assert last_gap < first_gap / 8, f"seed {seed}: gap to the floor {first_gap:.3f} → {last_gap:.3f} nats"


def check_exposure(seed: int, steps: int) -> None:
    """Free running, the error at the line's end is over twice the teacher-forced one there, and it grew
    along the line by more than the teacher-forced error did."""
    metrics = teacher_forced(seed, steps)[1][-1]
    tf = [quarter_median(metrics, "teacher_forced", last) for last in (False, True)]
    fr = [quarter_median(metrics, "free_running", last) for last in (False, True)]
    assert fr[1] > 2 * tf[1], f"seed {seed}: at the line's end free running {fr[1]:.4f} against teacher-forced {tf[1]:.4f}"
    assert fr[1] / fr[0] > tf[1] / tf[0], f"seed {seed}: growth free running {fr[0]:.4f}→{fr[1]:.4f}, forced {tf[0]:.4f}→{tf[1]:.4f}"


def test_held_out_loss_approaches_the_entropy_rate_and_never_crosses_it() -> None:
    check_floor(0, 200)


def test_free_running_error_grows_along_the_line_past_the_teacher_forced_error() -> None:
    check_exposure(0, 200)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_the_floor_and_exposure_bias_hold_at_other_seeds(seed: int) -> None:
    check_floor(seed, 200)
    check_exposure(seed, 200)


def test_the_model_beats_the_counted_bigram_which_beats_the_unigram() -> None:
    rate, records = teacher_forced(0, 200)
    source, train, held_out = topic_corpus(2, 3, LINE, 0)
    counted = counted_ngrams(train, held_out, source.vocab, np.ones(source.vocab, dtype=np.int64))
    model = records[-1]["heldout_nats"]
    assert rate < model < counted["bigram"]["heldout_nats"] < counted["unigram"]["heldout_nats"], \
        f"floor {rate:.3f}, model {model:.3f}, bigram {counted['bigram']['heldout_nats']:.3f}, " \
        f"unigram {counted['unigram']['heldout_nats']:.3f}"


def test_sampling_entropy_rises_with_temperature() -> None:
    metrics = teacher_forced(0, 200)[1][-1]
    entropy = [metrics[f"sampling/entropy/T_{t:.2f}"] for t in (0.5, 0.75, 1.0, 1.5, 2.0)]
    assert all(a < b for a, b in zip(entropy, entropy[1:])), f"entropy by temperature {entropy}"


def test_on_bytes_bits_per_byte_is_nats_over_ln2_and_perplexity_is_e_to_the_loss() -> None:
    _, train, held_out = prose_corpus(256)
    counted = counted_ngrams(train, held_out, 256, np.ones(256, dtype=np.int64))["bigram"]
    assert abs(counted["heldout_bpb"] - counted["heldout_nats"] / math.log(2)) < 1e-12, counted
    assert abs(counted["heldout_ppl"] - math.exp(counted["heldout_nats"])) < 1e-9, counted


def test_a_line_longer_than_the_context_is_refused_naming_the_field() -> None:
    scenario = get_scenario("next-token")
    with pytest.raises(ConfigError, match=r"^line_length=32 is longer than the model's context \(context=16\)"):
        scenario.validate({"line_length": 32, "context": 16})
