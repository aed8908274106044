"""The words every sentence shares (scenarios/words.py): a count takes its noun's right form, and two
different byte sizes in one sentence never print the same."""
import random

import pytest

from scenarios.words import byte_size, byte_sizes, count, counted, listing, noun


@pytest.mark.parametrize("value, singular, expected", [
    (1, "unit", "1 unit"), (0, "unit", "0 units"), (21, "step", "21 steps"), (1, "step", "1 step"),
    (2, "micro-batch", "2 micro-batches"), (3, "hidden unit", "3 hidden units"), (1024, "rank", "1,024 ranks"),
    (1.0, "all-reduce", "1 all-reduce"), (4.0, "reduce-scatter", "4 reduce-scatters")])
def test_a_count_takes_the_form_of_its_noun(value: float, singular: str, expected: str) -> None:
    """'1 units' and 'on 1 steps' were on the pages; the helper says '1 unit', '1 step'."""
    assert count(value, singular) == expected


def test_a_claims_count_template_takes_the_form_of_its_value() -> None:
    assert counted(1, "step").format("1") == "1 step" and counted(2, "step").format("2") == "2 steps"
    assert noun(2, "matrix") == "matrices" and noun(2, "axis", "axes") == "axes"


def test_a_list_reads_as_a_list() -> None:
    assert [listing([]), listing(["a"]), listing(["a", "b"]), listing(["a", "b", "c"])] == ["", "a", "a and b", "a, b and c"]


def test_the_issues_byte_sizes_print_apart() -> None:
    """2,560 B against 2,048 B (a 20% saving) printed '2 KiB' twice; 19.5 and 10.5 KiB printed '20' and '10'."""
    assert byte_sizes(2560, 2048) == ["2.50 KiB", "2.00 KiB"]
    assert byte_sizes(19.5 * 1024, 10.5 * 1024) == ["19.5 KiB", "10.5 KiB"]


def test_sizes_too_close_for_any_unit_print_as_exact_bytes() -> None:
    assert byte_sizes(3 * 2**20, 3 * 2**20 + 1) == ["3,145,728 B", "3,145,729 B"]
    assert byte_sizes(0, 5) == ["0 B", "5 B"] and byte_sizes(512) == ["512 B"]


def test_different_sizes_never_print_the_same_and_equal_ones_always_do() -> None:
    """2,000 seeded draws of 2-5 sizes (integers, 1 B to 1 TiB, some repeated): distinct values, distinct texts."""
    rng = random.Random(0)
    for _ in range(2000):
        values = [float(int(10 ** rng.uniform(0, 12))) for _ in range(rng.randint(1, 4))]
        values.append(rng.choice(values) + rng.choice([0, 0, 1, 512, 1024]))
        texts = byte_sizes(*values)
        pairs = [(a, b, ta, tb) for a, ta in zip(values, texts) for b, tb in zip(values, texts) if (a == b) != (ta == tb)]
        assert not pairs, f"{values} -> {texts}"


def test_one_size_reads_to_three_digits_in_its_unit() -> None:
    assert [byte_size(512), byte_size(2560), byte_size(1.6e9), byte_size(1023)] == ["512 B", "2.50 KiB", "1.49 GiB",
                                                                                       "1,023 B"]
