"""Grokking: the task's labels and split, the Fourier algebra of the embedding (Parseval, projections),
grokking with weight decay and none without it, and the key frequencies that carry the accuracy."""
import math

import pytest
import torch

from engines.supervised.grokking import (ModularAddition, frequency_shares, keep_frequencies, ranked_frequencies,
                                         remove_frequencies)
from scenarios import get_scenario
from scenarios.base import ConfigError
from scenarios.grokking.figures import DECAY, NO_DECAY
from scenarios.records import Records
from tests.sentence_checks import explained_and_holding

SCENARIO = get_scenario("grokking")


def run(**overrides) -> tuple[Records, dict]:
    frame, summary = SCENARIO.run(overrides)
    return Records(frame), summary


def test_the_task_labels_every_pair_with_its_sum_mod_p_and_splits_them_once() -> None:
    task = ModularAddition(23, 0.4, seed=3)
    assert len(task.train_pairs) == round(0.4 * 23 ** 2) and len(task.train_pairs) + len(task.test_pairs) == 23 ** 2
    seen = {tuple(pair) for pair in task.train_pairs.tolist()} | {tuple(pair) for pair in task.test_pairs.tolist()}
    assert len(seen) == 23 ** 2, f"{len(seen)} distinct pairs of {23 ** 2}"
    for pairs, labels in ((task.train_pairs, task.train_labels), (task.test_pairs, task.test_labels)):
        assert all((a + b) % 23 == c for (a, b), c in zip(pairs.tolist(), labels.tolist()))


@pytest.mark.parametrize("p", [23, 47])
def test_frequency_shares_follow_parseval_and_find_a_planted_frequency(p) -> None:
    """A pure cos/sin embedding at frequency 5 puts all of its share there; a random one's shares sum to 1, and
    Σ_x ‖E_x − mean‖² = (1/p) Σ_{j≠0} ‖F_j‖² (Parseval)."""
    x = torch.arange(p, dtype=torch.float64)[:, None]
    planted = torch.cat([torch.cos(2 * math.pi * 5 * x / p), 3 * torch.sin(2 * math.pi * 5 * x / p)], dim=1) + 7.0
    shares = frequency_shares(planted)
    assert abs(shares[4].item() - 1) < 1e-12, f"p={p}: share at k=5 {shares[4].item()!r}"
    assert ranked_frequencies(planted)[0] == 5
    embed = torch.randn(p, 6, generator=torch.Generator().manual_seed(p), dtype=torch.float64)
    assert abs(frequency_shares(embed).sum().item() - 1) < 1e-12
    centred = (embed - embed.mean(0)).square().sum().item()
    spectrum = torch.fft.fft(embed, dim=0)
    assert abs(centred - spectrum[1:].abs().square().sum().item() / p) < 1e-9 * centred


def test_keeping_and_removing_frequencies_split_the_embedding_exactly() -> None:
    p = 31
    embed = torch.randn(p, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    every = list(range(1, (p - 1) // 2 + 1))
    assert torch.allclose(keep_frequencies(embed, every), embed, atol=1e-12), "all frequencies and the constant: E itself"
    key = [3, 7, 11]
    kept, rest = keep_frequencies(embed, key, constant=False), remove_frequencies(embed, key)
    assert torch.allclose(kept + rest, embed, atol=1e-12)
    assert torch.allclose(keep_frequencies(kept, key, constant=False), kept, atol=1e-12), "a projection: idempotent"
    shares = frequency_shares(keep_frequencies(embed, key))
    outside = sum(shares[k - 1].item() for k in every if k not in key)
    assert outside < 1e-20, f"share left outside the kept frequencies: {outside:.2e}"
    assert abs((kept * rest).sum().item()) < 1e-9, "the two parts are orthogonal"


@pytest.mark.parametrize("field, value", [("p", 45), ("p", 61), ("key_frequencies", 6), ("train_fraction", 0.95),
                                          ("lr", 0.5)])
def test_bad_input_is_refused_naming_the_field(field, value) -> None:
    config = {field: value, "p": 23} if field == "key_frequencies" else {field: value}
    with pytest.raises(ConfigError) as refused:
        SCENARIO.validate(config)
    assert field in str(refused.value), str(refused.value)


def test_with_weight_decay_it_groks_and_without_it_does_not_small() -> None:
    """A small fast version (p = 29, 70% of the pairs, 64 hidden units, 500 steps): the decay arm fits its training
    pairs within tens of steps and generalizes hundreds of steps later (measured: 45, 306); the arm without decay
    does not."""
    records, summary = run(p=29, train_fraction=0.7, hidden=64, steps=500, key_frequencies=4, seed=0)
    decay, free = summary["steps"][DECAY], summary["steps"][NO_DECAY]
    assert decay["train_100"] is not None and decay["train_100"] <= 60, f"decay arm fitted at step {decay['train_100']}"
    assert decay["test_95"] is not None and decay["test_95"] - decay["train_100"] >= 200, summary["steps"]
    assert free["train_100"] is not None and free["test_95"] is None, summary["steps"]
    assert summary["test_acc"][NO_DECAY] < 0.1, f"no decay: held-out accuracy {summary['test_acc'][NO_DECAY]:.3f}"
    assert summary["weight_norm"][DECAY] < summary["weight_norm"][NO_DECAY], summary["weight_norm"]


def assert_grokked_and_distilled(summary: dict, label: str) -> None:
    decay, free = summary["steps"][DECAY], summary["steps"][NO_DECAY]
    assert decay["train_100"] is not None and decay["train_100"] <= 100, f"{label}: fitted at {decay['train_100']}"
    assert decay["test_95"] is not None and decay["test_95"] >= decay["train_100"] + 300, f"{label}: {summary['steps']}"
    assert free["test_95"] is None and summary["test_acc"][NO_DECAY] < 0.1, f"{label}: no decay {summary['test_acc']}"
    share, restricted, control = (summary[key][DECAY] for key in ("key_share", "restricted_acc", "control_acc"))
    assert share > 0.7, f"{label}: key frequencies carry {share:.3f} of the embedding"
    assert restricted > 0.95 and control < 0.3, f"{label}: key-only {restricted:.3f}, others {control:.3f}"
    assert summary["key_share"][NO_DECAY] < 0.5, f"{label}: no decay, top-k share {summary['key_share'][NO_DECAY]:.3f}"


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_at_the_defaults_it_groks_and_the_key_frequencies_carry_the_accuracy(seed) -> None:
    _, summary = run(seed=seed)
    assert_grokked_and_distilled(summary, f"defaults, seed {seed}")


@pytest.mark.slow
@pytest.mark.parametrize("overrides", [{"seed": 3, "p": 37}, {"seed": 4, "p": 59}])
def test_off_the_defaults_it_groks_and_the_key_frequencies_carry_the_accuracy(overrides) -> None:
    _, summary = run(**overrides)
    assert_grokked_and_distilled(summary, str(overrides))


@pytest.mark.parametrize("overrides", [{"seed": 5, "p": 29, "steps": 300, "key_frequencies": 3, "hidden": 64},
                                       {"seed": 9, "p": 23, "train_fraction": 0.7, "steps": 400, "key_frequencies": 2,
                                        "weight_decay": 3.0, "embed_dim": 16}])
def test_every_claim_holds_off_the_defaults(overrides) -> None:
    records, _ = run(**overrides)
    explanation = explained_and_holding(SCENARIO, overrides, records)
    assert DECAY in explanation.markdown() and NO_DECAY in explanation.markdown()


def test_the_key_share_is_said_of_the_squared_norm_that_the_spectrum_bars_draw() -> None:
    """The sentence said the key frequencies "carry 92.7% of its norm" beside bars of "% of the embedding's
    squared norm" that sum to 92.7: the words name the squared norm, and the number is the bars' sum."""
    import re
    from tests.tiny_runs import tiny_frame
    frame, config = tiny_frame(SCENARIO.id), SCENARIO.validate(SCENARIO.tiny)
    records, text = Records(frame), str(SCENARIO.explain(frame, config))
    figure = SCENARIO.figures(frame, config)["spectrum"]
    bars = next(bar for bar in figure.data if bar.name == DECAY)
    key = {int(records.last(DECAY, f"key/rank_{r:02d}")) for r in range(config.key_frequencies)}
    drawn = sum(y for x, y in zip(bars.x, bars.y) if x in key)
    said = re.search(rf"{re.escape(DECAY)}'s embedding at the last step: .*?carry ([\d.]+)% of its (\w+ ?\w*),", text)
    assert said is not None, text
    assert said.group(2) == "squared norm" and "squared norm" in figure.layout.yaxis.title.text, \
        f"said: of its {said.group(2)!r}; the bars: {figure.layout.yaxis.title.text!r}"
    assert abs(float(said.group(1)) - drawn) < 0.05 + 1e-9, f"said {said.group(1)}%, the key bars sum to {drawn:.2f}%"
