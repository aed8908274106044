"""Our DPO and PPO losses against trl's formulas, transcribed from trl's documentation (trl is not a
dependency): docs/source/dpo_trainer.md ("Computing the loss", "Logged metrics"), grpo_trainer.md (the
clipped surrogate objective and `clip_ratio/region_mean`), rloo_trainer.md (the leave-one-out advantage,
its vectorized listing) and ppo_trainer.md (`objective/rlhf_reward` = score − β·KL)."""
import torch

from engines.rl import rlhf_worlds
from engines.rl.dpo import dpo_loss
from engines.rl.rlhf import group_advantages, ppo_loss, rollouts

GENERATOR_SEED = 7


def draws(*shape: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(GENERATOR_SEED + len(shape) + sum(shape))
    return torch.randn(*shape, generator=generator, dtype=torch.float64)


def test_dpo_loss_and_its_logged_rewards_are_trls() -> None:
    """L = −log σ(β(log π(y⁺)/π_ref(y⁺) − log π(y⁻)/π_ref(y⁻))); rewards/chosen, /rejected = β·log π/π_ref of
    each; margins their difference; accuracies where chosen > rejected. Over β ∈ {0.05, 0.5, 5}."""
    chosen, rejected = draws(64) * 3 - 10, draws(64, 1)[:, 0] * 3 - 10
    ref_chosen, ref_rejected = chosen + draws(2, 64)[0], rejected + draws(2, 64)[1]
    for beta in (0.05, 0.5, 5.0):
        losses, chosen_rewards, rejected_rewards = dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta)
        inner = beta * (torch.log(chosen.exp() / ref_chosen.exp()) - torch.log(rejected.exp() / ref_rejected.exp()))
        trl = -torch.log(torch.sigmoid(inner))
        gap = (losses - trl).abs().max().item()
        assert gap < 1e-12, f"β={beta}: loss differs from trl's by {gap:.2e}"
        assert torch.allclose(chosen_rewards, beta * (chosen - ref_chosen), rtol=0, atol=1e-12), beta
        assert torch.allclose(rejected_rewards, beta * (rejected - ref_rejected), rtol=0, atol=1e-12), beta
        margins = (chosen_rewards - rejected_rewards).mean().item()
        assert abs(margins - (inner.mean().item())) < 1e-12, f"β={beta}: margins {margins} vs {inner.mean().item()}"
        accuracy = (chosen_rewards > rejected_rewards).double().mean().item()
        assert 0.2 < accuracy < 0.8, f"a mixed batch: accuracy {accuracy}"  # the check above is not vacuous


def test_ppo_clipped_surrogate_and_clip_region_are_trls() -> None:
    """Per sample −min(r·Â, clip(r, 1 − ε, 1 + ε)·Â), r = π/π_old; the clipped samples are trl's clip region:
    (r < 1 − ε and Â < 0) or (r > 1 + ε and Â > 0). Over ε ∈ {0.1, 0.2, 0.3}."""
    old, advantages = draws(500) - 2, draws(500, 1)[:, 0]
    new = old + 0.4 * draws(2, 500)[0]
    for epsilon in (0.1, 0.2, 0.3):
        losses, clipped = ppo_loss(new, old, advantages, epsilon)
        ratio = new.exp() / old.exp()
        trl = -torch.minimum(ratio * advantages, torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * advantages)
        gap = (losses - trl).abs().max().item()
        assert gap < 1e-12, f"ε={epsilon}: loss differs from trl's by {gap:.2e}"
        region = ((ratio < 1 - epsilon) & (advantages < 0)) | ((ratio > 1 + epsilon) & (advantages > 0))
        assert torch.equal(clipped, region), f"ε={epsilon}: {int((clipped != region).sum())} samples differ"
        assert 0 < int(region.sum()) < len(region), "some clipped, some not"


def test_group_advantages_are_rloo_leave_one_out_as_trl_vectorizes_it() -> None:
    """trl's listing: rewards laid out (k, prompts); baseline = (sum over k − r)/(k − 1); Â = r − baseline."""
    for k in (2, 4, 7):
        rewards = draws(5, k)  # ours: (prompts, k)
        trl_layout = rewards.T
        baseline = (trl_layout.sum(0) - trl_layout) / (k - 1)
        trl = (trl_layout - baseline).T
        gap = (group_advantages(rewards) - trl).abs().max().item()
        assert gap < 1e-12, f"k={k}: differs from trl's RLOO advantage by {gap:.2e}"


def test_a_rollouts_advantages_are_rloo_of_the_rlhf_reward() -> None:
    """Each sample's reward is trl's rlhf_reward: the reward model's score − β·(log π_old − log π_ref) of
    that sample (a one-sample KL), and the advantage is its leave-one-out within the prompt's group."""
    world = rlhf_worlds.tabular_world(8, "hard", 0.0, 64, seed=0)
    policy = world.new_policy()
    with torch.no_grad():
        policy.parameters[0].add_(draws(8))  # away from π_ref: the KL term is not zero
    rm, beta, prompts, group = draws(1, 8), 0.3, 3, 4
    rollout = next(rollouts(world, policy, rm, beta, prompts, group, epochs=1, seed=0))
    with torch.no_grad():
        kl = policy.rows(rollout.rows) - world.reference_rows(rollout.rows)
    rlhf_reward = (rm.reshape(-1)[rollout.rows] - beta * kl).view(prompts, group).T  # trl's (k, prompts)
    baseline = (rlhf_reward.sum(0) - rlhf_reward) / (group - 1)
    trl = (rlhf_reward - baseline).T.reshape(-1)
    assert kl.abs().max() > 0.1, f"the policy differs from the reference: |KL| up to {kl.abs().max():.3f}"
    gap = (rollout.advantages - trl).abs().max().item()
    assert gap < 1e-12, f"advantages differ from trl's by {gap:.2e}"
