"""The prose tokenizers a page trains, torch-free: what the UI may ask before Run ("does this text support
that vocabulary?") and what the engines train on.

- `training_text(prose_kib)`: whole training paragraphs of the prose (engines.sequence.text), in order,
  until `prose_kib` KiB (`PROSE_KIB`; 256 takes all of it, about 160 KiB on Python 3.11).
- `supported_vocab(prose_kib)`: 256 + the merges the pre-split BPE can make before no pair of tokens
  occurs twice: the largest vocabulary that text supports. Computed by training to exhaustion (cached:
  ~0.1 s for 16 KiB, ~0.5 s for all of it).
- `tokenizer(prose_kib, vocab_size, pre_split)`: merges nest — the first k merges of a longer run are a
  run of k merges — so the pre-split tokenizer of any size is the exhausted one truncated.
- `vocab_grid`, `lm_vocab_sizes`, `held_out_sentence`: the sizes a page measures and the sentence it shows.
"""
import functools
import re

from engines.sequence.bpe import BPE, BYTES, train_bpe
from engines.sequence.text import prose

PROSE_KIB = (16, 32, 64, 128, 256)  # 256: all of it (about 160 KiB on Python 3.11)
GRID_STEP = 64
SENTENCE_BYTES = 90


@functools.lru_cache(maxsize=8)
def training_text(prose_kib: int) -> tuple[str, ...]:
    """Whole training paragraphs, in order, until `prose_kib` KiB are reached."""
    kept, total = [], 0
    for paragraph in prose().train:
        if total >= prose_kib * 1024:
            break
        kept.append(paragraph)
        total += len(paragraph.encode()) + 1
    return tuple(kept)


@functools.lru_cache(maxsize=8)
def exhausted(prose_kib: int) -> BPE:
    """The pre-split tokenizer trained until no pair occurs twice: the largest vocabulary the text supports."""
    return train_bpe(training_text(prose_kib), 10 ** 9, pre_split=True)


def supported_vocab(prose_kib: int) -> int:
    return exhausted(prose_kib).vocab_size


@functools.lru_cache(maxsize=4)
def tokenizer(prose_kib: int, vocab_size: int, pre_split: bool) -> BPE:
    if pre_split:
        return exhausted(prose_kib).truncated(vocab_size)
    return train_bpe(training_text(prose_kib), vocab_size, pre_split=False)


def vocab_grid(vocab_size: int) -> list[int]:
    return sorted({*range(BYTES, vocab_size, GRID_STEP), vocab_size})


def lm_vocab_sizes(vocab_size: int) -> list[int]:
    """The bytes, the geometric middle (a multiple of 64) and the full vocabulary: the LMs' sizes and
    the sentence's."""
    middle = int(round((BYTES * vocab_size) ** 0.5 / GRID_STEP) * GRID_STEP)
    return sorted({BYTES, min(max(middle, BYTES), vocab_size), vocab_size})


def held_out_sentence() -> str:
    """The first held-out paragraph's first sentence (cut at a word near SENTENCE_BYTES)."""
    text = prose().held_out[0]
    sentence = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    if len(sentence.encode()) > SENTENCE_BYTES:
        sentence = sentence[: sentence.rfind(" ", 0, SENTENCE_BYTES)]
    return sentence
