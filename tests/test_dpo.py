"""DPO β, asserted: the loss and its identities, the exact tabular optimum, and what β does.

Thresholds were calibrated over seeds 0-4 (ranges in the comments).
"""
import math

import pytest
import torch

from engines.rl import dpo, dpo_tasks
from scenarios import get_scenario

SCENARIO = get_scenario("dpo-beta")
LOG2 = math.log(2)


@pytest.fixture(scope="module")
def default_run():
    return SCENARIO.run({})


def test_loss_at_init_is_log_2_exactly(default_run) -> None:
    """π = π_ref makes every implicit reward 0: loss log 2 bit for bit, accuracy 0, KL 0, in both levels."""
    for arm, info in default_run.summary["arms"].items():
        assert info["first_loss"] == LOG2, f"{arm}: first loss {info['first_loss']!r} vs log 2 {LOG2!r}"
    frame = default_run.frame
    first = frame[(frame["step"] == 0) & frame["arm"].str.contains("β=")]
    for metric in ("rewards/accuracies", "rewards/margins", "kl"):
        values = first[first["metric"] == metric]["value"]
        assert len(values) and (values == 0).all(), f"{metric} at step 0: {values.tolist()}"


def hand_sequence_logp(logits: list[list[float]], tokens: list[int]) -> float:
    """log π(y|x) with plain floats: logits[t] predicts tokens[t+1]; the prompt (tokens[0]) is not scored."""
    total = 0.0
    for t in range(len(tokens) - 1):
        row = logits[t]
        total += row[tokens[t + 1]] - math.log(sum(math.exp(v) for v in row))
    return total


def test_loss_equals_the_formula_with_summed_completion_logps() -> None:
    """−log σ(β[(log π(y_w) − log π_ref(y_w)) − (log π(y_l) − log π_ref(y_l))]), log-probs summed over
    completion tokens, computed by hand with floats for four pairs."""
    task, beta = dpo_tasks.EchoTask(vocab=4, length=5), 0.3
    reference = dpo_tasks.frozen_copy(dpo_tasks.TinyLM(task.vocab, 32, task.length, seed=0))
    policy = dpo_tasks.TinyLM(task.vocab, 32, task.length, seed=1)  # a different policy: non-zero rewards
    tokens = task.sequences()[torch.tensor([5, 900, 1500, 2222, 3001, 4095, 17, 2048])]  # (8, 6): 4 chosen, 4 rejected
    mask = task.completion_mask()
    with torch.no_grad():
        logps = dpo_tasks.sequence_logps(policy(tokens).double(), tokens, mask)
        ref_logps = dpo_tasks.sequence_logps(reference(tokens).double(), tokens, mask)
        losses, chosen_rewards, rejected_rewards = dpo.dpo_loss(logps[:4], logps[4:], ref_logps[:4], ref_logps[4:], beta)
        policy_logits, ref_logits = policy(tokens).double().tolist(), reference(tokens).double().tolist()
    for i in range(4):
        w, l = i, i + 4
        hand = {name: hand_sequence_logp(table[row], tokens[row].tolist())
                for name, table, row in [("pw", policy_logits, w), ("pl", policy_logits, l),
                                         ("rw", ref_logits, w), ("rl", ref_logits, l)]}
        margin = beta * ((hand["pw"] - hand["rw"]) - (hand["pl"] - hand["rl"]))
        expected = -math.log(1 / (1 + math.exp(-margin)))
        assert losses[i].item() == pytest.approx(expected, rel=1e-9), f"pair {i}: {losses[i].item()} vs hand {expected}"
        assert chosen_rewards[i].item() == pytest.approx(beta * (hand["pw"] - hand["rw"]), rel=1e-9)
        assert rejected_rewards[i].item() == pytest.approx(beta * (hand["pl"] - hand["rl"]), rel=1e-9)


def test_soft_label_is_trl_label_smoothing() -> None:
    """A soft label p is trl's sigmoid loss with label_smoothing ε = 1 − p:
    −(1−ε)·log σ(β·h) − ε·log σ(−β·h), h = log-ratio margin."""
    chosen, rejected, ref, beta = [-3.0, -1.0], [-2.0, -4.0], -2.5, 0.5
    losses, _, _ = dpo.dpo_loss(torch.tensor(chosen), torch.tensor(rejected), torch.tensor([ref] * 2),
                                torch.tensor([ref] * 2), beta, torch.tensor([0.8, 0.6]))
    log_sigmoid = lambda x: -math.log1p(math.exp(-x))  # noqa: E731
    for i, smoothing in enumerate((0.2, 0.4)):
        h = (chosen[i] - ref) - (rejected[i] - ref)
        expected = -(1 - smoothing) * log_sigmoid(beta * h) - smoothing * log_sigmoid(-beta * h)
        assert losses[i].item() == pytest.approx(expected, rel=1e-6), f"pair {i}: {losses[i].item()} vs {expected}"


def test_enumerated_completions_are_a_distribution_and_the_reference_stays_frozen() -> None:
    """Σ_y π(y|x) = 1 over every completion of each prompt (so KL and E[r] are exact); training leaves π_ref untouched."""
    setup = dpo_tasks.SequenceSetup.make(seed=0)
    totals = setup.table(setup.ref_logps).exp().sum(-1)
    assert torch.allclose(totals, torch.ones_like(totals), atol=1e-5), f"Σπ_ref per prompt {totals.tolist()}"
    before = [p.clone() for p in setup.reference.parameters()]
    prefs = setup.task.preferences(setup.ref_logps, setup.rewards, "soft", 0.0, 128, seed=1)
    list(dpo.sequence_arm(setup, prefs, 0.1, 5, 0.05, 5))
    assert all(torch.equal(a, b) for a, b in zip(before, setup.reference.parameters())), "the reference moved"


@pytest.mark.parametrize("seed", [0, 3])
def test_tabular_dpo_with_soft_labels_converges_to_pi_ref_exp_r_over_beta(seed: int) -> None:
    """500 full-batch Adam steps land on π* ∝ π_ref·exp(r/β) within total variation 1e-6 (seeds 0-4: ≤ 2e-10)."""
    task = dpo_tasks.TabularTask.make(8, seed)
    prefs = task.preferences("soft", 0.0, 0, seed + 1)
    for beta in (0.05, 0.5, 1.0, 5.0):
        last = list(dpo.tabular_arm(task, prefs, beta, steps=500, lr=0.1, log_every=500))[-1]
        tv = last.metrics["tv_to_optimum"]
        assert tv < 1e-6, f"β={beta}: total variation to π* {tv:.2e}"


def test_smaller_beta_gives_higher_reward_and_higher_kl(default_run) -> None:
    """Down the sweep 5 → 0.05, E[r] and KL rise monotonically in both levels (all seeds 0-4)."""
    arms = default_run.summary["arms"]
    for level, info in default_run.summary["levels"].items():
        row = [(a["beta"], round(a["true_reward"], 3), round(a["kl"], 4)) for a in arms.values() if a["level"] == level]
        assert info["smaller_beta_more_reward_and_kl"], f"{level}: (β, E[r], KL) = {row}"


def test_large_beta_stays_near_the_reference(default_run) -> None:
    """β = 5: KL(π‖π_ref) < 0.05 nats in both levels (seeds 0-4: tabular ≤ 0.002, sequence ≤ 0.003),
    while β = 0.05 moves > 1 nat."""
    arms = default_run.summary["arms"]
    for level in ("tabular", "sequence"):
        near, far = arms[f"{level} β=5"]["kl"], arms[f"{level} β=0.05"]["kl"]
        assert near < 0.05 and far > 1.0, f"{level}: KL at β=5 {near:.4f}, at β=0.05 {far:.3f}"


def test_both_go_down_at_small_beta_in_the_sequence_level(default_run) -> None:
    """β = 0.05: mean log π of chosen and of rejected both fall by > 2 nats (seeds 0-4: chosen −4.7 to −6.0,
    rejected −8.2 to −10.1), and the policy's mass leaves the dataset's completions (0.41-0.60 → 0.06-0.33);
    at β = 0.5 chosen rises instead (seeds 0-4: +0.10 to +0.14)."""
    small, mid = default_run.summary["arms"]["sequence β=0.05"], default_run.summary["arms"]["sequence β=0.5"]
    chosen_drop = small["chosen_logp"] - small["first_chosen_logp"]
    rejected_drop = small["rejected_logp"] - small["first_rejected_logp"]
    assert chosen_drop < -2 and rejected_drop < -2, f"Δlog π chosen {chosen_drop:.2f}, rejected {rejected_drop:.2f}"
    assert small["policy_mass"] < small["first_policy_mass"] - 0.1, \
        f"mass on dataset completions {small['first_policy_mass']:.2f} → {small['policy_mass']:.2f}"
    assert mid["chosen_logp"] > mid["first_chosen_logp"], \
        f"β=0.5 chosen {mid['first_chosen_logp']:.2f} → {mid['chosen_logp']:.2f}"
    assert "Both go down" in SCENARIO.explain(default_run.frame, SCENARIO.validate({})).markdown()


def test_label_noise_tilts_the_policy_less() -> None:
    """Flipping 20% of labels shrinks every Bradley–Terry margin, so at the same β the fitted policy
    moves less far from π_ref (lower KL) and earns less reward."""
    task = dpo_tasks.TabularTask.make(8, 0)
    results = {}
    for noise in (0.0, 0.2):
        prefs = task.preferences("soft", noise, 0, 1)
        results[noise] = list(dpo.tabular_arm(task, prefs, 0.1, 300, 0.1, 300))[-1].metrics
    assert results[0.2]["kl"] < 0.8 * results[0.0]["kl"], f"KL {results[0.0]['kl']:.3f} → {results[0.2]['kl']:.3f}"
    assert results[0.2]["true_reward"] < results[0.0]["true_reward"]


def test_records_use_trl_names_and_repeat_exactly() -> None:
    """trl's log names appear in every arm; the same config gives identical records."""
    first, second = SCENARIO.run(SCENARIO.tiny), SCENARIO.run(SCENARIO.tiny)
    names = set(first.frame["metric"])
    for name in ("loss", "rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies", "kl", "true_reward"):
        assert name in names, f"missing {name}"
    assert first.frame.equals(second.frame), "two runs of one config differ"


def test_a_spiking_arm_is_drawn_off_the_top_with_its_peak_named_and_log_2_is_a_legend_entry() -> None:
    """Sequence β=5 spiked to 1.02 and squashed nine curves into 0.67-0.70, where the log 2 label sat on them: the
    range follows the other curves and log 2, the spiking arm's legend says its peak; without a spike, no range."""
    import pandas as pd
    from scenarios.dpo_beta.figures import follow_bulk
    from scenarios.plotting import curves_figure
    from scenarios.records import Records
    bulk = {f"β={b}": [LOG2, 0.69, 0.68, 0.675] for b in (0.05, 0.1, 0.5, 1)}
    for curves, spiking in ((bulk, False), ({**bulk, "β=5": [LOG2, 1.02, 0.8, 0.7]}, True)):
        records = Records(pd.DataFrame([(arm, step, "loss", value) for arm, values in curves.items()
                                        for step, value in enumerate(values)], columns=["arm", "step", "metric", "value"]))
        figure = curves_figure(records, {}, "loss", arms=list(curves), chance=LOG2, chance_label="log 2 (π = π_ref)",
                               chance_in_legend=True, title="", y_title="loss")
        figure = follow_bulk(figure, records, list(curves), "loss", LOG2)
        names = [trace.name for trace in figure.data]
        assert not figure.layout.annotations or spiking, [note.text for note in figure.layout.annotations]
        if spiking:
            low, high = figure.layout.yaxis.range
            assert low < 0.675 and LOG2 < high < 0.8, f"y range {low:.3f} to {high:.3f}"
            assert "β=5 (▲ peak 1.02)" in names and len(figure.layout.annotations) == 1, names
        else:
            assert figure.layout.yaxis.range is None, figure.layout.yaxis.range
        assert any("log 2" in str(name) for name in names), names
