"""The worlds RLHF trains in: the DPO page's two, with a reward model beside each policy.

A `World` is everything a run shares: the reference policy's exact log-probability table
(prompts × responses), the true rewards, the preference pairs (the DPO page's data, made
by engines.rl.dpo_tasks), held-out pairs drawn the same way, and how to build a fresh trainable
policy and a fresh reward model. Every response of every prompt can be enumerated, so
KL(π‖π_ref), E_π[r] and E_π[r_φ] are exact sums.

- tabular: one prompt, K responses; the policy is K free logits; the reward model K free scores.
- sequence: the DPO page's tiny LM (a prompt-conditioned bigram model over 4 tokens, 5-token
  completions) and its frozen copy; the reward model scores each completion token from the
  prompt, the token and its position (`SequenceReward`), summed — a shape that can express
  the true reward (the fraction of tokens that echo the prompt) but must learn it from pairs.
"""
import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from engines.rl.dpo_tasks import Labels, Preferences, SequenceSetup, TabularTask, sequence_logps

Rows = Callable[[torch.Tensor], torch.Tensor]  # flat row indices -> one value per row


@dataclass(frozen=True)
class Policy:
    """A trainable policy: its parameters, log π of every response (prompts × responses) and of given rows."""
    parameters: list[torch.Tensor]
    table: Callable[[], torch.Tensor]
    rows: Rows


class TableReward(nn.Module):
    """A free score per response: the tabular reward model."""

    def __init__(self, responses: int) -> None:
        super().__init__()
        self.scores = nn.Parameter(torch.zeros(responses, dtype=torch.float64))

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        return self.scores[rows]


class SequenceReward(nn.Module):
    """r_φ(x, y) = Σ_t w·tanh(E_x + E_{y_t} + E_t) + b: one score per completion token, from the prompt,
    the token and its position, summed over the completion."""

    def __init__(self, sequences: torch.Tensor, vocab: int, length: int, hidden: int, seed: int) -> None:
        super().__init__()
        self.sequences = sequences  # (rows, 1+L): every (prompt, completion)
        self.prompt, self.token = nn.Embedding(vocab, hidden), nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(length, hidden)
        self.head = nn.Linear(hidden, 1)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for embedding in (self.prompt, self.token, self.position):
                nn.init.normal_(embedding.weight, std=1.0, generator=generator)
            nn.init.normal_(self.head.weight, std=hidden ** -0.5, generator=generator)
            nn.init.zeros_(self.head.bias)

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        # A token's score depends on (prompt, token, position) alone: score those V·V·L cases once, then gather.
        cases = torch.tanh(self.prompt.weight[:, None, None] + self.token.weight[None, :, None]
                           + self.position.weight[None, None])  # (V, V, L, hidden)
        per_token = self.head(cases).squeeze(-1)  # (V, V, L)
        tokens = self.sequences[rows]  # (batch, 1+L)
        positions = torch.arange(tokens.shape[1] - 1)
        return per_token[tokens[:, :1], tokens[:, 1:], positions].sum(-1).double()  # (batch,)


def bigram_table(task) -> Callable[[nn.Module], torch.Tensor]:
    """model -> log π(y|x) of every completion of every prompt (prompts × completions). The tiny LM's
    logits depend on (prompt, previous token, position) alone, so V·V probe rows (prompt x, then one
    token v throughout) cover every case; each completion's log-probability is gathered from them.
    Equal to `sequence_logps` of every row to float rounding, and ~50× cheaper."""
    vocab, length = task.vocab, task.length
    probes = torch.arange(vocab).repeat_interleave(vocab)[:, None].repeat(1, length + 1)  # (V·V, 1+L)
    probes[:, 1:] = torch.arange(vocab).repeat(vocab)[:, None]  # row x·V + v: prompt x, then v, v, ...
    completions = task.sequences()[: task.n_completions, 1:]  # (V^L, L): the same for every prompt
    prompts, positions = torch.arange(vocab)[:, None, None], torch.arange(1, length)

    def table(model: nn.Module) -> torch.Tensor:
        steps = model(probes).log_softmax(-1).double().view(vocab, vocab, length + 1, vocab)  # (x, v, t, next)
        first = steps[prompts, prompts, 0, completions[None, :, :1]]  # t = 0: the previous token is the prompt
        rest = steps[prompts, completions[None, :, :-1], positions, completions[None, :, 1:]]  # (V, V^L, L−1)
        return first.sum(-1) + rest.sum(-1)  # (V, V^L)
    return table


@dataclass(frozen=True)
class World:
    ref_logps: torch.Tensor  # (prompts, responses): log π_ref
    rewards: torch.Tensor    # (prompts, responses): the true reward r
    prefs: Preferences       # the pairs the reward model and DPO learn from (flat row indices)
    heldout: Preferences     # pairs drawn the same way, one sampled winner each: accuracy and calibration
    heldout_p: torch.Tensor  # (pairs,): the labelling model's P(chosen ≻ rejected) on the held-out pairs
    new_policy: Callable[[], Policy]
    reference_rows: Rows     # log π_ref of rows, computed as the policy computes its own
    new_reward_model: Callable[[], nn.Module]

    def flat(self, table: torch.Tensor) -> torch.Tensor:
        return table.reshape(-1)


def labelling_p(a: torch.Tensor, b: torch.Tensor, rewards: torch.Tensor, noise: float) -> torch.Tensor:
    """P(a ≻ b) of the labeller: Bradley–Terry σ(r_a − r_b), flipped with probability `noise`."""
    p = torch.sigmoid(rewards[a] - rewards[b])
    return (1 - noise) * p + noise * (1 - p)


def tabular_world(responses: int, labels: Labels, noise: float, pairs: int, seed: int) -> World:
    task = TabularTask.make(responses, seed)
    prefs = task.preferences(labels, noise, pairs, seed + 1)
    heldout = task.preferences("hard", noise, pairs, seed + 2)  # each oriented by one sampled winner
    ref_logits = task.ref_logps  # both the policy and the reference take log_softmax: equal bit for bit at init

    def new_policy() -> Policy:
        logits = ref_logits.clone().requires_grad_(True)
        return Policy([logits], lambda: logits.log_softmax(0)[None], lambda rows: logits.log_softmax(0)[rows])

    return World(task.ref_logps[None], task.rewards[None], prefs, heldout,
                 labelling_p(heldout.chosen, heldout.rejected, task.rewards, noise), new_policy,
                 lambda rows: ref_logits.log_softmax(0)[rows], lambda: TableReward(responses))


def sequence_world(labels: Labels, noise: float, pairs: int, seed: int, hidden: int = 8) -> World:
    setup = SequenceSetup.make(seed)
    task, sequences, mask = setup.task, setup.sequences, setup.task.completion_mask()
    prefs = task.preferences(setup.ref_logps, setup.rewards, labels, noise, pairs, seed + 1)
    heldout = task.preferences(setup.ref_logps, setup.rewards, "hard", noise, pairs, seed + 2)

    table = bigram_table(task)

    def logps_of(model: nn.Module) -> Rows:
        return lambda rows: sequence_logps(model(sequences[rows]), sequences[rows], mask).double()

    def new_policy() -> Policy:
        # Same mode as the reference (eval: no dropout or norm), so the two agree bit for bit at init.
        model = copy.deepcopy(setup.reference).requires_grad_(True)
        return Policy(list(model.parameters()), lambda: table(model), logps_of(model))

    return World(setup.table(setup.ref_logps), setup.table(setup.rewards), prefs, heldout,
                 labelling_p(heldout.chosen, heldout.rejected, setup.rewards, noise), new_policy,
                 logps_of(setup.reference),
                 lambda: SequenceReward(sequences, task.vocab, task.length, hidden, seed + 3))
