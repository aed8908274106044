"""RLHF beside DPO, asserted: the Bradley–Terry loss, PPO's clipped objective and group baseline,
the KL-regularized optimum π_ref·exp(r/β), both methods reaching it with an exact reward model,
and reward over-optimization with a fitted one.

Thresholds were calibrated over seeds 0-4 (ranges in the docstrings).
"""
import math

import pytest
import torch

from engines.loop.records import StepRecord
from engines.rl import dpo, rlhf, rlhf_worlds
from engines.rl.dpo_tasks import SequenceSetup, TabularTask, TinyLM, sequence_logps
from scenarios import get_scenario

SCENARIO = get_scenario("rlhf-ppo")
EXACT = {"level": "tabular", "labels": "soft", "beta": 0.1, "lr": 0.1, "steps": 400}  # the preset


def records(arm) -> list[StepRecord]:
    return [item for item in arm if isinstance(item, StepRecord)]


def test_reward_model_loss_is_the_bradley_terry_negative_log_likelihood() -> None:
    """−log σ(r_w − r_l) by hand for hard labels; −[p·log σ(Δ) + (1 − p)·log σ(−Δ)] for soft ones,
    which is torch's binary cross-entropy on the logit Δ."""
    chosen, rejected, soft = [0.3, -1.2, 2.0], [0.1, 0.4, -0.5], [0.9, 0.6, 0.5]
    hard = rlhf.bradley_terry_loss(torch.tensor(chosen), torch.tensor(rejected))
    for i, (w, l) in enumerate(zip(chosen, rejected)):
        expected = -math.log(1 / (1 + math.exp(-(w - l))))
        assert hard[i].item() == pytest.approx(expected, rel=1e-6), f"pair {i}: {hard[i].item()} vs {expected}"
    margin = torch.tensor(chosen) - torch.tensor(rejected)
    losses = rlhf.bradley_terry_loss(torch.tensor(chosen), torch.tensor(rejected), torch.tensor(soft))
    reference = torch.nn.functional.binary_cross_entropy_with_logits(margin, torch.tensor(soft), reduction="none")
    assert torch.allclose(losses, reference, atol=1e-7), f"{losses.tolist()} vs BCE {reference.tolist()}"


def test_the_fitted_reward_models_first_loss_is_log_2_and_its_records_are_the_loss() -> None:
    """Free scores start equal (0): every pair's probability is ½, the loss log 2 exactly."""
    world = rlhf_worlds.tabular_world(8, "hard", 0.0, 64, seed=0)
    first = records(rlhf.reward_model_arm(world, 3, 0.05, 1, {}))[0]
    assert first.metrics["loss"] == math.log(2), f"first loss {first.metrics['loss']!r}"


def test_ppo_clipped_objective_equals_the_formula() -> None:
    """−min(ρA, clip(ρ, 1−ε, 1+ε)A) per sample, ρ = exp(log π − log π_old); the clipped samples are
    those whose clipped term is the smaller, and exactly they pass no gradient."""
    generator = torch.Generator().manual_seed(0)
    old = torch.randn(200, generator=generator, dtype=torch.float64)
    logps = (old + 0.4 * torch.randn(200, generator=generator, dtype=torch.float64)).requires_grad_(True)
    advantages = torch.randn(200, generator=generator, dtype=torch.float64)
    clip = 0.2
    losses, clipped = rlhf.ppo_loss(logps, old, advantages, clip)
    for i in range(200):
        ratio, a = math.exp(logps[i].item() - old[i].item()), advantages[i].item()
        by_hand = -min(ratio * a, min(max(ratio, 1 - clip), 1 + clip) * a)
        assert losses[i].item() == pytest.approx(by_hand, rel=1e-12, abs=1e-15), f"sample {i}"
    losses.sum().backward()
    outside = (((logps - old).exp() > 1 + clip) & (advantages > 0)) | (((logps - old).exp() < 1 - clip) & (advantages < 0))
    assert torch.equal(clipped, outside.detach()), "clipped ≠ {ρ > 1+ε, A > 0} ∪ {ρ < 1−ε, A < 0}"
    assert (logps.grad[clipped] == 0).all() and (logps.grad[~clipped] != 0).all()
    assert 0.1 < clipped.double().mean() < 0.9, f"clip fraction {clipped.double().mean():.2f}: both kinds tested"


def test_group_baseline_is_the_mean_of_the_others() -> None:
    rewards = torch.tensor([[1.0, 2.0, 6.0], [0.0, 0.0, 3.0]], dtype=torch.float64)
    advantages = rlhf.group_advantages(rewards)
    for p in range(2):
        for i in range(3):
            others = [rewards[p, j].item() for j in range(3) if j != i]
            assert advantages[p, i].item() == pytest.approx(rewards[p, i].item() - sum(others) / 2, abs=1e-12)


def test_the_first_ppo_epoch_has_ratio_one_exactly() -> None:
    """One epoch per rollout: every update is the first on its samples, π = π_old, nothing is clipped."""
    world = rlhf_worlds.sequence_world("hard", 0.0, 64, seed=0)
    rm = torch.zeros_like(world.rewards)
    logged = records(rlhf.ppo_arm(world, rm, 0.1, 6, 0.05, epochs=1, prompts=4, group=4, clip=0.2, log_every=1, seed=0))
    assert all(r.metrics["ppo/clipfrac"] == 0 and r.metrics["ppo/approx_kl"] == 0 for r in logged), \
        [(r.metrics["ppo/clipfrac"], r.metrics["ppo/approx_kl"]) for r in logged]


@pytest.mark.parametrize("seed", [0, 3])
def test_the_kl_regularized_optimum_is_pi_ref_exp_r_over_beta(seed: int) -> None:
    """π* ∝ π_ref·exp(r/β) attains the closed-form maximum β·log Σ π_ref·e^{r/β} of E_π[r] − β·KL(π‖π_ref);
    its gradient in the logits is 0, and 100 random perturbations all score lower."""
    task, beta = TabularTask.make(8, seed), 0.2
    objective = lambda logits: (lambda lp: (lp.exp() * (task.rewards - beta * (lp - task.ref_logps))).sum())(  # noqa: E731
        logits.log_softmax(0))
    optimum = dpo.optimum_logps(task.ref_logps, task.rewards, beta).clone().requires_grad_(True)
    best = objective(optimum)
    closed_form = beta * torch.logsumexp(task.ref_logps + task.rewards / beta, 0)
    assert best.item() == pytest.approx(closed_form.item(), abs=1e-12), f"{best.item()} vs β·log Z {closed_form.item()}"
    (gradient,) = torch.autograd.grad(best, optimum)
    assert gradient.abs().max() < 1e-12, f"gradient at π*: {gradient.abs().max():.2e}"
    generator = torch.Generator().manual_seed(seed)
    worse = [objective(optimum.detach() + 0.1 * torch.randn(8, generator=generator, dtype=torch.float64)) for _ in range(100)]
    assert max(w.item() for w in worse) < best.item()


def test_bigram_table_and_the_reward_models_gather_equal_the_direct_computation() -> None:
    """The policy's enumerated table is sequence_logps of every row; the sequence reward model's
    per-case gather is its per-token sum computed directly."""
    setup = SequenceSetup.make(0)
    model = TinyLM(4, 32, 5, seed=1)
    with torch.no_grad():
        direct = setup.table(sequence_logps(model(setup.sequences), setup.sequences, setup.task.completion_mask()).double())
        fast = rlhf_worlds.bigram_table(setup.task)(model)
    assert (fast - direct).abs().max() < 1e-5, f"{(fast - direct).abs().max():.2e}"
    reward = rlhf_worlds.SequenceReward(setup.sequences, 4, 5, 8, seed=2)
    rows = torch.arange(0, 4096, 37)
    tokens = setup.sequences[rows]
    with torch.no_grad():
        hidden = torch.tanh(reward.prompt(tokens[:, :1]) + reward.token(tokens[:, 1:]) + reward.position(torch.arange(5)))
        by_token = reward.head(hidden).squeeze(-1).sum(-1).double()
        assert torch.allclose(reward(rows), by_token, atol=1e-5)


@pytest.fixture(scope="module")
def exact_run():
    return SCENARIO.run(EXACT)


def test_an_exact_reward_model_is_recovered_from_soft_labels(exact_run) -> None:
    """Soft Bradley–Terry labels on every pair: r_φ = r + c (max error after the shift ≤ 1e-4; seeds 0-4:
    ≤ 2e-5), every held-out pair ordered right, calibrated (error < 1e-3; seeds 0-4: ≤ 2e-6)."""
    fit = exact_run.summary["reward_model"]
    frame = exact_run.frame
    error = frame[(frame["arm"] == "reward model") & (frame["metric"] == "fitted/max_error")]["value"].iloc[-1]
    assert error < 1e-4 and fit["heldout/accuracy"] == 1.0 and fit["heldout/ece"] < 1e-3, (error, fit)


def test_both_methods_approach_pi_star_when_the_reward_model_is_exact(exact_run) -> None:
    """Tabular, exact reward model, β = 0.1, 400 updates: DPO lands on π* (total variation < 1e-6; seeds 0-4:
    ≤ 9e-10); PPO, sampling, gets within 0.06 (seeds 0-4: 0.0005-0.029) and under a sixth of π_ref's distance
    (seeds 0-4: 0.46-0.69)."""
    arms, frame = exact_run.summary["arms"], exact_run.frame
    start = frame[(frame["arm"] == "PPO") & (frame["metric"] == "tv_to_optimum") & (frame["step"] == 0)]["value"].iloc[0]
    assert arms["DPO"]["tv_to_optimum"] < 1e-6, arms["DPO"]
    assert arms["PPO"]["tv_to_optimum"] < min(0.06, start / 6), (arms["PPO"], f"π_ref's distance {start:.3f}")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 4])
def test_a_fitted_reward_model_is_over_optimized(seed: int) -> None:
    """Default run (512 hard-labelled pairs, β = 0.05): the reward model's own optimum earns under 0.75 of π*'s
    true reward (seeds 0-4: 0.33-0.64); PPO ends with its reward-model reward > 0.5 above its true reward (seeds
    0-4: 0.98-2.1) and its true reward below its peak (seeds 0-4: by 0.012-0.089; seeds 0 and 4 give back ≥ 25%
    of the rise, and the page says "reward over-optimization")."""
    result = SCENARIO.run({"seed": seed})
    optimum, ppo = result.summary["optimum"], result.summary["arms"]["PPO"]
    assert optimum["rm_optimum/true_reward"] < 0.75 * optimum["optimum/true_reward"], optimum
    assert ppo["rm_reward"] - ppo["true_reward"] > 0.5, ppo
    frame = result.frame
    true = frame[(frame["arm"] == "PPO") & (frame["metric"] == "true_reward")]["value"]
    assert true.iloc[-1] < true.max() - 0.005, f"PPO true reward: peak {true.max():.3f}, end {true.iloc[-1]:.3f}"
    assert "reward over-optimization" in SCENARIO.explain(frame, SCENARIO.validate({"seed": seed})).markdown()


def test_records_repeat_exactly() -> None:
    first, second = SCENARIO.run(SCENARIO.tiny), SCENARIO.run(SCENARIO.tiny)
    assert first.frame.equals(second.frame), "two runs of one config differ"


def test_the_reward_models_optimum_is_named_as_the_objectives_not_as_where_ppo_went() -> None:
    """The page said the optimum was "where PPO heads" while a later sentence put PPO at total variation 0.917
    from it: the sentence now names it as the optimum of the objective PPO maximises, a fact of the method."""
    from scenarios.records import Records
    from scenarios.rlhf_ppo.claims import reward_model
    sentence = reward_model(Records(SCENARIO.run(SCENARIO.tiny).frame))
    assert sentence is not None and "the objective PPO maximises" in sentence.text, sentence
    assert "heads" not in sentence.text, sentence.text
