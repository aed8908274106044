"""Direct Preference Optimization (Rafailov et al., NeurIPS 2023) at two sizes.

RLHF maximises E_π[r] − β·KL(π‖π_ref). Its optimum is closed-form, π*(y) ∝ π_ref(y)·exp(r(y)/β),
so a policy implies a reward: r(y) = β·log(π(y)/π_ref(y)) + β·log Z. Put that into the
Bradley–Terry model P(y_w ≻ y_l) = σ(r(y_w) − r(y_l)) and Z cancels, leaving a loss on
preference pairs alone:

    L = −log σ(β[(log π(y_w) − log π_ref(y_w)) − (log π(y_l) − log π_ref(y_l))]).

β·(log π − log π_ref) is the *implicit reward* that trl logs as rewards/chosen and
rewards/rejected. At initialisation π = π_ref, every implicit reward is 0 and the loss is
exactly log 2.

Both policies (engines/rl/dpo_tasks.py: a tabular policy over K responses, a tiny LM over
enumerable sequences) train in the one loop, `engines.loop.training.train`: the objective is the
pairwise loss with trl's logged quantities, averaged over each log window (`window=True`);
`on_log` adds the exact KL, true reward and dataset log-probabilities of the policy the
window ended on, before its update.
"""
import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import train
from engines.rl.dpo_tasks import Labels, Preferences, SequenceSetup, TabularTask, sequence_logps

Rows = Callable[[torch.Tensor], torch.Tensor]  # table rows -> their log-probabilities


# --- the loss ------------------------------------------------------------------------
def dpo_loss(chosen_logps: torch.Tensor, rejected_logps: torch.Tensor, ref_chosen_logps: torch.Tensor,
             ref_rejected_logps: torch.Tensor, beta: float,
             label: torch.Tensor | float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-pair sigmoid DPO loss and the implicit rewards of chosen and rejected.

    `label` = P(y_w ≻ y_l): 1 for a hard label, a Bradley–Terry probability for a soft one
    (trl's `label_smoothing` is 1 − label: the "conservative DPO" loss).
    """
    chosen_rewards = beta * (chosen_logps - ref_chosen_logps)        # β·log π/π_ref of y_w
    rejected_rewards = beta * (rejected_logps - ref_rejected_logps)  # β·log π/π_ref of y_l
    margin = chosen_rewards - rejected_rewards
    losses = -label * F.logsigmoid(margin) - (1 - label) * F.logsigmoid(-margin)
    return losses, chosen_rewards.detach(), rejected_rewards.detach()


def policy_stats(logps: torch.Tensor, ref_logps: torch.Tensor, rewards: torch.Tensor) -> tuple[float, float]:
    """Exact KL(π‖π_ref) in nats and E_π[r], averaged over prompts. Rows: prompts; columns: responses."""
    probs = logps.exp()
    kl = (probs * (logps - ref_logps)).sum(-1).mean()
    reward = (probs * rewards).sum(-1).mean()
    return float(kl), float(reward)


def optimum_logps(ref_logps: torch.Tensor, rewards: torch.Tensor, beta: float) -> torch.Tensor:
    """log π* with π* ∝ π_ref·exp(r/β), normalised per prompt (last dim)."""
    return (ref_logps + rewards / beta).log_softmax(-1)


def frontier(ref_logps: torch.Tensor, rewards: torch.Tensor, betas: list[float]) -> list[tuple[float, float, float]]:
    """(β, KL(π*‖π_ref), E_π*[r]) along the exact optimum: the best reward reachable at each KL."""
    return [(beta, *policy_stats(optimum_logps(ref_logps, rewards, beta), ref_logps, rewards)) for beta in betas]


# --- DPO in the shared loop --------------------------------------------------------------
def pair_batches(prefs: Preferences, batch_pairs: int | None, seed: int) -> Iterator[Preferences]:
    """Every pair each step, or `batch_pairs` pairs drawn uniformly at random (with replacement) each step."""
    generator = torch.Generator().manual_seed(seed)
    n_pairs = len(prefs.chosen)
    while True:
        if batch_pairs is None or batch_pairs >= n_pairs:
            yield prefs
            continue
        pick = torch.randint(n_pairs, (batch_pairs,), generator=generator)
        yield Preferences(prefs.chosen[pick], prefs.rejected[pick], prefs.label[pick])


def train_dpo(policy_logps: Rows, reference_logps: Rows, parameters: list[torch.Tensor], prefs: Preferences,
              beta: float, steps: int, lr: float, *, evaluate: Callable[[int], dict[str, float]],
              batch_pairs: int | None = None, log_every: int = 1, seed: int = 0,
              first: Mapping[str, float] | None = None) -> Iterator[StepRecord | Diverged | None]:
    """DPO with Adam on `prefs`; `policy_logps(rows)` gives log π of table rows (differentiable),
    `reference_logps(rows)` log π_ref of the same rows, computed the same way so that the two
    agree bit for bit at initialisation (loss exactly log 2, accuracy exactly 0).

    trl's logged metrics are averaged over the steps since the last log; `evaluate(step)` adds
    exact quantities (KL, true reward) of the policy the window ended on, before this update;
    `first` is added to the first record (π*'s numbers for this β)."""
    def objective(batch: Preferences, logging: bool):
        rows = torch.cat([batch.chosen, batch.rejected])  # one forward for both sides
        chosen_logps, rejected_logps = policy_logps(rows).split(len(batch.chosen))
        with torch.no_grad():
            ref_chosen, ref_rejected = reference_logps(rows).split(len(batch.chosen))
        losses, chosen_rewards, rejected_rewards = dpo_loss(chosen_logps, rejected_logps, ref_chosen, ref_rejected,
                                                            beta, batch.label)
        return losses.mean(), {
            "rewards/chosen": chosen_rewards.mean(), "rewards/rejected": rejected_rewards.mean(),
            "rewards/margins": (chosen_rewards - rejected_rewards).mean(),
            "rewards/accuracies": (chosen_rewards > rejected_rewards).double().mean(),
            "logps/chosen": chosen_logps.detach().mean(), "logps/rejected": rejected_logps.detach().mean()}

    def on_log(step: int) -> dict[str, float]:
        measured = {**(first or {})} if step == 0 else {}
        measured.update(evaluate(step))
        with torch.no_grad():  # every pair at once, not a batch window: the "both go down" plot
            chosen, rejected = policy_logps(torch.cat([prefs.chosen, prefs.rejected])).split(len(prefs.chosen))
            measured["dataset/logps_chosen"], measured["dataset/logps_rejected"] = \
                torch.stack([chosen.mean(), rejected.mean()]).tolist()
        return measured

    optimizer = torch.optim.Adam(parameters, lr=lr, foreach=True)  # foreach: fewer kernel calls per step
    yield from train(None, optimizer, pair_batches(prefs, batch_pairs, seed), objective, steps, log_every=log_every,
                     on_log=on_log, window=True)


def tabular_arm(task: TabularTask, prefs: Preferences, beta: float, steps: int, lr: float, log_every: int,
                first: Mapping[str, float] | None = None) -> Iterator[StepRecord | Diverged | None]:
    """The tabular policy: free logits over K responses, starting at π_ref (so the loss starts at log 2).
    Its probabilities are recorded at the last step (the dots of the learned-vs-π* plot)."""
    ref_logits = task.ref_logps  # frozen; both sides take log_softmax, so they agree bit for bit at init
    logits = ref_logits.clone().requires_grad_(True)
    optimum = optimum_logps(task.ref_logps, task.rewards, beta)

    def evaluate(step: int) -> dict[str, float]:
        with torch.no_grad():
            logps = logits.log_softmax(0)
            kl, reward = policy_stats(logps, ref_logits.log_softmax(0), task.rewards)
            tv = 0.5 * float((logps.exp() - optimum.exp()).abs().sum())
            probs = logps.exp().tolist() if step == steps - 1 else []
        return {"kl": kl, "true_reward": reward, "tv_to_optimum": tv,
                **{f"policy/response_{k:02d}": p for k, p in enumerate(probs)}}

    yield from train_dpo(lambda rows: logits.log_softmax(0)[rows], lambda rows: ref_logits.log_softmax(0)[rows],
                         [logits], prefs, beta, steps, lr, evaluate=evaluate, log_every=log_every, first=first)


def sequence_arm(setup: SequenceSetup, prefs: Preferences, beta: float, steps: int, lr: float, log_every: int,
                 batch_pairs: int = 64, seed: int = 0,
                 first: Mapping[str, float] | None = None) -> Iterator[StepRecord | Diverged | None]:
    """A trainable copy of the reference LM, trained by DPO on minibatches of the offline pairs."""
    # Same mode as the reference (eval: the model has no dropout or norm, so it only picks the
    # kernel), so policy and reference agree bit for bit at init: loss exactly log 2.
    policy = copy.deepcopy(setup.reference).requires_grad_(True)
    mask = setup.task.completion_mask()
    ref_table, reward_table = setup.table(setup.ref_logps), setup.table(setup.rewards)

    def logps_of(model: nn.Module) -> Rows:
        def logps(rows: torch.Tensor) -> torch.Tensor:
            tokens = setup.sequences[rows]  # (rows, 1+L)
            return sequence_logps(model(tokens), tokens, mask).double()
        return logps

    in_dataset = torch.zeros(len(setup.sequences), dtype=torch.bool)
    in_dataset[torch.cat([prefs.chosen, prefs.rejected])] = True
    in_dataset = setup.table(in_dataset)  # (prompts, completions): completions some pair shows

    def evaluate(step: int) -> dict[str, float]:
        with torch.no_grad():
            logps = setup.table(sequence_logps(policy(setup.sequences), setup.sequences, mask).double())
        kl, reward = policy_stats(logps, ref_table, reward_table)
        mass = float((logps.exp() * in_dataset).sum(-1).mean())  # where DPO can see, vs everywhere else
        return {"kl": kl, "true_reward": reward, "dataset/policy_mass": mass}

    yield from train_dpo(logps_of(policy), logps_of(setup.reference), list(policy.parameters()), prefs, beta, steps, lr,
                         evaluate=evaluate, batch_pairs=batch_pairs, log_every=log_every, seed=seed, first=first)


# --- a level: what the scenario sweeps β over ----------------------------------------------
@dataclass(frozen=True)
class Level:
    """One level's β-independent parts: log π_ref and r as (prompts, responses) tables, and its arms."""
    ref_logps: torch.Tensor
    rewards: torch.Tensor
    arm: Callable[[float, Mapping[str, float]], Iterator[StepRecord | Diverged | None]]  # (β, first) -> records
    steps: int
    true_margin: float  # mean r(y_w) − r(y_l) over the pairs: where soft-label margins settle, at any β
    data: TabularTask | SequenceSetup  # what the batched arms (engines/rl/dpo_arms.py) train on, beside
    prefs: Preferences                 # the pairs,
    lr: float
    log_every: int
    batch_seed: int = 0                # and the seed of the minibatch stream (the sequence level's)

    def optimum(self, beta: float) -> dict[str, float]:
        """π*'s KL and reward at this β (and, for one prompt, its probabilities): where the arm should land."""
        logps = optimum_logps(self.ref_logps, self.rewards, beta)
        kl, reward = policy_stats(logps, self.ref_logps, self.rewards)
        per_response = {f"optimum/response_{k:02d}": p for k, p in enumerate(logps.exp().tolist())} if logps.dim() == 1 else {}
        return {"optimum/kl": kl, "optimum/true_reward": reward, **per_response}

    def records(self, beta: float) -> Iterator[StepRecord | Diverged | None]:
        """The β arm's records, π*'s numbers for that β on the first."""
        return self.arm(beta, self.optimum(beta))

    def arm_records(self, names: list[str], betas: list[float]) -> Iterator:
        """Every β arm as one batched model (engines/rl/dpo_arms.py): per step, each arm's record by name."""
        from engines.rl.dpo_arms import level_arms  # it builds on this module
        return level_arms([self] * len(betas), names, betas)

    def optimum_records(self, betas: list[float]) -> Iterator[StepRecord]:
        """The task (π_ref's reward, the pairs' true gap; for one prompt, each response's π_ref and r)
        at step 0, then π*'s (β, KL, E[r]) along `betas`, one step each: the exact frontier."""
        _, ref_reward = policy_stats(self.ref_logps, self.ref_logps, self.rewards)
        task = {"reference/true_reward": ref_reward, "pairs/true_margin": self.true_margin}
        if self.ref_logps.dim() == 1:  # one prompt: the responses themselves, for the learned-vs-π* plot
            task.update({f"reference/response_{k:02d}": p for k, p in enumerate(self.ref_logps.exp().tolist())})
            task.update({f"true_reward/response_{k:02d}": r for k, r in enumerate(self.rewards.tolist())})
        for index, (beta, kl, reward) in enumerate(frontier(self.ref_logps, self.rewards, betas)):
            yield StepRecord(index, {**(task if index == 0 else {}), "frontier/beta": beta, "frontier/kl": kl,
                                     "frontier/true_reward": reward})


def tabular_level(responses: int, labels: Labels, noise: float, pairs: int, steps: int, lr: float, log_every: int,
                  seed: int) -> Level:
    task = TabularTask.make(responses, seed)
    prefs = task.preferences(labels, noise, pairs, seed + 1)
    return Level(task.ref_logps, task.rewards,
                 lambda beta, first: tabular_arm(task, prefs, beta, steps, lr, log_every, first), steps,
                 float((task.rewards[prefs.chosen] - task.rewards[prefs.rejected]).mean()), task, prefs, lr, log_every)


def sequence_level(labels: Labels, noise: float, pairs: int, steps: int, lr: float, log_every: int, seed: int) -> Level:
    setup = SequenceSetup.make(seed)
    prefs = setup.task.preferences(setup.ref_logps, setup.rewards, labels, noise, pairs, seed + 1)
    return Level(setup.table(setup.ref_logps), setup.table(setup.rewards),
                 lambda beta, first: sequence_arm(setup, prefs, beta, steps, lr, log_every, seed=seed + 2, first=first),
                 steps, float((setup.rewards[prefs.chosen] - setup.rewards[prefs.rejected]).mean()), setup, prefs, lr,
                 log_every, seed + 2)
