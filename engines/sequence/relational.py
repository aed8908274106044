"""A small relational world written out as sentences, so that word analogies have a ground truth.

Each country has a capital and a people (its adjective) and lies in one of four regions. Sentences
are drawn from templates that state these facts:

    "paris is the capital of france"      "france is a country in europe"
    "paris is a city in france"           "the french people live in france"
    "the french capital is paris"         "french is spoken in paris"

A template and a country are drawn for each sentence (the countries uniformly, the templates with
fixed weights), from a seeded `numpy.random.Generator`. Three relations hold for every country —
country→capital, country→people, capital→people — and every pair of countries gives one analogy
question per relation, e.g. (france : paris :: japan : ?) → tokyo: `analogy_questions`.

`pair_counts` counts the skip-gram pairs (word, context) of the corpus exactly: every context word
within `window` positions of the word, inside its sentence. From the counts come PMI and the
target SGNS converges to (engines.sequence.word2vec). Torch-free (numpy).
"""
import functools
from dataclasses import dataclass

import numpy as np

REGIONS = ("europe", "asia", "africa", "america")
# (country, capital, people, region index), listed a region at a time in turn so the first n are balanced
COUNTRIES = (("france", "paris", "french", 0), ("japan", "tokyo", "japanese", 1), ("egypt", "cairo", "egyptian", 2),
             ("peru", "lima", "peruvian", 3), ("italy", "rome", "italian", 0), ("china", "beijing", "chinese", 1),
             ("kenya", "nairobi", "kenyan", 2), ("chile", "santiago", "chilean", 3), ("spain", "madrid", "spanish", 0),
             ("india", "delhi", "indian", 1), ("ghana", "accra", "ghanaian", 2), ("canada", "ottawa", "canadian", 3),
             ("germany", "berlin", "german", 0), ("korea", "seoul", "korean", 1), ("nigeria", "abuja", "nigerian", 2),
             ("cuba", "havana", "cuban", 3))
TEMPLATES = (("{capital} is the capital of {country}", 3.0), ("{country} is a country in {region}", 2.0),
             ("{capital} is a city in {country}", 2.0), ("the {people} people live in {country}", 2.0),
             ("the {people} capital is {capital}", 1.0), ("{people} is spoken in {capital}", 1.0))
RELATIONS = (("country", "capital"), ("country", "people"), ("capital", "people"))


@dataclass(frozen=True, eq=False)
class World:
    countries: int
    words: tuple[str, ...]          # the vocabulary: every word the templates can write
    sentences: tuple[np.ndarray, ...]  # word ids, one array per sentence

    @functools.cached_property
    def index(self) -> dict[str, int]:
        return {word: i for i, word in enumerate(self.words)}

    def entity(self, role: str, country: int) -> int:
        """The id of a country's `role` word ("country", "capital", "people")."""
        name, capital, people, _ = COUNTRIES[country]
        return self.index[{"country": name, "capital": capital, "people": people}[role]]

    def region(self, country: int) -> int:
        return COUNTRIES[country][3]

    @property
    def tokens(self) -> int:
        return int(sum(len(s) for s in self.sentences))


def vocabulary(countries: int) -> tuple[str, ...]:
    """Every word the templates write about the first `countries` countries: the glue words, the regions,
    then each country's name, capital and people (so a word's id is fixed by `countries` alone)."""
    chosen = COUNTRIES[:countries]
    glue = sorted({w for template, _ in TEMPLATES for w in template.split() if not w.startswith("{")})
    regions = sorted({REGIONS[r] for *_, r in chosen})
    return tuple(glue + regions + [w for c in chosen for w in c[:3]])


@functools.cache
def world(countries: int = 10, sentences: int = 6000, seed: int = 0) -> World:
    """`sentences` sentences about the first `countries` countries (4 ≤ countries ≤ 16)."""
    if not 2 <= countries <= len(COUNTRIES):
        raise ValueError(f"countries must be 2 … {len(COUNTRIES)}, got {countries}")
    chosen, words = COUNTRIES[:countries], vocabulary(countries)
    index = {w: i for i, w in enumerate(words)}
    rng = np.random.default_rng(seed)
    weights = np.array([w for _, w in TEMPLATES])
    kinds = rng.choice(len(TEMPLATES), sentences, p=weights / weights.sum())
    which = rng.integers(0, countries, sentences)
    out = []
    for kind, country in zip(kinds.tolist(), which.tolist()):
        name, capital, people, region = chosen[country]
        text = TEMPLATES[kind][0].format(country=name, capital=capital, people=people, region=REGIONS[region])
        out.append(np.array([index[w] for w in text.split()], dtype=np.int64))
    return World(countries, words, tuple(out))


def analogy_questions(world: World) -> np.ndarray:
    """(a, b, c, d) word ids for a : b :: c : d, every relation and every ordered pair of countries, (n, 4)."""
    rows = [(world.entity(x, i), world.entity(y, i), world.entity(x, j), world.entity(y, j))
            for x, y in RELATIONS for i in range(world.countries) for j in range(world.countries) if i != j]
    return np.array(rows, dtype=np.int64)


def pairs(world: World, window: int) -> np.ndarray:
    """Every (word, context) pair of the corpus, (n, 2): each context word within `window` positions of
    the word, inside its sentence (sentences grouped by length, so whole groups are cut at once)."""
    by_length: dict[int, list[np.ndarray]] = {}
    for sentence in world.sentences:
        by_length.setdefault(len(sentence), []).append(sentence)
    found = []
    for length, group in sorted(by_length.items()):
        block = np.stack(group)  # (sentences, length)
        for offset in range(1, min(window, length - 1) + 1):
            words, contexts = block[:, :-offset].reshape(-1), block[:, offset:].reshape(-1)
            found += [np.stack([words, contexts], 1), np.stack([contexts, words], 1)]  # context after, then before
    return np.concatenate(found)


def pair_counts(world: World, window: int) -> np.ndarray:
    """#(w, c): how often context word c lies within `window` positions of word w in one sentence, (V, V)."""
    vocab = len(world.words)
    found = pairs(world, window)
    return np.bincount(found[:, 0] * vocab + found[:, 1], minlength=vocab * vocab).reshape(vocab, vocab).astype(float)
