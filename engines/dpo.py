"""Direct Preference Optimization (Rafailov et al., NeurIPS 2023) at two sizes.

RLHF maximises E_π[r] − β·KL(π‖π_ref). Its optimum is closed-form, π*(y) ∝ π_ref(y)·exp(r(y)/β),
so a policy implies a reward: r(y) = β·log(π(y)/π_ref(y)) + β·log Z. Put that into the
Bradley–Terry model P(y_w ≻ y_l) = σ(r(y_w) − r(y_l)) and Z cancels, leaving a loss on
preference pairs alone:

    L = −log σ(β[(log π(y_w) − log π_ref(y_w)) − (log π(y_l) − log π_ref(y_l))]).

β·(log π − log π_ref) is the *implicit reward* that trl logs as rewards/chosen and
rewards/rejected. At initialisation π = π_ref, every implicit reward is 0 and the loss is
exactly log 2.

Two policies share one training loop (`train_dpo`):
- `TabularTask`: a categorical policy over K responses with known rewards. With soft
  Bradley–Terry labels on every pair, the loss is minimised exactly at π*: the derivation,
  testable to 1e-4.
- `EchoTask` + `TinyLM`: a GRU language model and its frozen copy as the reference; a prompt
  token, then a completion of `length` tokens; reward = fraction of completion tokens that
  echo the prompt. The space (vocab · vocab^length sequences) is small enough to enumerate,
  so KL(π‖π_ref), E_π[r] and the optimum are exact sums, not samples.
"""
import copy
import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from engines.training import Diverged, StepRecord

Labels = Literal["soft", "hard"]
METRICS = ("loss", "rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies",
           "logps/chosen", "logps/rejected")


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


def sequence_logps(logits: torch.Tensor, tokens: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """log π(y|x) summed over completion tokens: logits[t] predicts tokens[t+1]; the prompt is masked out."""
    token_logps = logits[:, :-1].log_softmax(-1).gather(-1, tokens[:, 1:, None]).squeeze(-1)  # (batch, seq-1)
    return (token_logps * completion_mask[..., 1:]).sum(-1)  # (batch,)


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


# --- preference pairs ----------------------------------------------------------------
@dataclass(frozen=True)
class Preferences:
    """Pairs as indices into a response table, with P(chosen ≻ rejected) as the label."""
    chosen: torch.Tensor    # (pairs,) long
    rejected: torch.Tensor  # (pairs,) long
    label: torch.Tensor     # (pairs,) float: 1 for hard labels, ≥ 0.5 for soft ones


def label_pairs(a: torch.Tensor, b: torch.Tensor, rewards: torch.Tensor, labels: Labels, noise: float,
                generator: torch.Generator) -> Preferences:
    """Bradley–Terry labels from true rewards: P(a ≻ b) = σ(r_a − r_b), each label flipped with prob `noise`."""
    p = torch.sigmoid(rewards[a] - rewards[b])
    p = (1 - noise) * p + noise * (1 - p)
    if labels == "soft":
        a_wins = p >= 0.5   # orient each pair so the label's majority is "chosen"
        label = torch.where(a_wins, p, 1 - p)
    else:
        a_wins = torch.rand(p.shape, generator=generator) < p
        label = torch.ones_like(p)
    return Preferences(torch.where(a_wins, a, b), torch.where(a_wins, b, a), label)


@dataclass(frozen=True)
class TabularTask:
    """K responses, true rewards in [0, 1], a random reference policy."""
    rewards: torch.Tensor    # (K,)
    ref_logps: torch.Tensor  # (K,)

    @classmethod
    def make(cls, n_responses: int, seed: int, ref_spread: float = 1.0) -> "TabularTask":
        generator = torch.Generator().manual_seed(seed)
        rewards = torch.rand(n_responses, generator=generator, dtype=torch.float64)
        ref_logits = ref_spread * torch.randn(n_responses, generator=generator, dtype=torch.float64)
        return cls(rewards, ref_logits.log_softmax(0))

    def preferences(self, labels: Labels, noise: float, n_pairs: int, seed: int) -> Preferences:
        """Soft labels: every unordered pair once. Hard labels: `n_pairs` uniformly drawn pairs, each labelled once."""
        generator = torch.Generator().manual_seed(seed)
        k = len(self.rewards)
        if labels == "soft":
            a, b = torch.combinations(torch.arange(k), 2).T
        else:
            a = torch.randint(k, (n_pairs,), generator=generator)
            b = (a + torch.randint(1, k, (n_pairs,), generator=generator)) % k  # b ≠ a
        return label_pairs(a, b, self.rewards, labels, noise, generator)


# --- the sequence level --------------------------------------------------------------
@dataclass(frozen=True)
class EchoTask:
    """Prompt token x, then `length` completion tokens; r(x, y) = fraction of y equal to x."""
    vocab: int = 4
    length: int = 5

    @property
    def n_completions(self) -> int:
        return self.vocab ** self.length

    def sequences(self) -> torch.Tensor:
        """Every (prompt, completion), prompt-major: row x·V^L + j is completion j of prompt x."""
        completions = torch.tensor(list(itertools.product(range(self.vocab), repeat=self.length)))  # (V^L, L)
        prompts = torch.arange(self.vocab).repeat_interleave(self.n_completions)[:, None]  # (V·V^L, 1)
        return torch.cat([prompts, completions.repeat(self.vocab, 1)], dim=1)  # (V·V^L, 1+L)

    def rewards(self, sequences: torch.Tensor) -> torch.Tensor:
        return (sequences[:, 1:] == sequences[:, :1]).double().mean(1)  # (V·V^L,)

    def completion_mask(self) -> torch.Tensor:
        return torch.tensor([0.0] + [1.0] * self.length)  # (1+L,): the prompt token is not scored

    def preferences(self, ref_logps: torch.Tensor, rewards: torch.Tensor, labels: Labels, noise: float,
                    n_pairs: int, seed: int) -> Preferences:
        """Pairs of distinct completions of one uniform prompt, both drawn from π_ref (an offline dataset)."""
        generator = torch.Generator().manual_seed(seed)
        prompts = torch.randint(self.vocab, (n_pairs,), generator=generator)
        probs = ref_logps.view(self.vocab, -1).exp()[prompts]  # (pairs, V^L)
        drawn = torch.multinomial(probs, 2, replacement=False, generator=generator)  # (pairs, 2)
        index = prompts[:, None] * self.n_completions + drawn
        return label_pairs(index[:, 0], index[:, 1], rewards, labels, noise, generator)


class TinyLM(nn.Module):
    """Next-token logits from the prompt, the previous token and the position: an autoregressive
    LM (a prompt-conditioned bigram model) small enough that a DPO step costs about a millisecond."""

    def __init__(self, vocab: int, hidden: int, length: int, seed: int, logit_scale: float = 3.0) -> None:
        super().__init__()
        self.prompt = nn.Embedding(vocab, hidden)
        self.previous = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(length + 1, hidden)
        self.head = nn.Linear(hidden, vocab)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for embedding in (self.prompt, self.previous, self.position):
                nn.init.normal_(embedding.weight, std=hidden ** -0.5, generator=generator)
            nn.init.normal_(self.head.weight, std=logit_scale * hidden ** -0.5, generator=generator)
            nn.init.zeros_(self.head.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1])
        hidden = torch.tanh(self.prompt(tokens[:, :1]) + self.previous(tokens) + self.position(positions))  # (batch, seq, hidden)
        return self.head(hidden)  # (batch, seq, vocab)


def frozen_copy(model: nn.Module) -> nn.Module:
    """The reference: the same weights, no gradients, never updated."""
    reference = copy.deepcopy(model).eval()
    reference.requires_grad_(False)
    return reference


# --- one training loop for both levels -------------------------------------------------
def train_dpo(policy_logps: Callable[[torch.Tensor], torch.Tensor],
              reference_logps: Callable[[torch.Tensor], torch.Tensor], parameters: list[torch.Tensor],
              prefs: Preferences, beta: float, steps: int, lr: float, *,
              evaluate: Callable[[], dict[str, float]], batch_pairs: int | None = None, log_every: int = 1,
              seed: int = 0) -> Iterator[StepRecord | Diverged]:
    """DPO with Adam on `prefs`; `policy_logps(rows)` gives log π of table rows (differentiable),
    `reference_logps(rows)` log π_ref of the same rows, computed the same way so that the two
    agree bit for bit at initialisation (loss exactly log 2, accuracy exactly 0).

    Logged metrics are averaged over the steps since the last log, as trl does; `evaluate()`
    adds exact quantities (KL, true reward) of the current policy at each log.
    """
    optimizer = torch.optim.Adam(parameters, lr=lr, foreach=True)  # foreach: fewer kernel calls per step
    generator = torch.Generator().manual_seed(seed)
    n_pairs = len(prefs.chosen)
    window: list[tuple[torch.Tensor, ...]] = []  # this log window's per-step values, reduced at the log
    for step in range(steps):
        pick = (torch.randint(n_pairs, (batch_pairs,), generator=generator)
                if batch_pairs is not None and batch_pairs < n_pairs else slice(None))
        chosen, rejected, label = prefs.chosen[pick], prefs.rejected[pick], prefs.label[pick]
        rows = torch.cat([chosen, rejected])  # one forward for both sides
        chosen_logps, rejected_logps = policy_logps(rows).split(len(chosen))
        with torch.no_grad():
            ref_chosen, ref_rejected = reference_logps(rows).split(len(chosen))
        losses, chosen_rewards, rejected_rewards = dpo_loss(
            chosen_logps, rejected_logps, ref_chosen, ref_rejected, beta, label)
        loss = losses.mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        window.append((loss.detach(), chosen_rewards, rejected_rewards, chosen_logps.detach(), rejected_logps.detach()))
        if step % log_every == 0 or step == steps - 1:
            metrics = dict(zip(METRICS, window_means(window)))
            window.clear()
            if not all(math.isfinite(v) for v in metrics.values()):
                yield Diverged(step, f"diverged at step {step}: DPO loss is {metrics['loss']}")
                return
            metrics.update(evaluate())  # the policy the logged window ended on, before this update
            with torch.no_grad():  # every pair at once, not a batch window: the "both go down" plot
                chosen_all, rejected_all = policy_logps(torch.cat([prefs.chosen, prefs.rejected])).split(n_pairs)
                metrics["dataset/logps_chosen"], metrics["dataset/logps_rejected"] = \
                    torch.stack([chosen_all.mean(), rejected_all.mean()]).tolist()
            yield StepRecord(step, metrics)
        optimizer.step()


def window_means(window: list[tuple[torch.Tensor, ...]]) -> list[float]:
    """trl's logged quantities, each averaged over the pairs and the steps of one log window."""
    loss, chosen_rewards, rejected_rewards, chosen_logps, rejected_logps = (torch.stack(v) for v in zip(*window))
    return torch.stack([loss.mean(), chosen_rewards.mean(), rejected_rewards.mean(),
                        (chosen_rewards - rejected_rewards).mean(), (chosen_rewards > rejected_rewards).double().mean(),
                        chosen_logps.mean(), rejected_logps.mean()]).double().tolist()


def tabular_arm(task: TabularTask, prefs: Preferences, beta: float, steps: int, lr: float,
                log_every: int) -> Iterator[StepRecord | Diverged]:
    """The tabular policy: free logits over K responses, starting at π_ref (so the loss starts at log 2)."""
    ref_logits = task.ref_logps  # frozen; both sides take log_softmax, so they agree bit for bit at init
    logits = ref_logits.clone().requires_grad_(True)
    optimum = optimum_logps(task.ref_logps, task.rewards, beta)

    def evaluate() -> dict[str, float]:
        with torch.no_grad():
            logps = logits.log_softmax(0)
            kl, reward = policy_stats(logps, ref_logits.log_softmax(0), task.rewards)
            tv = 0.5 * float((logps.exp() - optimum.exp()).abs().sum())
            probs = logps.exp().tolist()
        return {"kl": kl, "true_reward": reward, "tv_to_optimum": tv,
                **{f"policy/response_{k:02d}": p for k, p in enumerate(probs)}}

    yield from train_dpo(lambda rows: logits.log_softmax(0)[rows], lambda rows: ref_logits.log_softmax(0)[rows],
                         [logits], prefs, beta, steps, lr, evaluate=evaluate, log_every=log_every)


@dataclass(frozen=True)
class SequenceSetup:
    """Everything β-independent for the sequence level: the task, the reference and its exact tables."""
    task: EchoTask
    reference: TinyLM
    sequences: torch.Tensor  # (V·V^L, 1+L)
    rewards: torch.Tensor    # (V·V^L,)
    ref_logps: torch.Tensor  # (V·V^L,)

    @classmethod
    def make(cls, seed: int, task: EchoTask = EchoTask(), hidden: int = 32) -> "SequenceSetup":
        reference = frozen_copy(TinyLM(task.vocab, hidden, task.length, seed))
        sequences = task.sequences()
        with torch.no_grad():
            ref_logps = sequence_logps(reference(sequences), sequences, task.completion_mask()).double()
        return cls(task, reference, sequences, task.rewards(sequences), ref_logps)

    def table(self, logps: torch.Tensor) -> torch.Tensor:
        return logps.view(self.task.vocab, -1)  # (prompts, completions)


def sequence_arm(setup: SequenceSetup, prefs: Preferences, beta: float, steps: int, lr: float, log_every: int,
                 batch_pairs: int = 64, seed: int = 0) -> Iterator[StepRecord | Diverged]:
    """A trainable copy of the reference LM, trained by DPO on minibatches of the offline pairs."""
    # Same mode as the reference (eval: the model has no dropout or norm, so it only picks the
    # kernel), so policy and reference agree bit for bit at init: loss exactly log 2.
    policy = copy.deepcopy(setup.reference).requires_grad_(True)
    mask = setup.task.completion_mask()
    ref_table = setup.table(setup.ref_logps)
    reward_table = setup.table(setup.rewards)

    def logps_of(model: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
        def logps(rows: torch.Tensor) -> torch.Tensor:
            tokens = setup.sequences[rows]  # (rows, 1+L)
            return sequence_logps(model(tokens), tokens, mask).double()
        return logps

    in_dataset = torch.zeros(len(setup.sequences), dtype=torch.bool)
    in_dataset[torch.cat([prefs.chosen, prefs.rejected])] = True
    in_dataset = setup.table(in_dataset)  # (prompts, completions): completions some pair shows

    def evaluate() -> dict[str, float]:
        with torch.no_grad():
            logps = setup.table(sequence_logps(policy(setup.sequences), setup.sequences, mask).double())
        kl, reward = policy_stats(logps, ref_table, reward_table)
        mass = float((logps.exp() * in_dataset).sum(-1).mean())  # where DPO can see, vs everywhere else
        return {"kl": kl, "true_reward": reward, "dataset/policy_mass": mass}

    yield from train_dpo(logps_of(policy), logps_of(setup.reference), list(policy.parameters()), prefs, beta, steps, lr,
                         evaluate=evaluate, batch_pairs=batch_pairs, log_every=log_every, seed=seed)


# --- a level: what the scenario sweeps β over ----------------------------------------------
@dataclass(frozen=True)
class Level:
    """One level's β-independent parts: log π_ref and r as (prompts, responses) tables, and its arms."""
    ref_logps: torch.Tensor
    rewards: torch.Tensor
    arm: Callable[[float], Iterator[StepRecord | Diverged]]  # β -> that arm's records
    steps: int
    true_margin: float  # mean r(y_w) − r(y_l) over the pairs: where soft-label margins settle, at any β

    def optimum(self, beta: float) -> dict[str, float]:
        """π*'s KL and reward at this β (and, for one prompt, its probabilities): where the arm should land."""
        logps = optimum_logps(self.ref_logps, self.rewards, beta)
        kl, reward = policy_stats(logps, self.ref_logps, self.rewards)
        per_response = {f"optimum/response_{k:02d}": p for k, p in enumerate(logps.exp().tolist())} if logps.dim() == 1 else {}
        return {"optimum/kl": kl, "optimum/true_reward": reward, **per_response}


def tabular_level(responses: int, labels: Labels, noise: float, pairs: int, steps: int, lr: float, log_every: int,
                  seed: int) -> Level:
    task = TabularTask.make(responses, seed)
    prefs = task.preferences(labels, noise, pairs, seed + 1)
    return Level(task.ref_logps, task.rewards, lambda beta: tabular_arm(task, prefs, beta, steps, lr, log_every), steps,
                 float((task.rewards[prefs.chosen] - task.rewards[prefs.rejected]).mean()))


def sequence_level(labels: Labels, noise: float, pairs: int, steps: int, lr: float, log_every: int, seed: int) -> Level:
    setup = SequenceSetup.make(seed)
    prefs = setup.task.preferences(setup.ref_logps, setup.rewards, labels, noise, pairs, seed + 1)
    return Level(setup.table(setup.ref_logps), setup.table(setup.rewards),
                 lambda beta: sequence_arm(setup, prefs, beta, steps, lr, log_every, seed=seed + 2), steps,
                 float((setup.rewards[prefs.chosen] - setup.rewards[prefs.rejected]).mean()))
