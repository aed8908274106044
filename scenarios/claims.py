"""'What to look for', as claims the records prove.

Every sentence a page says about a run is built from claims: small statements about the
frame ("loss peaked at 173 at step 12", "stayed at chance through step 79", "diverged at
step 40") that carry their own words and their own check. A claim's words are drawn from
the numbers it holds; its `holds(records)` re-reads the frame and says whether those
numbers are what the records show. A property test runs every scenario on random valid
configs and checks every claim its explanation makes, so a sentence cannot be right only
at the defaults.

The vocabulary's thresholds are defined here, once:
- "at chance": within `AT_CHANCE` (relative) of the chance value;
- "gave back" its rise: ended at least `GAVE_BACK` of (peak − first value) below the peak;
- a stated number equals the record it names to `REL` (it was read from it).

Sentences and explanations built from claims live in `scenarios.explanation`. Text
between the claims of a sentence joins them ("while", "then") and asserts nothing of its own.
"""
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scenarios.records import Records

AT_CHANCE = 0.05  # "at chance": |value − chance| ≤ 5% of chance
REL = 1e-9        # a stated number is the recorded one
GAVE_BACK = 0.25  # a curve "gave back" its rise when it ended ≥ 25% of (peak − first) below its peak


SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
RAISED = str.maketrans("-−+0123456789.bt", "⁻⁻⁺⁰¹²³⁴⁵⁶⁷⁸⁹·ᵇᵗ")


def raised(text: object) -> str:
    """An exponent for a chart's text, which has no superscript markup: `raised("-0.5")` is "⁻⁰·⁵"."""
    return str(text).translate(RAISED)


def fmt(value: float) -> str:
    """Three significant digits; powers of ten written out for the very small and very large."""
    if value is None or not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    if abs(value) >= 1e5 or abs(value) < 1e-3:
        return power_of_ten(value)  # one text for the page and the terminal
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def power_of_ten(value: float) -> str:
    """5.69×10⁻⁴: every number of a list in this form where `fmt` would mix it with plain decimals."""
    if value == 0:
        return "0"
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa}×10{str(int(exponent)).translate(SUPERSCRIPT)}"


def three_digits(value: float) -> str:
    """Three significant digits in plain decimals, trailing zeros kept (1.00 and 0.0430, never 1 or 4.3×10⁻²);
    under 0.0005, 0.000 (a deterministic source's entropy is 0 up to rounding: never 1.59×10⁻¹⁷)."""
    if not math.isfinite(value):
        return str(value)
    if abs(value) < 5e-4:
        return "0.000" if value else "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:#.3g}".rstrip(".")


def listed_format(values: list[float | None]) -> Callable[[float], str]:
    """One format for numbers listed together: three significant digits each, in plain decimals ("from
    10.4 to 96.0", never "… to 96"); when one is under 0.001, the same decimals for all, as many as give
    the largest three digits (0.001, 0.043, 0.357, never 9.77×10⁻⁴ beside 0.043)."""
    finite = [abs(v) for v in values if v is not None and math.isfinite(v)]
    if all(v == 0 or v >= 1e-3 for v in finite):
        return three_digits
    places = min(6, max(0, 2 - math.floor(math.log10(max(finite)))))
    return lambda value: f"{value:.{places}f}"


def same(a: float | None, b: float | None, rel: float = REL) -> bool:
    if a is None or b is None:
        return False
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= rel * max(abs(a), abs(b))


def _in_range(series, first: int, last: int):
    return series[(series.index >= first) & (series.index <= last)]


class Claim:
    """One statement about the frame: `str()` is its words, `holds()` its proof."""

    def holds(self, records: "Records") -> bool:
        raise NotImplementedError


@dataclass(frozen=True)
class Value(Claim):
    """`loss 0.063 at step 28`."""
    arm: str
    metric: str
    step: int
    value: float
    label: str = ""

    def __str__(self) -> str:
        return f"{self.label or self.metric} {fmt(self.value)} at step {self.step}"

    def holds(self, records: "Records") -> bool:
        return same(records.at(self.arm, self.metric, self.step), self.value)


@dataclass(frozen=True)
class Final(Claim):
    """`ended at loss 0.012 (step 299)`: the value at the arm's last logged step of the metric."""
    arm: str
    metric: str
    step: int
    value: float
    label: str = ""

    def __str__(self) -> str:
        return f"ended at {self.label + ' ' if self.label else ''}{fmt(self.value)} (step {self.step})"

    def holds(self, records: "Records") -> bool:
        return records.last_step(self.arm, self.metric) == self.step and same(records.last(self.arm, self.metric), self.value)


@dataclass(frozen=True)
class Peak(Claim):
    """`peaked at 173 at step 12`: the largest value of the series, first reached at that step."""
    arm: str
    metric: str
    step: int
    value: float
    label: str = ""

    def __str__(self) -> str:
        return f"{self.label + ' ' if self.label else ''}peaked at {fmt(self.value)} at step {self.step}"

    def holds(self, records: "Records") -> bool:
        series = records.series(self.arm, self.metric)
        return len(series) > 0 and same(series.max(), self.value) and int(series.idxmax()) == self.step


@dataclass(frozen=True)
class Low(Claim):
    """`fell to 0.063 at step 28`: the smallest value of the series, first reached at that step."""
    arm: str
    metric: str
    step: int
    value: float
    label: str = ""

    def __str__(self) -> str:
        return f"{self.label + ' ' if self.label else ''}fell to {fmt(self.value)} at step {self.step}"

    def holds(self, records: "Records") -> bool:
        series = records.series(self.arm, self.metric)
        return len(series) > 0 and same(series.min(), self.value) and int(series.idxmin()) == self.step


@dataclass(frozen=True)
class StayedNear(Claim):
    """`stayed at chance (ln 2 = 0.693) from step 0 through step 299`: every logged value in
    [first, last] within `tolerance` (relative) of `target`."""
    arm: str
    metric: str
    target: float
    first: int
    last: int
    name: str = ""
    tolerance: float = AT_CHANCE

    def __str__(self) -> str:
        span = f"through step {self.last}" if self.first == 0 else f"from step {self.first} through step {self.last}"
        return f"stayed at {self.name or fmt(self.target)} {span}"

    def holds(self, records: "Records") -> bool:
        values = _in_range(records.series(self.arm, self.metric), self.first, self.last)
        return len(values) > 0 and bool((abs(values - self.target) <= self.tolerance * abs(self.target)).all())


@dataclass(frozen=True)
class AtChance(Claim):
    """`at chance (loss 0.69 against ln 2 = 0.693)`: the last value within AT_CHANCE of chance."""
    arm: str
    metric: str
    step: int
    value: float
    chance: float
    chance_name: str = "chance"
    label: str = ""
    level: str = "chance"  # what the chance value is called: "the constant-output loss" for a regression

    def __str__(self) -> str:
        return (f"ended at {self.level} ({self.label + ' ' if self.label else ''}{fmt(self.value)} at step {self.step}; "
                f"{self.chance_name} = {fmt(self.chance)})")

    def holds(self, records: "Records") -> bool:
        return (Final(self.arm, self.metric, self.step, self.value).holds(records)
                and abs(self.value - self.chance) <= AT_CHANCE * abs(self.chance))


@dataclass(frozen=True)
class Above(Claim):
    """`stayed above 1.39 (twice chance) until step 189`: every value before `until` is above the
    threshold and the value at `until` is not; `until=None`: above through the last logged step."""
    arm: str
    metric: str
    threshold: float
    until: int | None
    first: int = 0
    name: str = ""

    def __str__(self) -> str:
        threshold = f"{fmt(self.threshold)} ({self.name})" if self.name else fmt(self.threshold)
        return f"stayed above {threshold} " + (f"until step {self.until}" if self.until is not None else "to the end")

    def holds(self, records: "Records") -> bool:
        series = records.series(self.arm, self.metric)
        series = series[series.index >= self.first]
        if self.until is None:
            return len(series) > 0 and bool((series > self.threshold).all())
        before, at = series[series.index < self.until], series[series.index == self.until]
        return len(before) > 0 and bool((before > self.threshold).all()) and len(at) > 0 and bool((at <= self.threshold).all())


@dataclass(frozen=True)
class DivergedAt(Claim):
    """`diverged at step 40`."""
    arm: str
    step: int

    def __str__(self) -> str:
        return f"diverged at step {self.step}"

    def holds(self, records: "Records") -> bool:
        return records.diverged_at(self.arm) == self.step


@dataclass(frozen=True)
class Lower(Claim):
    """`A ends lower than B`: the last value of `metric` of arm `a` is below that of `b`."""
    a: str
    b: str
    metric: str
    words: str = ""

    def __str__(self) -> str:
        return self.words or f"{self.a} ends with a lower {self.metric} than {self.b}"

    def holds(self, records: "Records") -> bool:
        a, b = records.last(self.a, self.metric), records.last(self.b, self.metric)
        return a is not None and b is not None and a < b


@dataclass(frozen=True)
class Computed(Claim):
    """A number derived from the records (a fitted slope, a ratio of two records, a count),
    re-derived by `compute` when checked. `text` holds `{}` where the number goes."""
    text: str
    value: float
    compute: Callable[["Records"], float | None] = field(compare=False)
    rel: float = 1e-6
    shown: str = ""  # the number as written, when not `fmt(value)`

    def __str__(self) -> str:
        return self.text.format(self.shown or fmt(self.value))

    def holds(self, records: "Records") -> bool:
        return same(self.compute(records), self.value, self.rel)
