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


# --- what the page draws and says (the tiny run's records) ------------------------------------------
def tiny_page() -> tuple[object, dict, str]:
    """The page's figures, its per-position floors and its sentences, from the tiny run (seed 0)."""
    from scenarios.records import Records
    from tests.tiny_runs import tiny_frame
    scenario = get_scenario("next-token")
    frame, config = tiny_frame("next-token"), scenario.validate(scenario.tiny)
    records = Records(frame)
    floors = {int(m.rsplit("_", 1)[1]): records.first("topic lines: exact", m)
              for m in records.metrics("topic lines: exact") if m.startswith("floor/pos_")}
    return scenario.figures(frame, config), floors, str(scenario.explain(frame, config))


def reference(figure, words: str):
    """The gray line named in the legend whose name holds `words`."""
    found = [t for t in figure.data if t.name and words in t.name]
    assert len(found) == 1, f"lines named with {words!r}: {[t.name for t in figure.data]}"
    return found[0]


def test_the_two_source_entropies_are_named_apart_each_the_mean_of_its_positions() -> None:
    """The loss chart's floor is H, every position's mean; the temperature chart's line, only the drawn
    positions' (2 … 17, or to the line's end): each legend name says which, and the sentence gives both."""
    figures, floors, text = tiny_page()
    rate, drawn = np.mean(list(floors.values())), [p for p in floors if 2 <= p < 18]
    floor = reference(figures["heldout_loss"], "entropy rate H")
    own = reference(figures["temperature"], "source's entropy")
    assert f"(positions 0–{len(floors) - 1})" in floor.name, floor.name
    assert f"(positions {drawn[0]}–{drawn[-1]})" in own.name, own.name
    assert abs(floor.y[0] - rate) < 1e-12 and abs(own.y[0] - np.mean([floors[p] for p in drawn])) < 1e-12, \
        f"H {floor.y[0]:.4f} against {rate:.4f}; drawn {own.y[0]:.4f}"
    from scenarios.claims import three_digits
    assert f"at the positions drawn ({drawn[0]}–{drawn[-1]}) is {three_digits(own.y[0])}" in text, text
    assert f"the entropy rate H under the held-out loss, {three_digits(rate)}," in text, text


def test_reference_lines_are_named_in_the_legend_not_written_on_the_chart() -> None:
    """No label on a line a curve could cross: the floor, the counted baselines and the drawn positions'
    entropy are legend entries (gray lines across the curves' steps)."""
    figures, _, _ = tiny_page()
    for name, words in (("heldout_loss", ("entropy rate H", "bigram (counted)", "unigram (counted)")),
                        ("prose_loss", ("bigram (counted)", "unigram (counted)")), ("temperature", ("source's entropy",))):
        figure = figures[name]
        labels = [a.text for a in figure.layout.annotations if a.text]
        assert not figure.layout.shapes and not labels, f"{name}: lines {len(figure.layout.shapes)}, labels {labels}"
        for words_ in words:
            assert reference(figure, words_).line.color == "gray"


def test_numbers_listed_together_share_one_format() -> None:
    """A share under 0.001 beside larger ones: the same decimals for all, never a power of ten among plain numbers."""
    from scenarios.claims import listed_format
    for values, shown in (([9.77e-4, 0.043, 0.357], ["0.001", "0.043", "0.357"]), ([0.66, 1.04, 1.89], ["0.660", "1.04", "1.89"]),
                          ([2e-4, 0.052, 1.91], ["0.00", "0.05", "1.91"]), ([0.0, 0.0052, 0.31], ["0", "0.00520", "0.310"])):
        written = [listed_format(values)(v) for v in values]
        assert written == shown, f"{values} written {written}"
    _, _, text = tiny_page()
    assert "×10" not in text, text


def test_a_deterministic_sources_zero_entropy_reads_0_000_not_rounding_noise() -> None:
    """branching=1: every drawn position's entropy is 0 up to float rounding (1.59e-17): written 0.000."""
    from scenarios.claims import three_digits
    assert [three_digits(v) for v in (1.59e-17, 0.0, 0.0870, 1.0004, 0.903)] == ["0.000", "0", "0.0870", "1.00", "0.903"]


def test_a_chart_alone_in_its_row_takes_the_page_width_and_legends_below_clear_the_axis_title() -> None:
    """The gradient norm stands alone after two pairs: full width; each legend under a plot starts 0.3 of its
    height below it (0.2 put a four-row legend's first row on the x axis's title)."""
    from scenarios.plotting import is_full_width
    figures, _, _ = tiny_page()
    assert is_full_width(figures["grad_norm"]) and not is_full_width(figures["exposure"])
    for name in ("heldout_loss", "exposure", "prose_loss", "temperature"):
        legend = figures[name].layout.legend
        assert legend.orientation == "h" and legend.y <= -0.3, f"{name}: legend at y={legend.y}"
