"""A synthetic language with topics: lines whose first word names the topic the rest must keep to.

Every line has `line_length` tokens: a topic word (`TOPIC_WORDS`, uniformly), then words from
that topic's first-order chain. The topics share some words and own others: topic t's chain
writes only the words in `allowed[t]`, each word allowing `branching` next words of the same
topic, with Dirichlet probabilities. Lines are independent, so the entropy rate is exact: the
mean over a line's positions of the entropy of each token given the line so far,

    H = (1/L) Σ_j H_j,  H_0 = ln T,  H_1 = mean_t H(start_t),
    H_j = mean_t Σ_w q_{t,j−1}(w) H(P_t(·|w))   with q_{t,j} = q_{t,j−1} P_t (the word distribution at j),

per token, and per byte H / E[bytes per token] (each token spelled as its word and one space).
A model that reads whole lines (windows starting at a line, `context` a multiple of `line_length`)
can at best reach H on held-out text; `per_position_entropy` is that floor position by position.

Why topics: the source has a memory as long as a line, which a Markov chain of the last few words
has not. A model that slips a word of another topic into a line (its own sample) meets a prefix no
training line had; if it then follows the slip, every later word may break the line's topic. The
true source keeps the topic (its row for a foreign previous word is defined like any other), so
`allowed_next` says which tokens the source could write after any prefix, generated or not: the
error the exposure-bias measurement counts. Torch-free (numpy): token ids 0 … T−1 are the topic
words, T … T+V−1 the words.
"""
import functools
from dataclasses import dataclass

import numpy as np

from engines.sequence.text import WORDS, entropy_nats

TOPIC_WORDS = ("north", "south", "east", "west")


@dataclass(frozen=True, eq=False)
class TopicLines:
    topics: int
    line_length: int
    allowed: np.ndarray  # (T, V) bool: the words topic t writes
    start: np.ndarray    # (T, V): P(first word | topic)
    table: np.ndarray    # (T, V, V): P(next word | topic, previous word)

    @property
    def words(self) -> int:
        return self.allowed.shape[1]

    @property
    def vocab(self) -> int:
        return self.topics + self.words

    @property
    def spellings(self) -> tuple[str, ...]:
        return TOPIC_WORDS[: self.topics] + WORDS[: self.words]

    @functools.cached_property
    def word_distributions(self) -> np.ndarray:
        """q[t, j] for j = 1 … L−1: the distribution of the word at line position j in topic t, (T, L, V)."""
        q = np.zeros((self.topics, self.line_length, self.words))
        q[:, 1] = self.start
        for j in range(2, self.line_length):
            q[:, j] = np.einsum("tv,tvw->tw", q[:, j - 1], self.table)
        return q

    @functools.cached_property
    def per_position_entropy(self) -> np.ndarray:
        """H_j, nats: the entropy of the token at line position j given the line before it, (L,)."""
        h = np.zeros(self.line_length)
        h[0] = np.log(self.topics)
        h[1] = entropy_nats(self.start).mean()
        row_entropy = entropy_nats(self.table)  # (T, V)
        for j in range(2, self.line_length):
            h[j] = (self.word_distributions[:, j - 1] * row_entropy).sum(-1).mean()
        return h

    @property
    def entropy_rate(self) -> float:
        return float(self.per_position_entropy.mean())

    @functools.cached_property
    def bytes_per_token(self) -> float:
        lengths = np.array([len(w.encode()) + 1 for w in self.spellings], dtype=float)
        topic_bytes = lengths[: self.topics].mean()
        word_bytes = (self.word_distributions[:, 1:] @ lengths[self.topics:]).mean(0).sum()  # mean over topics
        return float((topic_bytes + word_bytes) / self.line_length)

    @property
    def entropy_rate_per_byte(self) -> float:
        return self.entropy_rate / self.bytes_per_token

    @functools.cached_property
    def unigram(self) -> np.ndarray:
        """P(token) over the vocabulary, averaged over line positions (what counting tends to)."""
        p = np.zeros(self.vocab)
        p[: self.topics] = 1 / self.topics / self.line_length
        p[self.topics:] = self.word_distributions[:, 1:].mean(0).sum(0) / self.line_length
        return p

    def sample(self, lines: int, seed: int) -> np.ndarray:
        """`lines` lines of token ids, concatenated: (lines · L,)."""
        rng = np.random.default_rng(seed)
        topics = rng.integers(0, self.topics, lines)
        uniforms = rng.random((lines, self.line_length))
        start_cdf, table_cdf = np.cumsum(self.start, -1), np.cumsum(self.table, -1)
        out = np.empty((lines, self.line_length), dtype=np.int64)
        out[:, 0] = topics
        word = np.minimum((uniforms[:, 1:2] > start_cdf[topics]).sum(-1), self.words - 1)  # inverse CDF, all lines at once
        out[:, 1] = word + self.topics
        for j in range(2, self.line_length):
            word = np.minimum((uniforms[:, j:j + 1] > table_cdf[topics, word]).sum(-1), self.words - 1)
            out[:, j] = word + self.topics
        return out.reshape(-1)

    def text(self, ids) -> str:
        spellings = self.spellings
        return "".join(spellings[int(i)] + " " for i in ids)

    def next_distribution(self, topic: np.ndarray, position: np.ndarray, previous: np.ndarray) -> np.ndarray:
        """P(next token) for lines of topic `topic` whose next token is at line `position` after token
        `previous` (ids), each (n,) → (n, vocab). Position 0: a topic word; a prefix the source could
        not have written still has its row (the topic is the line's, the word the previous token's)."""
        out = np.zeros((len(topic), self.vocab))
        position, topic = np.asarray(position) % self.line_length, np.asarray(topic)
        first, starts = position == 0, position == 1
        out[first, : self.topics] = 1 / self.topics
        out[starts, self.topics:] = self.start[topic[starts]]
        rest = ~(first | starts)
        word = np.clip(np.asarray(previous)[rest] - self.topics, 0, self.words - 1)
        out[rest, self.topics:] = self.table[topic[rest], word]
        return out

    def allowed_next(self, lines: np.ndarray) -> np.ndarray:
        """For line-aligned token ids (n, t): which tokens the source could write at each position
        1 … t after the prefix before it, (n, t, vocab) bool (position t: the token after the last)."""
        n, t = lines.shape
        positions = np.arange(1, t + 1)
        topics = lines[:, (positions - 1) // self.line_length * self.line_length]  # the current line's topic token
        probs = self.next_distribution(topics.reshape(-1), np.tile(positions, n), lines.reshape(-1))
        return probs.reshape(n, t, self.vocab) > 0

    def log_prob(self, ids: np.ndarray) -> np.ndarray:
        """ln P(token | the line before it) for every token of line-aligned ids (the first included)."""
        lines = ids.reshape(-1, self.line_length)
        topics = np.repeat(lines[:, 0], self.line_length)
        positions = np.tile(np.arange(self.line_length), len(lines))
        previous = np.concatenate([[0], ids[:-1]])
        probs = self.next_distribution(topics, positions, previous)[np.arange(len(ids)), ids]
        return np.log(np.where(probs > 0, probs, np.finfo(float).tiny))


@functools.cache
def topic_lines(topics: int = 2, words: int = 16, own_words: int = 10, branching: int = 3, line_length: int = 16,
                concentration: float = 1.0, seed: int = 0) -> TopicLines:
    """`topics` topics over the first `words` of WORDS, each writing `own_words` of them (drawn, so
    topics overlap in part), `branching` next words per word, Dirichlet(`concentration`) probabilities."""
    if not (1 <= topics <= len(TOPIC_WORDS) and 2 <= own_words <= words <= len(WORDS) and 1 <= branching <= own_words
            and line_length >= 2):
        raise ValueError(f"need 1 ≤ topics ≤ {len(TOPIC_WORDS)}, 2 ≤ own_words ≤ words ≤ {len(WORDS)}, "
                         f"1 ≤ branching ≤ own_words, line_length ≥ 2; got {topics}, {words}, {own_words}, "
                         f"{branching}, {line_length}")
    rng = np.random.default_rng(seed)
    allowed = np.zeros((topics, words), dtype=bool)
    start = np.zeros((topics, words))
    table = np.zeros((topics, words, words))
    for t in range(topics):
        own = np.sort(rng.permutation(words)[:own_words])
        allowed[t, own] = True
        start[t, own] = rng.dirichlet(np.full(own_words, concentration))
        for previous in range(words):  # every previous word has a row, foreign ones too
            nexts = rng.permutation(own)[:branching]
            table[t, previous, nexts] = rng.dirichlet(np.full(branching, concentration))
    return TopicLines(topics, line_length, allowed, start, table)
