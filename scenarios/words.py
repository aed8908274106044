"""Words every page's sentences share: counted nouns and byte sizes.

One place decides how "1 step" and "21 steps" read, and how bytes are written, so that no
sentence says "1 units" and no two different sizes in one sentence print the same ("2 KiB
without checkpointing, 2 KiB with" for 2,560 and 2,048 bytes).
"""
import math

IRREGULAR = {"index": "indices", "matrix": "matrices", "batch": "batches", "micro-batch": "micro-batches",
             "axis": "axes", "is": "are", "was": "were"}
UNITS = (("B", 1), ("KiB", 2 ** 10), ("MiB", 2 ** 20), ("GiB", 2 ** 30), ("TiB", 2 ** 40))
MIB = dict(UNITS)["MiB"]  # the charts' unit for memory and bytes, the one the sentences use


def noun(count: float, singular: str, plural: str | None = None) -> str:
    """The form of `singular` that `count` takes: 'step' for exactly 1, else 'steps'."""
    if count == 1:
        return singular
    if plural is not None:
        return plural
    if singular in IRREGULAR:
        return IRREGULAR[singular]
    head, _, last = singular.rpartition(" ")  # "hidden unit" -> "hidden units"
    return (head + " " if head else "") + IRREGULAR.get(last, last + "s")


def count(value: float, singular: str, plural: str | None = None) -> str:
    """'1 step', '21 steps', '1,024 units': a whole number and its noun."""
    return f"{value:,.0f} {noun(value, singular, plural)}"


def counted(value: float, singular: str, plural: str | None = None) -> str:
    """A claim's text for a count: '{} step' or '{} steps', the number to be filled in."""
    return "{} " + noun(value, singular, plural)


def listing(items: list[str], last: str = "and") -> str:
    """'a', 'a and b', 'a, b and c'."""
    if len(items) < 2:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {last} " + items[-1]


def _unit_for(value: float) -> tuple[str, int]:
    size = abs(value)
    return next(((name, scale) for name, scale in reversed(UNITS) if size >= scale), UNITS[0])


def _in_unit(value: float, name: str, scale: int, decimals: int) -> str:
    if scale == 1:
        return f"{value:,.0f} B"
    return f"{value / scale:,.{decimals}f} {name}"


def _decimals(scaled: float) -> int:
    """Decimals that give three significant digits."""
    return max(0, 2 - int(math.floor(math.log10(abs(scaled))))) if scaled else 0


def byte_sizes(*values: float) -> list[str]:
    """Each size in B, KiB, MiB, … (the unit of the largest), to three significant digits of the
    largest or more, as many as keep every two different values apart and no nonzero value at 0;
    exact bytes when no precision up to four decimals does. 2,560 and 2,048 bytes: '2.50 KiB',
    '2.00 KiB'."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return [str(v) for v in values]
    largest = max(abs(v) for v in finite)
    name, scale = _unit_for(largest)
    for decimals in range(_decimals(largest / scale), 5):
        texts = {v: _in_unit(v, name, scale, decimals) for v in finite}
        apart = len(set(texts.values())) == len(set(finite))
        visible = all(v == 0 or float(texts[v].split()[0].replace(",", "")) != 0 for v in finite)
        if apart and visible:
            return [texts.get(v, str(v)) for v in values]
    return [f"{v:,.0f} B" if v in finite else str(v) for v in values]


def byte_size(value: float) -> str:
    """One size, to three significant digits in its own unit ('2.5 KiB', '1.64 GiB', '512 B')."""
    if value is None or not math.isfinite(value):
        return str(value)
    name, scale = _unit_for(value)
    if scale == 1:
        return f"{value:,.0f} B"
    return f"{value / scale:,.{_decimals(value / scale)}f} {name}"
