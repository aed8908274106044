"""Skip-gram with negative sampling (word2vec; Mikolov et al. 2013), and what it converges to.

Every word w has a word vector and a context vector. For each (word, context) pair of the corpus
(engines.sequence.relational.pairs) and `k` noise words n drawn from P_n(c) ∝ #(c)^α (α = 0.75 in
word2vec; #(c) the context's count among the pairs), SGNS minimizes

    −ln σ(w·c) − Σ_{i=1..k} ln σ(−w·n_i)

Summed over the corpus its expected loss is −Σ_{w,c} [#(w,c)·ln σ(x) + k·#(w)·P_n(c)·ln σ(−x)] with
x = w·c; minimized one pair at a time (Levy & Goldberg 2014), σ(x) = #(w,c) / (#(w,c) + k·#(w)·P_n(c)), so

    w·c = ln( #(w,c) / (#(w) · k · P_n(c)) )  =  PMI(w, c) − ln k          (α = 1)

with PMI(w, c) = ln(#(w,c)·|D| / (#(w)·#(c))); with α < 1 the same holds for the PMI taken against the
smoothed context distribution (Levy, Goldberg & Dagan 2015). A dimension below the vocabulary can only
approach it; on frequent pairs it does. `shifted_pmi` is that target, counted exactly from the corpus.

The model trains through the shared loop (`engines.loop.training.train`): Adam on random mini-batches
of pairs, the learning rate decayed linearly to 0 (as word2vec decays its rate) so the sampling noise
dies out. At each log: the analogy accuracy on w + c (3CosAdd: the word nearest b − a + c, cosine, a, b, c
excluded; `analogy/accuracy`, per relation `analogy/<x>_<y>`, on w alone `analogy/accuracy_words`), and on frequent pairs the Pearson
correlation of w·c with the target (`identity/correlation`; `identity/correlation_plain` against
PMI − ln k whatever α) and their mean gap. At the last: every frequent pair's w·c, the
nearest neighbours of the first countries and capitals, and the country and capital vectors on
their first two principal components.
"""
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import train
from engines.sequence.relational import RELATIONS, World, analogy_questions, pair_counts, pairs, world

FREQUENT = 20       # a pair counted at least this often is "frequent"
NEIGHBOURS, PROBES = 4, 4


class SkipGram(nn.Module):
    def __init__(self, vocab: int, dim: int, seed: int) -> None:
        super().__init__()
        self.words, self.contexts = nn.Embedding(vocab, dim), nn.Embedding(vocab, dim)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():  # word2vec's start: words uniform in ±0.5/dim, contexts zero
            self.words.weight.uniform_(-0.5 / dim, 0.5 / dim, generator=generator)
            self.contexts.weight.zero_()

    def embedding(self) -> torch.Tensor:
        """w + c: the vectors analogies and neighbours read (Levy, Goldberg & Dagan 2015; GloVe's choice)."""
        return self.words.weight + self.contexts.weight

    def dots(self) -> torch.Tensor:
        """w·c for every word and context, (V, V)."""
        return self.words.weight @ self.contexts.weight.T


def noise_distribution(counts: np.ndarray, power: float) -> np.ndarray:
    """P_n(c) ∝ #(c)^power, #(c) the context marginal of the pair counts."""
    weights = counts.sum(0) ** power
    return weights / weights.sum()


def shifted_pmi(counts: np.ndarray, k: int, noise: np.ndarray) -> np.ndarray:
    """ln(#(w,c) / (#(w)·k·P_n(c))): the w·c at SGNS's optimum (−inf where a pair never occurs)."""
    with np.errstate(divide="ignore"):
        return np.log(counts) - np.log(counts.sum(1, keepdims=True) * k * noise[None, :])


def pmi(counts: np.ndarray) -> np.ndarray:
    """ln(#(w,c)·|D| / (#(w)·#(c))) (−inf where a pair never occurs)."""
    with np.errstate(divide="ignore"):
        return np.log(counts) + np.log(counts.sum()) - np.log(counts.sum(1, keepdims=True) * counts.sum(0, keepdims=True))


def sgns_objective(model: SkipGram, noise: torch.Tensor, k: int, generator: torch.Generator):
    """The loss of a batch of (word, context) pairs, (B, 2), with `k` noise contexts each."""
    def objective(batch: torch.Tensor, logging: bool):
        words = model.words(batch[:, 0])  # (B, d)
        positive = (words * model.contexts(batch[:, 1])).sum(-1)
        drawn = torch.multinomial(noise, batch.shape[0] * k, replacement=True, generator=generator).view(-1, k)
        negative = torch.einsum("bd,bkd->bk", words, model.contexts(drawn))
        return -(F.logsigmoid(positive) + F.logsigmoid(-negative).sum(-1)).mean()
    return objective


def analogy_hits(vectors: torch.Tensor, questions: torch.Tensor) -> torch.Tensor:
    """3CosAdd: for each (a, b, c, d), is d the word nearest (cosine) to b − a + c, a, b, c excluded? (n,) bool."""
    unit = F.normalize(vectors, dim=-1)
    a, b, c, d = questions.unbind(1)
    scores = (unit[b] - unit[a] + unit[c]) @ unit.T  # (n, V)
    rows = torch.arange(len(questions))
    for excluded in (a, b, c):
        scores[rows, excluded] = -math.inf
    return scores.argmax(-1) == d


def neighbours(vectors: torch.Tensor, ids: list[int], count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The `count` nearest words (cosine, itself excluded) of each of `ids`: (ids, cosines), each (len(ids), count)."""
    unit = F.normalize(vectors, dim=-1)
    scores = unit[ids] @ unit.T
    scores[torch.arange(len(ids)), ids] = -math.inf
    cosines, found = scores.topk(count, dim=-1)
    return found, cosines


def principal_plane(vectors: torch.Tensor) -> torch.Tensor:
    """Rows projected on their first two principal components (centred), (n, 2)."""
    centred = vectors - vectors.mean(0)
    return centred @ torch.linalg.svd(centred, full_matrices=False)[2][:2].T


@dataclass(frozen=True)
class SGNSArm:
    countries: int = 10
    sentences: int = 6000
    window: int = 4
    negatives: int = 5
    dim: int = 32
    power: float = 0.75
    steps: int = 800
    lr: float = 0.02
    batch: int = 512
    log_every: int = 25
    seed: int = 0


def facts(arm: SGNSArm) -> dict[str, float]:
    """What the corpus is (its size, its pairs, how many are frequent), and on each frequent pair the exact
    optimum of w·c (`target/<w>_<c>`) and PMI − ln k (`pmi/<w>_<c>`), counted from it."""
    corpus = world(arm.countries, arm.sentences, arm.seed)
    counts = pair_counts(corpus, arm.window)
    target = shifted_pmi(counts, arm.negatives, noise_distribution(counts, arm.power))
    shifted = pmi(counts) - math.log(arm.negatives)
    out = {}
    for w, c in zip(*np.nonzero(counts >= FREQUENT)):
        out[f"target/{w:03d}_{c:03d}"], out[f"pmi/{w:03d}_{c:03d}"] = float(target[w, c]), float(shifted[w, c])
    return out | {"sentences": float(len(corpus.sentences)), "tokens": float(corpus.tokens), "vocab": float(len(corpus.words)),
            "pairs": float(counts.sum()), "frequent_pairs": float((counts >= FREQUENT).sum()),
            "questions": float(len(analogy_questions(corpus)))}


def sgns_records(arm: SGNSArm) -> Iterator[StepRecord | Diverged | None]:
    corpus: World = world(arm.countries, arm.sentences, arm.seed)
    counts = pair_counts(corpus, arm.window)
    noise = noise_distribution(counts, arm.power)
    frequent = torch.as_tensor(counts >= FREQUENT)
    target = torch.as_tensor(shifted_pmi(counts, arm.negatives, noise))[frequent]
    plain = torch.as_tensor(pmi(counts) - math.log(arm.negatives))[frequent]
    questions = torch.as_tensor(analogy_questions(corpus))
    relation_of = np.repeat(np.arange(len(RELATIONS)), len(questions) // len(RELATIONS))
    model = SkipGram(len(corpus.words), arm.dim, arm.seed)
    every_pair = torch.as_tensor(pairs(corpus, arm.window))
    generator = torch.Generator().manual_seed(arm.seed + 1)
    batches = (every_pair[torch.randint(0, len(every_pair), (arm.batch,), generator=generator)] for _ in range(arm.steps))
    optimizer = torch.optim.Adam(model.parameters(), lr=arm.lr)
    decay = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / arm.steps)

    @torch.no_grad()
    def measure(step: int) -> dict[str, float]:
        dots = model.dots().double()[frequent]
        hits = analogy_hits(model.embedding(), questions).numpy()
        words_only = analogy_hits(model.words.weight, questions).float().mean()
        values = {"analogy/accuracy": float(hits.mean()), "analogy/accuracy_words": float(words_only),
                  "identity/mean_gap": float((dots - target).abs().mean())}
        if dots.std() > 0:  # at the start every context vector is 0: no correlation to speak of
            values.update({"identity/correlation": _pearson(dots, target), "identity/correlation_plain": _pearson(dots, plain)})
        values.update({f"analogy/{x}_{y}": float(hits[relation_of == r].mean()) for r, (x, y) in enumerate(RELATIONS)})
        if step == arm.steps - 1:
            values.update(final_views(model, corpus, counts))
        return values

    yield from train(model, optimizer, batches, sgns_objective(model, torch.as_tensor(noise), arm.negatives, generator),
                     arm.steps, log_every=arm.log_every, scheduler=decay, on_log=measure)


def _pearson(x: torch.Tensor, y: torch.Tensor) -> float:
    return float(torch.corrcoef(torch.stack([x, y.to(x.dtype)]))[0, 1])


@torch.no_grad()
def final_views(model: SkipGram, corpus: World, counts: np.ndarray) -> dict[str, float]:
    """Each frequent pair's w·c (`pair/<w>_<c>`), the probes' nearest neighbours (`neighbour/<probe>/<rank>`:
    a word id; `neighbour_cos/…`), and the country and capital vectors on their principal plane (`plane/…`)."""
    out = {}
    dots = model.dots().double().numpy()
    for w, c in zip(*np.nonzero(counts >= FREQUENT)):
        out[f"pair/{w:03d}_{c:03d}"] = float(dots[w, c])
    vectors = model.embedding()
    probes = [corpus.entity(role, i) for i in range(min(PROBES, corpus.countries)) for role in ("country", "capital")]
    found, cosines = neighbours(vectors, probes, NEIGHBOURS)
    for probe, ids, values in zip(probes, found.tolist(), cosines.tolist()):
        for rank, (word, cosine) in enumerate(zip(ids, values), start=1):
            out[f"neighbour/{probe:03d}/{rank}"], out[f"neighbour_cos/{probe:03d}/{rank}"] = float(word), float(cosine)
    shown = [corpus.entity(role, i) for i in range(corpus.countries) for role in ("country", "capital")]
    for word, (x, y) in zip(shown, principal_plane(vectors[shown]).tolist()):
        out[f"plane/x/{word:03d}"], out[f"plane/y/{word:03d}"] = x, y
    return out
