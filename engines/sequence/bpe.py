"""Byte-level byte-pair encoding (Sennrich et al. 2016; GPT-2's byte-level variant, Radford et al. 2019).

The vocabulary starts as the 256 byte values, so every string (any language, emoji, even
invalid UTF-8) is already encodable. Training repeats one step: count every adjacent pair of
tokens in the training text, take the most frequent, and give it the next id (256, 257, …);
every occurrence, left to right, becomes that one token. Encoding replays the merges in the
order they were learned. Worked example, "aaabdaaabac" with 3 merges: 256 = "aa"
(4 adjacent a-a pairs), then "aa"+"a" and "a"+"b" both occur twice — a tie — and either
choice ends at 258 = "aaab": [258, 100, 258, 97, 99].

**Tie-break (stated):** among pairs of equal count, the smallest (left id, right id) wins,
ids compared by `rank`: by default the id itself. Hugging Face `tokenizers` breaks ties the
same way in *its* ids, which order the 256 bytes by the code point of GPT-2's printable
stand-in for each byte (`gpt2_byte_rank`); passed as `rank`, our merges equal theirs merge
for merge (tests/test_bpe.py checks both: equal with its order, and with ours different only
at a tie).

**Pre-split (optional):** GPT-2 first cuts text into chunks with a regex (`GPT2_SPLIT`:
contractions, a letter run with its leading space, digits, other symbols, whitespace), and
merges never cross a chunk. Without it, frequent phrases merge across words ("e th",
"s, and"). Written for Python's `re`, which has no \\p{L}/\\p{N}: letters are [^\\W\\d_]
and numbers \\d (Unicode decimal digits), the same on our ASCII prose.

**Speed:** the trainer keeps, per pair, its count and the positions where it occurs (a linked
list over the tokens of each distinct chunk, counts weighted by the chunk's frequency), and
a heap of counts with stale entries re-checked on the way out; a merge touches only its own
occurrences. ~0.5 s for 3840 merges on the 160 KB of prose (bench/ measures). The same index
replays merges on held-out text (`token_counts`) to give its length at every vocabulary size
in one pass: with merges replayed in rank order, the first k of them encode exactly as a
k-merge tokenizer does (a merge only creates pairs with later ranks).

API: `train_bpe(texts, vocab_size, pre_split=True)` → `BPE`; `BPE.encode(text | bytes)`,
`BPE.decode(ids)` → bytes, `BPE.token_bytes(id)`, `BPE.truncated(vocab_size)`,
`token_counts(bpe, texts)`. Pure Python, torch-free.
"""
import heapq
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

GPT2_SPLIT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")
BYTES = 256


def chunks_of(text: str | bytes, pre_split: bool = True) -> list[bytes]:
    """The byte strings merges stay inside: GPT-2's regex chunks, or the whole text. Bytes that are
    not UTF-8 ride through as lone surrogates (`surrogateescape`) and come back as the same bytes."""
    data = text if isinstance(text, str) else text.decode("utf-8", errors="surrogateescape")
    pieces = GPT2_SPLIT.findall(data) if pre_split else ([data] if data else [])
    return [piece.encode("utf-8", errors="surrogateescape") for piece in pieces]


def gpt2_byte_rank() -> list[int]:
    """Byte b's place when bytes are ordered by GPT-2's printable stand-in (`bytes_to_unicode`):
    printable bytes stand for themselves, the other 68 for 256, 257, … in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    stand_in, extra = {}, 0
    for b in range(BYTES):
        if b in printable:
            stand_in[b] = b
        else:
            stand_in[b], extra = BYTES + extra, extra + 1
    order = sorted(range(BYTES), key=stand_in.__getitem__)
    return [order.index(b) for b in range(BYTES)]


@dataclass(frozen=True)
class BPE:
    """Merges in order: merge i joins `merges[i]` into id 256 + i; `counts[i]` is how often the pair
    occurred in the training text when it was merged."""
    merges: tuple[tuple[int, int], ...]
    counts: tuple[int, ...]
    pre_split: bool = True
    _ranks: dict = field(default=None, compare=False, repr=False)
    _cache: dict = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ranks", {pair: i for i, pair in enumerate(self.merges)})
        object.__setattr__(self, "_cache", {})

    @property
    def vocab_size(self) -> int:
        return BYTES + len(self.merges)

    def truncated(self, vocab_size: int) -> "BPE":
        """The tokenizer of the first `vocab_size − 256` merges (what training to that size gives)."""
        keep = max(0, vocab_size - BYTES)
        return BPE(self.merges[:keep], self.counts[:keep], self.pre_split)

    def token_bytes(self, token: int) -> bytes:
        table = self.vocabulary()
        return table[token]

    def vocabulary(self) -> list[bytes]:
        """Every token's bytes, by id."""
        if "vocab" not in self._cache:
            table = [bytes([b]) for b in range(BYTES)]
            for left, right in self.merges:
                table.append(table[left] + table[right])
            self._cache["vocab"] = table
        return self._cache["vocab"]

    def encode_chunk(self, chunk: bytes) -> list[int]:
        """Replay the merges on one chunk: merge the present pair learned first, everywhere, until none."""
        cached = self._cache.get(chunk)
        if cached is not None:
            return cached
        ids = list(chunk)
        while len(ids) > 1:
            rank, pair = min((self._ranks.get(p, len(self.merges)), p) for p in zip(ids, ids[1:]))
            if rank == len(self.merges):
                break
            ids = merge_pair(ids, pair, BYTES + rank)
        if len(chunk) < 64:  # words repeat; long chunks (no pre-split) rarely do
            self._cache[chunk] = ids
        return ids

    def encode(self, text: str | bytes) -> list[int]:
        if not self.merges:  # the bytes themselves
            return list(text.encode("utf-8", errors="surrogateescape") if isinstance(text, str) else text)
        return [token for chunk in chunks_of(text, self.pre_split) for token in self.encode_chunk(chunk)]

    def decode(self, ids: Iterable[int]) -> bytes:
        table = self.vocabulary()
        return b"".join(table[i] for i in ids)

    def decode_text(self, ids: Iterable[int]) -> str:
        return self.decode(ids).decode("utf-8", errors="replace")


def merge_pair(ids: Sequence[int], pair: tuple[int, int], new: int) -> list[int]:
    """Every occurrence of `pair`, left to right and not overlapping, becomes `new`."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


class PairIndex:
    """The tokens of a multiset of chunks as linked lists, with each adjacent pair's weighted count
    and the positions where it was made. `merge(pair, new)` joins every occurrence left to right,
    touching only those. Position lists are append-only: an entry whose pair has since changed is
    skipped when met (cheaper than removing it when the pair changes)."""

    def __init__(self, chunks: Counter) -> None:
        self.ids: list[int] = []
        self.next: list[int] = []
        self.prev: list[int] = []
        self.weight: list[int] = []
        counts: dict[tuple[int, int], int] = {}
        where: dict[tuple[int, int], list[int]] = {}
        for chunk, count in chunks.items():
            start, n = len(self.ids), len(chunk)
            self.ids += chunk
            self.next += range(start + 1, start + n + 1)
            self.next[-1] = -1
            self.prev += range(start - 1, start + n - 1)
            self.prev[start] = -1
            self.weight += [count] * n
            for k, pair in enumerate(zip(chunk, chunk[1:]), start):
                counts[pair] = counts.get(pair, 0) + count
                where.setdefault(pair, []).append(k)
        self.counts, self.where = counts, where
        self.tokens = sum(len(chunk) * count for chunk, count in chunks.items())  # weighted token count

    def merge(self, pair: tuple[int, int], new: int) -> set[tuple[int, int]]:
        """Join every occurrence of `pair` into `new`; returns the pairs whose count grew."""
        left, right = pair
        grown: set[tuple[int, int]] = set()
        ids, nxt, prv, weight, counts, where = self.ids, self.next, self.prev, self.weight, self.counts, self.where
        merged = 0
        for i in sorted(where.pop(pair, ())):
            j = nxt[i]
            if ids[i] != left or j < 0 or ids[j] != right:
                continue  # stale, or taken by an overlapping occurrence just merged ("aaa")
            w, p, n = weight[i], prv[i], nxt[j]
            if p >= 0:
                before, after = (ids[p], left), (ids[p], new)
                counts[before] -= w
                counts[after] = counts.get(after, 0) + w
                where.setdefault(after, []).append(p)
                grown.add(after)
            if n >= 0:
                before, after = (right, ids[n]), (new, ids[n])
                if before != pair:
                    counts[before] -= w
                counts[after] = counts.get(after, 0) + w
                where.setdefault(after, []).append(i)
                grown.add(after)
                prv[n] = i
            ids[i], ids[j], nxt[i] = new, -1, n
            merged += w
        self.tokens -= merged
        counts.pop(pair, None)
        return grown


def train_bpe(texts: Iterable[str | bytes], vocab_size: int, pre_split: bool = True, min_count: int = 2,
              rank: Sequence[int] | None = None) -> BPE:
    """Merge the most frequent pair until `vocab_size` tokens or no pair occurs `min_count` times.
    Ties: the smallest (rank(left), rank(right)); `rank` orders the 256 bytes (default: by value),
    merged ids come after every byte, in the order they were made."""
    if vocab_size < BYTES:
        raise ValueError(f"vocab_size must be at least {BYTES} (the bytes), got {vocab_size}")
    if vocab_size == BYTES:
        return BPE((), (), pre_split)
    order = list(rank) if rank is not None else list(range(BYTES))
    key = (lambda pair: (order[pair[0]] if pair[0] < BYTES else pair[0],
                         order[pair[1]] if pair[1] < BYTES else pair[1]))
    index = PairIndex(Counter(chunk for text in texts for chunk in chunks_of(text, pre_split)))
    heap = [(-count, key(pair), pair) for pair, count in index.counts.items()]
    heapq.heapify(heap)
    merges: list[tuple[int, int]] = []
    counts: list[int] = []
    while len(merges) < vocab_size - BYTES and heap:
        negative, _, pair = heapq.heappop(heap)
        current = index.counts.get(pair, 0)
        if current != -negative:  # stale: its count fell since it was pushed
            if current > 0:
                heapq.heappush(heap, (-current, key(pair), pair))
            continue
        if current < min_count:
            break
        new = BYTES + len(merges)
        merges.append(pair)
        counts.append(current)
        for grown in index.merge(pair, new):
            if index.counts.get(grown, 0) > 0:
                heapq.heappush(heap, (-index.counts[grown], key(grown), grown))
    return BPE(tuple(merges), tuple(counts), pre_split)


def token_counts(bpe: BPE, texts: Iterable[str | bytes]) -> list[int]:
    """The number of tokens `texts` encode to with the first k merges, for k = 0 … len(merges):
    one pass replaying the merges in order over a pair index of the text."""
    index = PairIndex(Counter(chunk for text in texts for chunk in chunks_of(text, bpe.pre_split)))
    lengths = [index.tokens]
    for i, pair in enumerate(bpe.merges):
        if pair in index.where:
            index.merge(pair, BYTES + i)
        lengths.append(index.tokens)
    return lengths
