"""Text that ships with the machine: real prose, and a synthetic language whose entropy rate is exact.

Nothing is downloaded. Two sources, each with a held-out split that no model trains on:

- **Prose** (`prose()`): the docstrings of a fixed list of standard-library modules
  (`PROSE_MODULES`, in that order), read from the running interpreter's own source files
  (`ast`, nothing imported): the module's docstring, then those of its public classes and
  functions and of their public methods, by name. Real English that nobody here wrote. Cleaning keeps prose only: a docstring is cut
  into paragraphs at blank lines; a paragraph is dropped when it has an indented line (code,
  listings, argument tables), a doctest line (`>>>`, `...`), fewer than 6 words, more than 3%
  code characters or less than 85% letters and spaces; whitespace is collapsed to single
  spaces; a paragraph seen before (an inherited or repeated docstring) is kept once. Every
  10th paragraph (the 10th, 20th, …) is held out. The text depends on the Python version (a
  new release edits its docstrings), so a run records its size and a hash
  (`Corpus.sha256`, `Corpus.hash48`: the first 48 bits as an exact float).
- **A Markov source** (`markov_source(...)`): an order-k chain over a small vocabulary of
  words with fixed spellings (`WORDS`). Each state (the last k words) allows `branching` next
  words, one of them always word (last + 1) mod V so every reachable state can reach every
  other (one recurrent class, hence one stationary distribution π); their probabilities are
  drawn from a Dirichlet. Its entropy rate per token is exact:

      H = Σ_s π(s) · H(P(·|s))            (nats per word)

  and, written as words each followed by one space (no word contains a space, so the bytes
  determine the words and back), per byte H / E_π[len(word) + 1]. Samples start from π, so
  the process is stationary from its first token. No model beats H on held-out text.

Tokens of the Markov source are word ids (0 … V−1); `MarkovSource.text(ids)` spells them.
This module is torch-free (numpy, local `numpy.random.Generator`s only): the UI may import it.
"""
import bisect
import ast
import functools
import hashlib
import importlib.util
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PROSE_MODULES = ("textwrap", "collections", "argparse", "logging", "json", "pathlib", "subprocess", "threading",
                 "statistics", "random", "difflib", "shutil", "tempfile", "typing", "contextlib", "inspect",
                 "zipfile", "configparser", "urllib.parse", "smtplib", "email.message", "http.cookiejar",
                 "socketserver", "codecs", "ast", "calendar", "queue", "weakref", "uuid", "ipaddress", "base64",
                 "cmd", "timeit", "traceback", "os")
HELD_OUT_EVERY = 10        # every 10th paragraph (or synthetic sample) is held out
MIN_WORDS, MIN_CHARS = 6, 40
CODE_CHARACTERS = set("(){}[]=_<>*/\\|@#$%^&~`")
MAX_CODE_SHARE, MIN_LETTER_SHARE = 0.03, 0.85


@dataclass(frozen=True)
class Corpus:
    """A text cut into paragraphs (prose) or samples (Markov), with its held-out share apart."""
    name: str
    train: tuple[str, ...]
    held_out: tuple[str, ...]

    @property
    def train_text(self) -> str:
        return "\n".join(self.train)

    @property
    def held_out_text(self) -> str:
        return "\n".join(self.held_out)

    @property
    def text(self) -> str:
        """All of it, in its fixed order (what the hash is of)."""
        return "\n".join(self.train + self.held_out)

    @functools.cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def hash48(self) -> float:
        """The hash's first 48 bits as a float (exact: below 2^53), to record beside the size."""
        return float(int(self.sha256[:12], 16))

    @property
    def size_bytes(self) -> int:
        return len(self.text.encode("utf-8"))


# --- prose ----------------------------------------------------------------------------------------
def _source_file(module_name: str) -> Path:
    """Where the module's source lies: its spec's origin, or, for a module frozen into the interpreter
    (codecs, os), the file of the same name in the standard library's folder."""
    spec = importlib.util.find_spec(module_name)
    if spec is not None and spec.origin and spec.origin.endswith(".py"):
        return Path(spec.origin)
    base = Path(sysconfig.get_paths()["stdlib"]) / module_name.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    raise RuntimeError(f"the standard-library module {module_name} has no Python source here")


def _own_docstrings(module_name: str) -> list[str]:
    """The module's docstring, then its public classes' and functions' (and their public methods'), by
    name, read from the module's source file with `ast`: the file as the interpreter ships it, not live
    objects (a library imported earlier may have replaced one, e.g. an `inspect` function) and no
    docstring inherited from a base class."""
    tree = ast.parse(_source_file(module_name).read_text(encoding="utf-8"))
    definitions = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    docs = [ast.get_docstring(tree, clean=True)]
    for node in sorted((n for n in tree.body if isinstance(n, definitions) and not n.name.startswith("_")),
                       key=lambda n: n.name):
        docs.append(ast.get_docstring(node, clean=True))
        if isinstance(node, ast.ClassDef):
            methods = [m for m in node.body if isinstance(m, definitions[1:]) and not m.name.startswith("_")]
            docs += [ast.get_docstring(m, clean=True) for m in sorted(methods, key=lambda m: m.name)]
    return [doc for doc in docs if doc and doc.strip()]


def clean_paragraph(paragraph: str) -> str | None:
    """One paragraph as a line of prose, or None when it is code, a listing or too short."""
    lines = paragraph.splitlines()
    if any(line[:1].isspace() for line in lines) or any(line.lstrip().startswith((">>>", "...")) for line in lines):
        return None
    text = " ".join(paragraph.split())
    if len(text) < MIN_CHARS or len(text.split()) < MIN_WORDS:
        return None
    if sum(c in CODE_CHARACTERS for c in text) > MAX_CODE_SHARE * len(text):
        return None
    if sum(c.isalpha() or c == " " for c in text) < MIN_LETTER_SHARE * len(text):
        return None
    return text


@functools.cache
def prose_paragraphs(modules: tuple[str, ...] = PROSE_MODULES) -> tuple[str, ...]:
    """The cleaned, de-duplicated paragraphs of `modules`' docstrings, in a fixed order."""
    kept: dict[str, None] = {}
    for name in modules:
        for doc in _own_docstrings(name):
            for paragraph in re.split(r"\n\s*\n", doc):
                text = clean_paragraph(paragraph)
                if text is not None:
                    kept.setdefault(text)
    if not kept:
        raise RuntimeError("the standard library has no docstrings here (python -OO?): no prose to train on")
    return tuple(kept)


def split(items: tuple[str, ...], every: int = HELD_OUT_EVERY) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(train, held out): item i is held out when (i + 1) % every == 0."""
    return (tuple(x for i, x in enumerate(items) if (i + 1) % every),
            tuple(x for i, x in enumerate(items) if (i + 1) % every == 0))


@functools.cache
def prose(modules: tuple[str, ...] = PROSE_MODULES) -> Corpus:
    """The standard library's docstrings as a Corpus (paragraphs, every 10th held out)."""
    train, held_out = split(prose_paragraphs(modules))
    return Corpus("prose", train, held_out)


# --- a Markov source with an exact entropy rate -----------------------------------------------------
WORDS = ("the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "tree", "quietly", "and", "then", "big",
         "small", "it")


def entropy_nats(p: np.ndarray) -> np.ndarray:
    """−Σ p ln p over the last axis (0 ln 0 = 0)."""
    logs = np.log(np.where(p > 0, p, 1.0))
    return -(p * logs).sum(-1)


@dataclass(frozen=True, eq=False)
class MarkovSource:
    """An order-`order` chain over `len(words)` words: `table[s]` is P(next | state s), the state
    s = Σ_j w_{t−order+j} · V^(order−1−j) (the last `order` words as a base-V number)."""
    words: tuple[str, ...]
    order: int
    table: np.ndarray       # (V^order, V)
    stationary: np.ndarray  # (V^order,) π over states, 0 off the recurrent class

    @property
    def vocab(self) -> int:
        return len(self.words)

    def next_state(self, state: int, word: int) -> int:
        return (state * self.vocab + word) % self.vocab ** self.order

    def state_of(self, history: list[int] | np.ndarray) -> int:
        """The state of the last `order` words of `history`."""
        state = 0
        for word in list(history)[-self.order:]:
            state = state * self.vocab + int(word)
        return state

    @functools.cached_property
    def entropy_rate(self) -> float:
        """H = Σ_s π(s) H(P(·|s)), nats per word."""
        return float(self.stationary @ entropy_nats(self.table))

    @functools.cached_property
    def word_marginal(self) -> np.ndarray:
        """P(next word) under π: the frequency of each word in a long sample."""
        return self.stationary @ self.table

    @functools.cached_property
    def bytes_per_token(self) -> float:
        """E[len(word) + 1]: each word is followed by one space."""
        lengths = np.array([len(w.encode()) + 1 for w in self.words], dtype=float)
        return float(self.word_marginal @ lengths)

    @property
    def entropy_rate_per_byte(self) -> float:
        return self.entropy_rate / self.bytes_per_token

    def allowed(self, state: int) -> np.ndarray:
        """Which words may follow `state` (P > 0)."""
        return self.table[state] > 0

    def sample(self, length: int, seed: int) -> np.ndarray:
        """`length` word ids of the stationary process: the first `order` from π, the rest by the chain."""
        rng = np.random.default_rng(seed)
        start = int(rng.choice(len(self.stationary), p=self.stationary))
        out = np.empty(length, dtype=np.int64)
        digits = [(start // self.vocab ** (self.order - 1 - j)) % self.vocab for j in range(self.order)]
        out[: min(length, self.order)] = digits[:length]
        cumulative = np.cumsum(self.table, axis=1).tolist()  # Python lists: ~4x faster per draw than numpy calls
        uniforms, last = rng.random(length).tolist(), self.vocab - 1
        state, states, vocab = start, self.vocab ** self.order, self.vocab
        words = out.tolist()
        for t in range(self.order, length):
            word = min(bisect.bisect_right(cumulative[state], uniforms[t]), last)
            words[t] = word
            state = (state * vocab + word) % states
        return np.array(words, dtype=np.int64)

    def text(self, ids) -> str:
        """The words spelled out, each followed by one space."""
        return "".join(self.words[int(i)] + " " for i in ids)

    def log_prob(self, ids: np.ndarray) -> np.ndarray:
        """ln P(w_t | the `order` words before it) for t ≥ order (the true conditional, per token)."""
        states = np.zeros(len(ids) - self.order, dtype=np.int64)
        for j in range(self.order):
            states = states * self.vocab + ids[j: len(ids) - self.order + j]
        probs = self.table[states, ids[self.order:]]
        return np.log(np.where(probs > 0, probs, np.finfo(float).tiny))


def _stationary(table: np.ndarray, vocab: int, order: int) -> np.ndarray:
    """π on the states: solve π P = π, Σ π = 1 over the states reachable from state 0 (one recurrent
    class by construction), by least squares on the stacked system (float64)."""
    states = vocab ** order
    reach, frontier = {0}, [0]
    while frontier:
        s = frontier.pop()
        for w in np.flatnonzero(table[s] > 0):
            t = (s * vocab + int(w)) % states
            if t not in reach:
                reach.add(t)
                frontier.append(t)
    index = sorted(reach)
    position = {s: i for i, s in enumerate(index)}
    transition = np.zeros((len(index), len(index)))
    for s in index:
        for w in np.flatnonzero(table[s] > 0):
            transition[position[s], position[(s * vocab + int(w)) % states]] += table[s, w]
    system = np.vstack([transition.T - np.eye(len(index)), np.ones(len(index))])
    target = np.zeros(len(index) + 1)
    target[-1] = 1.0
    solution = np.linalg.lstsq(system, target, rcond=None)[0].clip(min=0)
    pi = np.zeros(states)
    pi[index] = solution / solution.sum()
    return pi


@functools.cache
def markov_source(vocab: int = 16, order: int = 2, branching: int = 4, concentration: float = 1.0,
                  seed: int = 0) -> MarkovSource:
    """An order-`order` chain over the first `vocab` of `WORDS`, `branching` next words per state
    (word last + 1 among them), their probabilities Dirichlet(`concentration`), seeded."""
    if not 2 <= vocab <= len(WORDS) or order < 1 or not 1 <= branching <= vocab:
        raise ValueError(f"need 2 ≤ vocab ≤ {len(WORDS)}, order ≥ 1, 1 ≤ branching ≤ vocab; "
                         f"got vocab={vocab}, order={order}, branching={branching}")
    rng = np.random.default_rng(seed)
    table = np.zeros((vocab ** order, vocab))
    for state in range(vocab ** order):
        cycle = (state % vocab + 1) % vocab  # the last word + 1: a path through every word
        others = rng.permutation([w for w in range(vocab) if w != cycle])[: branching - 1]
        table[state, [cycle, *others]] = rng.dirichlet(np.full(branching, concentration))
    return MarkovSource(WORDS[:vocab], order, table, _stationary(table, vocab, order))


def markov_corpus(source: MarkovSource, train_tokens: int, held_out_tokens: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train ids, held-out ids): two independent stationary samples, seeded apart."""
    return source.sample(train_tokens, seed * 2 + 1), source.sample(held_out_tokens, seed * 2 + 2)
