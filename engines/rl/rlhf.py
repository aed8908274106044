"""RLHF's classic recipe (Ouyang et al. 2022): a Bradley–Terry reward model, then PPO against it.

1. Reward model. Preference pairs say which of two responses a labeller preferred. The
   Bradley–Terry model reads a score r_φ into a probability, P(y_w ≻ y_l) = σ(r_φ(y_w) − r_φ(y_l)),
   and the reward model is fitted by its negative log-likelihood (`bradley_terry_loss`).
   Scores are fixed only up to a constant per prompt; we shift them so that E_π_ref[r_φ] =
   E_π_ref[r], which makes the true and the proxy reward curves start together.
2. PPO (Schulman et al. 2017) maximises E_π[r_φ] − β·KL(π‖π_ref): responses sampled from the
   current policy π_old score R = r_φ(x, y) − β·log(π_old(y|x)/π_ref(y|x)) (the KL penalty in the
   reward, as InstructGPT and trl do); the baseline is a *group baseline*: G responses per
   prompt, each one's advantage its R minus the mean R of the other G − 1 (leave-one-out, as
   RLOO; no value network). Each rollout is reused for a few epochs of the clipped surrogate
   min(ρ·A, clip(ρ, 1 − ε, 1 + ε)·A), ρ = π(y)/π_old(y) (`ppo_loss`); the clip fraction is the
   share of samples whose clipped term is the smaller one (trl's `clipfrac`: no gradient there).
3. DPO at the same β on the same pairs (engines.rl.dpo), for comparison: it fits the same
   Bradley–Terry model with the policy's implicit reward and needs no sampling.

The optimum of the KL-regularised objective is π* ∝ π_ref·exp(r/β): PPO heads for the one of
its reward model, π_ref·exp(r_φ/β). Where r_φ is wrong, optimising it harder (small β, many
steps) can raise r_φ while the true reward falls — reward over-optimization (Gao et al. 2022).
Every training loop here is `engines.loop.training.train`; rollouts are its batch stream.
"""
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import train
from engines.rl.dpo import optimum_logps, policy_stats, train_dpo
from engines.rl.rlhf_worlds import Policy, World

CALIBRATION_BINS = 10


# --- the two losses ----------------------------------------------------------------------
def bradley_terry_loss(chosen: torch.Tensor, rejected: torch.Tensor, label: torch.Tensor | float = 1.0) -> torch.Tensor:
    """Per pair −[p·log σ(r_w − r_l) + (1 − p)·log σ(r_l − r_w)], p = P(chosen ≻ rejected) (1 for a hard label)."""
    margin = chosen - rejected
    return -label * F.logsigmoid(margin) - (1 - label) * F.logsigmoid(-margin)


def ppo_loss(logps: torch.Tensor, old_logps: torch.Tensor, advantages: torch.Tensor,
             clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sample −min(ρ·A, clip(ρ, 1 − ε, 1 + ε)·A) with ρ = exp(log π − log π_old), and where the
    clipped term is the smaller (those samples pass no gradient)."""
    ratio = (logps - old_logps).exp()
    unclipped = ratio * advantages
    clipped = ratio.clamp(1 - clip, 1 + clip) * advantages
    return -torch.minimum(unclipped, clipped), clipped < unclipped


def group_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """(prompts, G) rewards -> each one's reward minus the mean of the other G − 1 of its prompt."""
    group = rewards.shape[-1]
    return group / (group - 1) * (rewards - rewards.mean(-1, keepdim=True))


# --- 1. the reward model ---------------------------------------------------------------------
def fitted_table(world: World, scores: torch.Tensor) -> torch.Tensor:
    """r_φ of every response (prompts × responses), shifted per prompt so that E_π_ref[r_φ] = E_π_ref[r]."""
    table = scores.detach().double().view_as(world.rewards)
    probs = world.ref_logps.exp()
    shift = (probs * world.rewards).sum(-1, keepdim=True) - (probs * table).sum(-1, keepdim=True)
    return table + shift


def reward_model_stats(world: World, table: torch.Tensor, calibration: bool) -> dict[str, float]:
    """On the held-out pairs: accuracy against the true reward's order (pairs with a true gap),
    the Bradley–Terry NLL of their labels, and the gap between predicted and labeller probability
    (expected calibration error over CALIBRATION_BINS bins; each bin's means when `calibration`)."""
    flat, rewards, held = table.reshape(-1), world.rewards.reshape(-1), world.heldout
    true_gap = rewards[held.chosen] - rewards[held.rejected]
    score_gap = flat[held.chosen] - flat[held.rejected]
    ordered = true_gap != 0
    predicted, actual = torch.sigmoid(score_gap), world.heldout_p
    bins = (predicted * CALIBRATION_BINS).long().clamp(max=CALIBRATION_BINS - 1)
    ece, out = 0.0, {}
    for b in range(CALIBRATION_BINS):
        members = bins == b
        if members.any():
            mean_predicted, mean_actual = float(predicted[members].mean()), float(actual[members].mean())
            ece += float(members.double().mean()) * abs(mean_predicted - mean_actual)
            if calibration:
                out.update({f"calibration/bin_{b:02d}/predicted": mean_predicted,
                            f"calibration/bin_{b:02d}/labeller": mean_actual,
                            f"calibration/bin_{b:02d}/pairs": float(members.sum())})
    accuracy = float(((score_gap > 0) == (true_gap > 0))[ordered].double().mean()) if ordered.any() else 0.5
    return {"heldout/accuracy": accuracy, "heldout/loss": float(bradley_terry_loss(score_gap, 0.0, held.label).mean()),
            "heldout/ece": ece, **out}


def reward_model_arm(world: World, steps: int, lr: float, log_every: int,
                     built: dict) -> Iterator[StepRecord | Diverged | None]:
    """Fit r_φ on the pairs by Bradley–Terry NLL (full batch, Adam); then one record more (step
    `steps`) of the fitted model: held-out accuracy, calibration, r_φ against r. Leaves the shifted
    r_φ table in `built["rm"]`."""
    model = world.new_reward_model()
    every = torch.arange(world.rewards.numel())
    pairs = world.prefs
    rows = torch.cat([pairs.chosen, pairs.rejected])

    def objective(batch, logging: bool):
        chosen, rejected = model(rows).split(len(pairs.chosen))
        loss = bradley_terry_loss(chosen, rejected, pairs.label).mean()
        return loss, {"accuracy": (chosen > rejected).double().mean()}

    def on_log(step: int) -> dict[str, float]:
        with torch.no_grad():
            return reward_model_stats(world, fitted_table(world, model(every)), calibration=False)

    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for item in train(model, optimizer, iter(lambda: None, 0), objective, steps, log_every=log_every, on_log=on_log):
        yield item
        if isinstance(item, Diverged):
            return
    with torch.no_grad():
        table = fitted_table(world, model(every))
    built["rm"] = table
    flat, true = table.reshape(-1), world.rewards.reshape(-1)
    centred = lambda t: t - t.mean()  # noqa: E731
    correlation = float((centred(flat) * centred(true)).sum() / (centred(flat).norm() * centred(true).norm()))
    yield StepRecord(steps, {**reward_model_stats(world, table, calibration=True), "fitted/correlation": correlation,
                             "fitted/max_error": float((flat - true).abs().max())})


# --- what every policy arm measures ------------------------------------------------------------
def evaluator(world: World, policy: Policy, rm: torch.Tensor, beta: float, keep_probs_at: int):
    """step -> exact KL(π‖π_ref), E_π[r], E_π[r_φ] and the total variation to π* and to π*_φ (its
    reward model's optimum); for one prompt, π's probabilities at step `keep_probs_at`."""
    optimum = optimum_logps(world.ref_logps, world.rewards, beta).exp()
    rm_optimum = optimum_logps(world.ref_logps, rm, beta).exp()

    def evaluate(step: int) -> dict[str, float]:
        with torch.no_grad():
            logps = policy.table().double()
        probs = logps.exp()
        kl, reward = policy_stats(logps, world.ref_logps, world.rewards)
        tv = lambda target: float(0.5 * (probs - target).abs().sum(-1).mean())  # noqa: E731
        out = {"kl": kl, "true_reward": reward, "rm_reward": policy_stats(logps, world.ref_logps, rm)[1],
               "tv_to_optimum": tv(optimum), "tv_to_rm_optimum": tv(rm_optimum)}
        if step == keep_probs_at and len(probs) == 1:
            out.update({f"policy/response_{k:02d}": p for k, p in enumerate(probs[0].tolist())})
        return out
    return evaluate


# --- 2. PPO ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rollout:
    rows: torch.Tensor        # (samples,) flat response indices
    old_logps: torch.Tensor   # (samples,) log π_old
    advantages: torch.Tensor  # (samples,)
    rm_reward: torch.Tensor   # mean r_φ of the samples
    kl_penalty: torch.Tensor  # mean log(π_old/π_ref) of the samples: a one-sample KL estimate


def rollouts(world: World, policy: Policy, rm: torch.Tensor, beta: float, prompts: int, group: int, epochs: int,
             seed: int) -> Iterator[Rollout]:
    """Sample `group` responses for each of `prompts` prompts from the current policy (exactly: from
    its enumerated table), score them, and hand the same rollout out `epochs` times."""
    generator = torch.Generator().manual_seed(seed)
    n_prompts, n_responses = world.rewards.shape
    flat_rm = rm.reshape(-1)
    while True:
        with torch.no_grad():
            table = policy.table().double()
            picked = torch.randint(n_prompts, (prompts,), generator=generator)
            drawn = torch.multinomial(table[picked].exp(), group, replacement=True, generator=generator)  # (prompts, G)
            rows = (picked[:, None] * n_responses + drawn).reshape(-1)
            old = policy.rows(rows)  # computed as the update computes it: ρ = 1 exactly in the first epoch
            log_ratio = (old - world.reference_rows(rows)).view(prompts, group)
            scores = flat_rm[rows].view(prompts, group)
            advantages = group_advantages(scores - beta * log_ratio).reshape(-1)
        rollout = Rollout(rows, old, advantages, scores.mean(), log_ratio.mean())
        for _ in range(epochs):
            yield rollout


def ppo_arm(world: World, rm: torch.Tensor, beta: float, steps: int, lr: float, *, epochs: int, prompts: int,
            group: int, clip: float, log_every: int, seed: int) -> Iterator[StepRecord | Diverged | None]:
    """PPO with Adam for `steps` updates, `epochs` per rollout; metrics averaged over each log window."""
    policy = world.new_policy()
    evaluate = evaluator(world, policy, rm, beta, steps - 1)

    def objective(batch: Rollout, logging: bool):
        logps = policy.rows(batch.rows)
        losses, clipped = ppo_loss(logps, batch.old_logps, batch.advantages, clip)
        log_ratio = logps.detach() - batch.old_logps
        return losses.mean(), {"ppo/clipfrac": clipped.double().mean(), "ppo/approx_kl": 0.5 * (log_ratio ** 2).mean(),
                               "rollout/rm_reward": batch.rm_reward, "rollout/kl_penalty": batch.kl_penalty}

    optimizer = torch.optim.Adam(policy.parameters, lr=lr, foreach=True)
    yield from train(None, optimizer, rollouts(world, policy, rm, beta, prompts, group, epochs, seed), objective,
                     steps, log_every=log_every, on_log=evaluate, window=True)


# --- 3. DPO beside it, and the optimum -------------------------------------------------------------
def dpo_arm(world: World, rm: torch.Tensor, beta: float, steps: int, lr: float, *, batch_pairs: int | None,
            log_every: int, seed: int) -> Iterator[StepRecord | Diverged | None]:
    policy = world.new_policy()
    yield from train_dpo(policy.rows, world.reference_rows, policy.parameters, world.prefs, beta, steps, lr,
                         evaluate=evaluator(world, policy, rm, beta, steps - 1), batch_pairs=batch_pairs,
                         log_every=log_every, seed=seed)


def optimum_records(world: World, rm: torch.Tensor, beta: float, betas: list[float]) -> Iterator[StepRecord]:
    """Step 0: π*'s and π*_φ's numbers at `beta` (for one prompt, each response's π_ref, r, r_φ, π*, π*_φ);
    then one step per β of `betas`: the exact frontiers of the true reward and of the reward model."""
    def at(target: torch.Tensor, b: float, prefix: str) -> dict[str, float]:
        logps = optimum_logps(world.ref_logps, target, b)
        kl, reward = policy_stats(logps, world.ref_logps, world.rewards)
        return {f"{prefix}/kl": kl, f"{prefix}/true_reward": reward,
                f"{prefix}/rm_reward": policy_stats(logps, world.ref_logps, rm)[1]}
    first = {**at(world.rewards, beta, "optimum"), **at(rm, beta, "rm_optimum"),
             "reference/true_reward": policy_stats(world.ref_logps, world.ref_logps, world.rewards)[1]}
    if len(world.rewards) == 1:
        columns = {"reference": world.ref_logps.exp(), "true_reward": world.rewards, "rm": rm,
                   "optimum": optimum_logps(world.ref_logps, world.rewards, beta).exp(),
                   "rm_optimum": optimum_logps(world.ref_logps, rm, beta).exp()}
        first.update({f"{name}/response_{k:02d}": v for name, column in columns.items()
                      for k, v in enumerate(column[0].tolist())})
    for index, b in enumerate(betas):
        frontier = {"frontier/beta": b, **{f"frontier/{k.split('/')[1]}": v for k, v in at(world.rewards, b, "x").items()},
                    **{f"rm_frontier/{k.split('/')[1]}": v for k, v in at(rm, b, "x").items()}}
        yield StepRecord(index, {**(first if index == 0 else {}), **frontier})
