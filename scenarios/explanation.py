"""An explanation: the takeaway first, in one line, then details — sentences built from claims.

`say` puts claims' words into a sentence and keeps the claims for checking; `trajectory`
tells what happened to one arm's curve in claims that hold for any run.
"""
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scenarios.claims import AT_CHANCE, Above, AtChance, Claim, DivergedAt, Final, Low, Peak, StayedNear, fmt

if TYPE_CHECKING:
    from scenarios.records import Records


def trajectory(records: "Records", arm: str, metric: str = "loss", *, chance: float | None = None,
               chance_name: str = "chance", label: str = "", level: str = "chance") -> list[Claim]:
    """What happened to one arm's curve, in claims that hold for any run: it stayed at chance;
    or it blew up (peaked, then stayed above twice chance until a step, or to the end); fell
    to a low and diverged; or ended at a value (at chance, when it ended there). `level` names
    the chance value in the words ("the constant-output loss" where no output beats the mean)."""
    series = records.series(arm, metric)
    if series.empty:
        return []
    first_step, first = int(series.index[0]), float(series.iloc[0])
    last_step, last = int(series.index[-1]), float(series.iloc[-1])
    diverged = records.diverged_at(arm)
    if chance is not None and diverged is None:
        stayed = StayedNear(arm, metric, chance, first_step, last_step, f"{level} ({chance_name} = {fmt(chance)})")
        if stayed.holds(records):
            return [stayed]
    claims: list[Claim] = []
    peak_step, peak = int(series.idxmax()), float(series.max())
    if peak_step > first_step and peak > 2 * abs(first):  # a blow-up worth naming
        claims.append(Peak(arm, metric, peak_step, peak, label))
        if chance is not None and peak > 2 * chance:
            after = series[series.index > peak_step]
            below = after[after <= 2 * chance]
            claims.append(Above(arm, metric, 2 * chance, int(below.index[0]) if len(below) else None,
                                first=peak_step, name=f"twice {level}"))
    if diverged is not None:
        low_step, low = int(series.idxmin()), float(series.min())
        if low < 0.5 * first and low_step > first_step:
            claims.append(Low(arm, metric, low_step, low, label))
        return claims + [DivergedAt(arm, diverged)]
    if chance is not None and abs(last - chance) <= AT_CHANCE * abs(chance):
        return claims + [AtChance(arm, metric, last_step, last, chance, chance_name, label, level)]
    return claims + [Final(arm, metric, last_step, last, label)]


def told(claims: list[Claim]) -> str:
    """Claims of one trajectory as a phrase: 'peaked at 174 at step 12, then diverged at step 40'."""
    words = [str(claim) for claim in claims]
    if len(words) > 1:
        words[-1] = "then " + words[-1]
    return ", ".join(words)


@dataclass(frozen=True)
class Sentence:
    """A sentence of an explanation and the claims it rests on."""
    text: str
    claims: tuple[Claim, ...] = ()


def say(template: str, *parts: Any) -> Sentence:
    """`say("{} while {}", claim, [claim, claim])`: each part's words in the template (a list of
    claims reads as `told(list)`), the claims kept for checking. Other parts (an arm's name, a
    setting) are written as they are."""
    words: list[str] = []
    claims: list[Claim] = []
    for part in parts:
        if isinstance(part, Claim):
            words.append(str(part))
            claims.append(part)
        elif isinstance(part, (list, tuple)) and all(isinstance(p, Claim) for p in part):
            words.append(told(list(part)))
            claims += part
        else:
            words.append(str(part))
    return Sentence(template.format(*words), tuple(claims))


def join(*sentences: Sentence, sep: str = "; ") -> Sentence:
    """Several sentences as one (a takeaway that names every arm)."""
    return Sentence(sep.join(s.text for s in sentences), tuple(c for s in sentences for c in s.claims))


@dataclass(frozen=True)
class Explanation:
    """The takeaway first, in one line; details after. `waiting` when there is nothing to read yet."""
    takeaway: Sentence | None = None
    details: tuple[Sentence, ...] = ()
    waiting: str = ""

    def claims(self) -> list[Claim]:
        sentences = ([self.takeaway] if self.takeaway else []) + list(self.details)
        return [claim for sentence in sentences for claim in sentence.claims]

    def markdown(self) -> str:
        if self.takeaway is None:
            return self.waiting or "Run to see what this page is about."
        lines = [f"**{_literal_stars(self.takeaway.text)}**"]
        if self.details:
            lines.append("")
            lines += [f"- {_literal_stars(sentence.text)}" for sentence in self.details]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.markdown()

    def _repr_markdown_(self) -> str:
        """How a notebook shows it: rendered, math included."""
        return self.markdown()


def folded(markdown: str, shown: int) -> tuple[str, list[str]]:
    """A "what to look for" text cut after its `shown`-th detail: (the text up to there, the rest's bullets)."""
    lines = markdown.split("\n")
    bullets = [i for i, line in enumerate(lines) if line.startswith("- ")]
    if len(bullets) <= shown + 1:  # one more is shown, not folded away alone
        return markdown, []
    cut = bullets[shown]
    return "\n".join(lines[:cut]), lines[cut:]


def _literal_stars(text: str) -> str:
    """A lone `*` of a sentence (π*, the optimum) escaped: in the bold takeaway it would end the bold
    and open italics. `**` (a sentence's own bold) is left alone."""
    return re.sub(r"(?<![*\\])\*(?!\*)", r"\\*", text)
