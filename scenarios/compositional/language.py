"""The shape of a config's command language, counted without torch (engines/sequence/scan.py's
grammar): how many commands, how many use jump in a composition, how many have meanings longer than
a bound, the longest meaning and the tokens of an aligned example — for the cost estimate, which the
page asks before torch is imported. tests/test_compositional.py checks every count against the
commands scan.py generates."""
from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    phrases: tuple[tuple[int, int, bool], ...]  # (words, actions, uses jump) of every phrase
    conjunctions: int

    @property
    def commands(self) -> int:
        return len(self.phrases) * (1 + self.conjunctions * len(self.phrases))

    @property
    def with_jump(self) -> int:
        """Commands that use jump, "jump" alone included."""
        n, jump = len(self.phrases), sum(j for *_, j in self.phrases)
        return jump + self.conjunctions * (n * n - (n - jump) ** 2)

    @property
    def longest(self) -> int:
        """Actions of the longest meaning."""
        return 2 * max(a for _, a, _ in self.phrases)

    @property
    def tokens(self) -> int:
        """Tokens of "command SEP actions EOS" with every command ending just before SEP (scan.aligned)."""
        return 2 * max(w for w, _, _ in self.phrases) + 1 + self.longest + 2

    def longer_than(self, actions: int) -> int:
        """Commands whose meaning has more than `actions` actions."""
        count = Counter(a for _, a, _ in self.phrases)
        pairs = sum(count[a] * count[b] for a in count for b in count if a + b > actions)
        return sum(n for a, n in count.items() if a > actions) + self.conjunctions * pairs


def shape(thrice: bool, opposite: bool, after: bool) -> Shape:
    forms = [(0, 1), (1, 2), (1, 2)] + ([(2, 3)] * 2 if opposite else [])  # (words added, actions): x, x left, x opposite left
    verbs = [(1 + w, a, primitive == "jump") for primitive in ("jump", "walk", "run", "look") for w, a in forms]
    verbs += [(2, 1, False)] * 2 + ([(3, 2, False)] * 2 if opposite else [])  # turn left, turn opposite left
    repeats = [(0, 1), (1, 2)] + ([(1, 3)] if thrice else [])  # x, x twice, x thrice
    return Shape(tuple((w + rw, a * times, jump) for w, a, jump in verbs for rw, times in repeats), 2 if after else 1)
