"""The tokenization page's engine: compression against vocabulary size, the pre-split, the sentence, the budget."""
import pytest

from engines.sequence.tokenization import compute_params, lm_spec, planned_steps, tokenizer_records
from engines.sequence.lm import TinyLM
from engines.sequence.vocabulary import held_out_sentence, lm_vocab_sizes, supported_vocab
from scenarios import get_scenario
from scenarios.base import ConfigError


@pytest.fixture(scope="module")
def records() -> dict[bool, list]:
    return {pre: list(tokenizer_records(16, 1024, pre)) for pre in (True, False)}


def test_held_out_bytes_per_token_never_fall_as_merges_are_added(records) -> None:
    """A merge can only join tokens, never split one: the held-out text gets no longer, at any size."""
    for pre, recs in records.items():
        values = [r.metrics["bytes_per_token"] for r in recs]
        assert values[0] == 1.0 and all(a <= b for a, b in zip(values, values[1:])), f"pre_split={pre}: {values[:8]}…"
        assert values[-1] > 2.0, f"pre_split={pre}: only {values[-1]:.2f} bytes per token at 1024 tokens"


def test_the_pre_split_leaves_no_token_across_a_word_boundary(records) -> None:
    pre, raw = records[True][-1].metrics["spanning_tokens"], records[False][-1].metrics["spanning_tokens"]
    assert pre == 0 and raw > 50, f"tokens across words: {pre:.0f} with the pre-split, {raw:.0f} without"


def test_the_sentence_is_cut_into_tokens_that_cover_it_exactly(records) -> None:
    metrics = records[True][-1].metrics
    sentence = held_out_sentence().encode()
    assert bytes(int(metrics[f"sentence/byte_{i:03d}"]) for i in range(len(sentence))) == sentence
    counts = []
    for size in lm_vocab_sizes(1024):
        lengths = [v for k, v in metrics.items() if k.startswith(f"sentence/v_{size:04d}/len_")]
        assert sum(lengths) == len(sentence), f"{size} tokens cover {sum(lengths)} of {len(sentence)} bytes"
        counts.append(len(lengths))
    assert counts[0] == len(sentence) and counts[0] > counts[1] > counts[2], f"tokens at {lm_vocab_sizes(1024)}: {counts}"


def test_every_vocabulary_gets_the_same_training_flops_to_one_step() -> None:
    """C = 6·N·tokens: steps × N is the byte model's budget, to within one of this model's steps."""
    budget = 150 * compute_params(TinyLM(lm_spec(256, 0)))
    for size in (512, 1024, 2048, 4096):
        n = compute_params(TinyLM(lm_spec(size, 0)))
        spent = planned_steps(size, 150) * n
        assert abs(spent - budget) <= n / 2, f"{size} tokens: {spent:.3g} against {budget:.3g} (one step {n})"


def test_a_vocabulary_larger_than_the_text_supports_is_refused_naming_the_field() -> None:
    supported = supported_vocab(16)
    scenario = get_scenario("tokenization")
    assert scenario.validate({"prose_kib": "16", "vocab_size": str(supported)}).prose_kib == 16  # as the CLI passes it
    with pytest.raises(ConfigError, match=rf"^vocab_size={supported + 1} is more than 16 KiB of prose supports "
                                          rf"\({supported} tokens"):
        scenario.validate({"prose_kib": 16, "vocab_size": supported + 1})


def tiny_page():
    from tests.tiny_runs import tiny_frame
    scenario = get_scenario("tokenization")
    frame, config = tiny_frame("tokenization"), scenario.validate(scenario.tiny)
    return scenario.figures(frame, config), str(scenario.explain(frame, config))


def test_the_vocabulary_cost_chart_right_axis_has_its_own_round_ticks() -> None:
    """Plotly syncs an overlaying axis's ticks to the left axis's grid lines (2.328, 2.666, …) unless told 'auto'."""
    figures, _ = tiny_page()
    right = figures["vocab_cost"].layout.yaxis2
    assert right.overlaying == "y" and right.tickmode == "auto" and right.showgrid is False, right


def test_charts_alone_in_their_row_take_the_page_width_and_the_lengths_legend_clears_its_axis_title() -> None:
    """Token lengths (between two full-width figures) and the gradient norm (last, after a pair): full width;
    the lengths legend starts 0.3 of the plot's height below it (at 0.2 it sat on the x axis's title)."""
    from scenarios.plotting import is_full_width
    figures, _ = tiny_page()
    assert is_full_width(figures["sentence"]) and is_full_width(figures["pre_split"])
    assert is_full_width(figures["token_lengths"]) and is_full_width(figures["grad_norm"])
    legend = figures["token_lengths"].layout.legend
    assert legend.orientation == "h" and legend.y <= -0.3, f"token lengths legend at y={legend.y}"


def test_bytes_per_token_listed_together_share_two_decimals() -> None:
    """'1.00 with the 256 bytes alone; 3.65 …', never a bare 1 beside 3.65."""
    _, text = tiny_page()
    listed = text.split("bytes per token: ", 1)[1].split(" with the 256 bytes alone", 1)[0]
    assert listed == "1.00", text
