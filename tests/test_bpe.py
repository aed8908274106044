"""Byte-level BPE written as the lesson, against the worked example, Hugging Face `tokenizers` and round trips."""
import functools
import json
import re

from hypothesis import given, settings, strategies as st

from engines.sequence.bpe import BYTES, GPT2_SPLIT, chunks_of, gpt2_byte_rank, merge_pair, token_counts, train_bpe
from engines.sequence.text import prose

SAMPLE = prose().train[:400]  # ~50 KB of real prose


@functools.cache
def trained(pre_split: bool):
    """Our tie-break, the comparison's text and size (trained once per session)."""
    return train_bpe(SAMPLE, 800, pre_split=pre_split)


def hf_merges(texts, vocab_size: int, pre_split: bool) -> list[tuple[bytes, bytes]]:
    """tokenizers' BPE trainer on the same chunks: its ByteLevel pre-tokenizer (GPT-2's regex or none),
    all 256 bytes as the alphabet, min_frequency 2; merges mapped back from GPT-2's byte stand-ins."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=pre_split)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer)
    stand_in = byte_stand_ins()
    return [(bytes(stand_in[c] for c in a), bytes(stand_in[c] for c in b))
            for a, b in json.loads(tokenizer.to_str())["model"]["merges"]]


def byte_stand_ins() -> dict[str, int]:
    """GPT-2's bytes_to_unicode, inverted: printable bytes are themselves, the rest 256, 257, … ."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    others = [b for b in range(BYTES) if b not in printable]
    return {**{chr(b): b for b in printable}, **{chr(BYTES + i): b for i, b in enumerate(others)}}


def merged_bytes(bpe) -> list[tuple[bytes, bytes]]:
    vocabulary = bpe.vocabulary()
    return [(vocabulary[a], vocabulary[b]) for a, b in bpe.merges]


def test_the_worked_example_gives_the_known_ids() -> None:
    """"aaabdaaabac", 3 merges: 256 = aa; then aa+a and a+b tie at 2 and the smaller ids (97, 98) win,
    257 = ab; 258 = aa+ab = aaab. Either tie-break ends at [258, 100, 258, 97, 99]."""
    bpe = train_bpe(["aaabdaaabac"], 259, pre_split=False)
    assert bpe.merges == ((97, 97), (97, 98), (256, 257)) and bpe.counts == (4, 2, 2), (bpe.merges, bpe.counts)
    assert bpe.encode("aaabdaaabac") == [258, 100, 258, 97, 99], bpe.encode("aaabdaaabac")
    by_hand = list(b"aaabdaaabac")  # the tie to the pair seen first (aa+a): 257 = aaa, same ids at the end
    for pair, new_id in (((97, 97), 256), ((256, 97), 257), ((257, 98), 258)):
        by_hand = merge_pair(by_hand, pair, new_id)
    assert by_hand == [258, 100, 258, 97, 99], by_hand


def test_training_stops_when_no_pair_occurs_twice() -> None:
    """The text supports only so many merges: here 3, whatever vocabulary is asked for."""
    bpe = train_bpe(["aaabdaaabac"], 1000, pre_split=False)
    assert bpe.vocab_size == 259, bpe.vocab_size


def test_merges_equal_hugging_face_tokenizers_with_its_byte_order() -> None:
    """With ties broken in tokenizers' own id order (GPT-2's byte stand-ins), every merge is the same, with
    and without the GPT-2 pre-split."""
    for pre_split in (True, False):
        ours = merged_bytes(train_bpe(SAMPLE, 800, pre_split=pre_split, rank=gpt2_byte_rank()))
        theirs = hf_merges(SAMPLE, 800, pre_split)
        first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
        assert len(ours) == len(theirs) == 800 - BYTES and first is None, \
            f"pre_split={pre_split}: {len(ours)} against {len(theirs)} merges, first difference at {first}"


def test_with_our_byte_order_the_only_difference_is_a_tie() -> None:
    """Ties broken by byte value instead: the first merge that differs from tokenizers' had a rival of
    the same count — the pair tokenizers chose, which our run would take next at that count."""
    for pre_split in (True, False):
        ours = trained(pre_split)
        theirs = hf_merges(SAMPLE, 800, pre_split)
        first = next(i for i, (a, b) in enumerate(zip(merged_bytes(ours), theirs)) if a != b)
        with_their_order = train_bpe(SAMPLE, BYTES + first + 1, pre_split=pre_split, rank=gpt2_byte_rank())
        assert merged_bytes(with_their_order)[first] == theirs[first]
        assert with_their_order.counts[first] == ours.counts[first], \
            f"pre_split={pre_split}: at merge {first} ours counted {ours.counts[first]}, theirs {with_their_order.counts[first]}"


any_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=60) | st.sampled_from(
    ["", " ", "\n\n", "naïve café", "日本語のテキスト", "🙂👍🏽 emoji", "it's   spaced\tout", "x" * 70])


@settings(max_examples=60, deadline=None)
@given(text=any_text, pre_split=st.booleans())
def test_encode_then_decode_is_the_identity_on_strings(text: str, pre_split: bool) -> None:
    bpe = trained(pre_split)
    ids = bpe.encode(text)
    assert bpe.decode(ids) == text.encode("utf-8"), (text, ids)
    assert all(0 <= i < bpe.vocab_size for i in ids)


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=60), pre_split=st.booleans())
def test_invalid_utf8_bytes_round_trip_as_bytes(data: bytes, pre_split: bool) -> None:
    bpe = trained(pre_split)
    assert bpe.decode(bpe.encode(data)) == data
    assert b"".join(chunks_of(data, pre_split)) == data


def test_the_empty_string_is_no_tokens() -> None:
    assert trained(True).encode("") == [] and trained(False).encode(b"") == [] and trained(True).decode([]) == b""


@settings(max_examples=25, deadline=None)
@given(text=any_text, pre_split=st.booleans())
def test_replaying_merges_in_order_counts_what_encoding_gives(text: str, pre_split: bool) -> None:
    """token_counts (one pass over a pair index) equals len(encode) with the first k merges, for every k checked."""
    bpe = trained(pre_split)
    counts = token_counts(bpe, [text])
    for k in (0, 1, 37, 200, len(bpe.merges)):
        assert counts[k] == len(bpe.truncated(BYTES + k).encode(text)), (text, k)


def test_the_pre_split_keeps_merges_inside_words() -> None:
    """With GPT-2's split no token spans a word boundary (a space after a non-space); without it, many do."""
    spanning = {pre: [t for t in trained(pre).vocabulary()[BYTES:] if re.search(rb"\S\s", t)] for pre in (True, False)}
    assert not spanning[True], spanning[True][:5]
    assert len(spanning[False]) > 20, f"only {len(spanning[False])} cross-word tokens without the pre-split"


def test_the_split_pattern_covers_every_character() -> None:
    text = "Hello, world! It's 2024: naïve café — 日本語 🙂\t\n  x_y"
    assert "".join(GPT2_SPLIT.findall(text)) == text
