"""What DPO trains on: preference pairs over two small worlds whose every response can be enumerated.

- `TabularTask`: K responses with known rewards in [0, 1] and a random reference policy.
- `EchoTask` + `TinyLM`: a prompt token, then a completion of `length` tokens; the reward is
  the fraction of completion tokens that echo the prompt. `TinyLM` is an autoregressive
  prompt-conditioned bigram model; `SequenceSetup` holds its frozen copy (the reference) and
  the exact log π_ref and reward of every one of the vocab · vocab^length sequences, so
  KL(π‖π_ref), E_π[r] and the optimum are exact sums, not samples.

Preference labels come from the Bradley–Terry model P(a ≻ b) = σ(r_a − r_b): soft (the
probability itself) or hard (one sampled winner), optionally flipped with probability `noise`.
"""
import copy
import itertools
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

Labels = Literal["soft", "hard"]


def sequence_logps(logits: torch.Tensor, tokens: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """log π(y|x) summed over completion tokens: logits[t] predicts tokens[t+1]; the prompt is masked out."""
    token_logps = logits[:, :-1].log_softmax(-1).gather(-1, tokens[:, 1:, None]).squeeze(-1)  # (batch, seq-1)
    return (token_logps * completion_mask[..., 1:]).sum(-1)  # (batch,)


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
