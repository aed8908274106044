"""Grokking on modular addition, and the Fourier features the network learns to do it.

**The task** (Power et al. 2022): every pair (a, b) of residues mod a prime p, labelled
c = (a + b) mod p. A fixed random share of the p² pairs is the training set; the rest is held
out. The model sees the training pairs in one full batch every step.

**The model.** One embedding E (p × d), shared by a and b (a transformer's token embedding),
then one hidden ReLU layer on the concatenation [E_a; E_b] and a linear read-out to p logits.
Trained with AdamW; the two arms differ only in the weight decay λ (λ = 0 is plain Adam).

**What it learns** (Nanda et al. 2023). A network that generalizes computes a + b with
trigonometry: it represents a residue x by cos(2πkx/p) and sin(2πkx/p) for a few *key
frequencies* k, and composes them. So the embedding's rows, read as a function of the residue
x, are sparse in the discrete Fourier basis of Z_p. `frequency_shares` gives each frequency's
share of the embedding's squared norm (the constant component aside: it carries no
information about x); Parseval makes the shares of all the frequencies sum to 1.

**Distilling it.** Keep only the key frequencies (the k largest shares, plus the constant) of
the embedding and run the rest of the network unchanged: the *restricted* loss and accuracy
on the held-out pairs. As a control, keep the next k frequencies instead. Remove the key
frequencies and keep the rest: the *excluded* loss on the training pairs, which stays low only
while the network still fits its training set without the trigonometric circuit (by
memorizing). Nanda et al. restrict the logits with the key frequencies of the final model;
here the embedding is restricted with the key frequencies of the step being logged, so the
curves can be drawn while training runs.
"""
import itertools
import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import train


# --- the task -----------------------------------------------------------------------------
class ModularAddition:
    """All p² pairs (a, b), labelled (a + b) mod p, split once at random into a training share and
    the held-out rest."""

    def __init__(self, p: int, train_fraction: float, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        pairs = torch.cartesian_prod(torch.arange(p), torch.arange(p))  # (p², 2)
        order = torch.randperm(p * p, generator=generator)
        cut = round(train_fraction * p * p)
        self.p = p
        self.train_pairs, self.test_pairs = pairs[order[:cut]], pairs[order[cut:]]
        self.train_labels, self.test_labels = self.train_pairs.sum(1) % p, self.test_pairs.sum(1) % p


class AdditionMLP(nn.Module):
    """E (p × d) shared by both inputs → ReLU(W [E_a; E_b] + b) (hidden) → p logits."""

    def __init__(self, p: int, embed_dim: int, hidden: int) -> None:
        super().__init__()
        self.embed = nn.Parameter(torch.randn(p, embed_dim) / math.sqrt(embed_dim))  # (p, d): unit-scale rows
        self.hidden = nn.Linear(2 * embed_dim, hidden)
        self.out = nn.Linear(hidden, p)

    def forward(self, pairs: torch.Tensor, embed: torch.Tensor | None = None) -> torch.Tensor:
        """pairs (n, 2) → logits (n, p); `embed` in place of the learned embedding (a projection of it)."""
        e = self.embed if embed is None else embed
        x = torch.cat([e[pairs[:, 0]], e[pairs[:, 1]]], dim=1)  # (n, 2d)
        return self.out(torch.relu(self.hidden(x)))


def weight_norm(model: nn.Module) -> torch.Tensor:
    """‖θ‖₂ over every parameter: what weight decay pulls down."""
    return torch.sqrt(sum(p.detach().square().sum() for p in model.parameters()))


# --- the Fourier view of the embedding ----------------------------------------------------
def frequency_shares(embed: torch.Tensor) -> torch.Tensor:
    """Share of each frequency k = 1 … (p−1)/2 in the embedding's squared norm over the residues,
    the constant (k = 0) left out: ((p−1)/2,), summing to 1.

    With F = DFT of E along the residues, Parseval gives Σ_x ‖E_x‖² = (1/p) Σ_j ‖F_j‖²; for odd p
    the bins j and p − j are conjugate, so frequency k holds 2‖F_k‖²/p of it."""
    spectrum = torch.fft.rfft(embed, dim=0)  # (p//2 + 1, d): bins 0 … (p−1)/2
    power = 2 * spectrum[1:].abs().square().sum(dim=1)  # (p−1)/2 frequencies, both conjugate bins
    return power / power.sum()


def keep_frequencies(embed: torch.Tensor, frequencies: list[int], constant: bool = True) -> torch.Tensor:
    """E projected onto the Fourier components cos(2πkx/p), sin(2πkx/p) of `frequencies` (and the
    constant, when `constant`): (p, d)."""
    spectrum = torch.fft.rfft(embed, dim=0)
    mask = torch.zeros(spectrum.shape[0], 1)
    mask[list(frequencies)] = 1.0
    if constant:
        mask[0] = 1.0
    return torch.fft.irfft(spectrum * mask, n=embed.shape[0], dim=0)


def remove_frequencies(embed: torch.Tensor, frequencies: list[int]) -> torch.Tensor:
    """E with the components of `frequencies` taken out (the constant and every other frequency kept)."""
    return embed - keep_frequencies(embed, frequencies, constant=False)


def ranked_frequencies(embed: torch.Tensor) -> list[int]:
    """Frequencies 1 … (p−1)/2, the largest share first."""
    return (frequency_shares(embed).argsort(descending=True) + 1).tolist()


# --- one arm ------------------------------------------------------------------------------
def train_arm(*, p: int, train_fraction: float, embed_dim: int, hidden: int, lr: float, weight_decay: float,
              steps: int, key_count: int, seed: int, log_every: int) -> Iterator[StepRecord | Diverged | None]:
    """Full-batch AdamW on the training pairs. Every log adds: `train_acc`; `test_loss`, `test_acc`;
    `weight_norm`; `spectrum/freq_XX` (each frequency's share of the embedding, XX = k); `key/rank_XX`
    (the r-th largest frequency, r < key_count) and `key_share` (their total share); with only those
    kept, `restricted_loss`, `restricted_acc` (held-out pairs); with the next key_count frequencies
    kept instead, `control_loss`, `control_acc` (held-out); with the key frequencies removed,
    `excluded_loss`, `excluded_acc` (training pairs)."""
    task = ModularAddition(p, train_fraction, seed + 1)
    with torch.random.fork_rng(devices=[]):  # the same initial weights in every arm, global RNG left as it was
        torch.manual_seed(seed)
        model = AdditionMLP(p, embed_dim, hidden)
    batch = (task.train_pairs, task.train_labels)

    def objective(batch: tuple[torch.Tensor, torch.Tensor], logging: bool):
        pairs, labels = batch
        logits = model(pairs)
        loss = F.cross_entropy(logits, labels)
        if not logging:
            return loss
        return loss, {"train_acc": (logits.detach().argmax(1) == labels).float().mean()}

    def scored(pairs: torch.Tensor, labels: torch.Tensor, embed: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        logits = model(pairs, embed)
        return F.cross_entropy(logits, labels), (logits.argmax(1) == labels).float().mean()

    @torch.no_grad()
    def on_log(step: int) -> dict[str, float | torch.Tensor]:
        embed = model.embed.detach()
        shares = frequency_shares(embed)
        ranked = (shares.argsort(descending=True) + 1).tolist()
        key, others = ranked[:key_count], ranked[key_count:2 * key_count]
        metrics: dict[str, float | torch.Tensor] = {f"spectrum/freq_{k:02d}": share for k, share in enumerate(shares.tolist(), start=1)}
        metrics.update({f"key/rank_{r:02d}": float(k) for r, k in enumerate(key)})
        metrics["key_share"] = shares[[k - 1 for k in key]].sum()
        metrics["test_loss"], metrics["test_acc"] = scored(task.test_pairs, task.test_labels)
        metrics["weight_norm"] = weight_norm(model)
        metrics["restricted_loss"], metrics["restricted_acc"] = scored(task.test_pairs, task.test_labels,
                                                                       keep_frequencies(embed, key))
        metrics["control_loss"], metrics["control_acc"] = scored(task.test_pairs, task.test_labels,
                                                                 keep_frequencies(embed, others))
        metrics["excluded_loss"], metrics["excluded_acc"] = scored(task.train_pairs, task.train_labels,
                                                                   remove_frequencies(embed, key))
        if step == 0:
            metrics["train_pairs"], metrics["test_pairs"] = float(len(task.train_pairs)), float(len(task.test_pairs))
        return metrics

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.98))
    yield from train(model, optimizer, itertools.repeat(batch), objective, steps, log_every=log_every, on_log=on_log)
