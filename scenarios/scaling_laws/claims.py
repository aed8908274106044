"""Scaling laws, said: the fitted law and its exponents, the data-limited row, the floor, each re-read from the records."""
from collections.abc import Callable
from dataclasses import dataclass, field

from scenarios.claims import Claim, Computed, fmt
from scenarios.explanation import Sentence, say
from scenarios.records import Records
from scenarios.scaling_laws.grid import FIT, SOURCE, grid_table  # noqa: F401 (grid_table: the page reads it here)


@dataclass(frozen=True)
class Compared(Claim):
    """`below_words` when a(records) < b(records), else `other_words`; re-checked both ways."""
    below: bool
    below_words: str
    other_words: str
    a: Callable[[Records], float] = field(compare=False)
    b: Callable[[Records], float] = field(compare=False)

    def __str__(self) -> str:
        return self.below_words if self.below else self.other_words

    def holds(self, records: Records) -> bool:
        return (self.a(records) < self.b(records)) == self.below


def fit_value(count: str, name: str) -> Callable[[Records], float | None]:
    return lambda r: r.first(FIT[count], name)


def law_sentence(records: Records, count: str) -> Sentence | None:
    arm = FIT[count]
    if not records.has("alpha", arm):
        return None
    parts = [Computed("{}", records.first(arm, name), fit_value(count, name))  # fmt: E = 4.58×10⁻⁴ as elsewhere
             for name in ("E", "alpha", "beta", "a", "b")]
    return say(f"Fitted with N counted {count}: L = E + A/N^α + B/D^β with E = {{}}, α = {{}}, β = {{}}; so the "
               "compute-optimal N ∝ C^{} and D ∝ C^{} (Chinchilla: 0.5 each; Kaplan: N ∝ C^0.73)", *parts)


def other_count_sentence(records: Records, count: str, other: str) -> Sentence | None:
    if not records.has("a", FIT[other]):
        return None
    a, b = records.first(FIT[other], "a"), records.first(FIT[other], "b")
    return say(f"Counting N {other} instead moves the exponents to N ∝ C^{{}}, D ∝ C^{{}} (from {{}} and {{}} {count})",
               Computed("{}", a, fit_value(other, "a")), Computed("{}", b, fit_value(other, "b")),
               Computed("{}", records.first(FIT[count], "a"), fit_value(count, "a")),
               Computed("{}", records.first(FIT[count], "b"), fit_value(count, "b")))


def _gain(table, tokens: float) -> float:
    """Held-out loss of the smallest model minus the largest's, at one token budget."""
    row = table[table["tokens"] == tokens].sort_values("width")
    return float(row["heldout_loss"].iloc[0] - row["heldout_loss"].iloc[-1])


def data_limited_sentence(records: Records) -> Sentence | None:
    """The smallest budget's gain from the smallest to the largest model against the largest budget's."""
    table = grid_table(records)
    if table.empty or table["width"].nunique() < 2:
        return None
    complete = [t for t in sorted(table["tokens"].unique()) if (table["tokens"] == t).sum() == table["width"].nunique()]
    if len(complete) < 2:
        return None
    low, high = complete[0], complete[-1]
    gain = lambda tokens: (lambda r: _gain(grid_table(r), tokens))  # noqa: E731
    small, large = _gain(table, low), _gain(table, high)
    return say(f"From the smallest to the largest model the held-out loss falls by {{}} nats at the smallest budget "
               f"(D = {low:,.0f} tokens) and by {{}} at the largest (D = {high:,.0f}): the small-data row is {{}}",
               Computed("{}", small, gain(low)), Computed("{}", large, gain(high)),
               Compared(small < large, "flatter, limited by its data rather than by the model's size",
                        "not flatter here", gain(low), gain(high)))


def floor_sentence(records: Records, count: str) -> Sentence | None:
    table = grid_table(records)
    if table.empty or not records.has("entropy_rate", SOURCE):
        return None
    best = table["heldout_loss"].idxmin()
    parts: list[Claim] = [
        Computed("{}", records.first(SOURCE, "entropy_rate"), lambda r: r.first(SOURCE, "entropy_rate")),
        Computed("{}", records.first(SOURCE, "sample_floor"), lambda r: r.first(SOURCE, "sample_floor")),
        Computed("{}", float(table.loc[best, "heldout_loss"]), lambda r: float(grid_table(r)["heldout_loss"].min()))]
    template = ("The source's entropy rate is H = {} nats per word (the true chain scores {} on the held-out words); "
                f"the best point reached {{}} (d_model {table.loc[best, 'width']:.0f}, {table.loc[best, 'tokens']:,.0f} tokens)")
    if records.has("E", FIT[count]):
        e, h = records.first(FIT[count], "E"), records.first(SOURCE, "entropy_rate")
        parts += [Computed("{}", e, fit_value(count, "E")),
                  Compared(e < h, "below H", "not below H", fit_value(count, "E"), lambda r: r.first(SOURCE, "entropy_rate"))]
        template += ", and the fit puts the floor E at {}, {}"
        if e < h:  # held by the Compared claim above: no model scores below H, so the limit is the fit's artefact
            below = records.first(SOURCE, "sample_floor") < h  # a finite held-out sample: the true chain may dip under H
            template += (" — no model's expected loss is below H" + (
                " (on a finite held-out sample a score can land a little under it, as the true chain's does here)"
                if below else "") + ", so this E is the law's extrapolation from few, small models, not a loss any "
                "model reaches")
    return say(template, *parts)


def fit_quality_sentence(records: Records, count: str) -> Sentence | None:
    arm = FIT[count]
    if not records.has("rms_log_residual", arm):
        return None
    rms, points = records.first(arm, "rms_log_residual"), records.first(arm, "points")
    return say("The fit misses the {} measured points by {} in log L (root mean square; Huber loss, δ = 10⁻³, as Chinchilla)",
               Computed("{}", points, fit_value(count, "points"), shown=f"{points:.0f}"),
               Computed("{}", rms, fit_value(count, "rms_log_residual"), shown=fmt(rms)))
