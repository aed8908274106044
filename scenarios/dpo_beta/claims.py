"""DPO β, told: the claims its explanation is built from — the β trade (more reward, more KL),
each end of the sweep against π*, the loss at initialization, the margins against the pairs'
true gap, and chosen and rejected log-probabilities that both fall. Each number is re-read
from the records when checked."""
from collections.abc import Callable

from scenarios.claims import Computed, DivergedAt
from scenarios.dpo_beta.figures import LOG2, arm_of, beta_label, optimum_arm
from scenarios.explanation import Explanation, Sentence, join, say
from scenarios.records import Records
from scenarios.words import count as counted_noun

Compute = Callable[[Records], float | None]


def reading(arm: str, metric: str, step: int | None) -> Compute:
    """records -> the arm's metric at `step` (None: its first recorded value)."""
    return (lambda r: r.first(arm, metric)) if step is None else (lambda r: r.at(arm, metric, step))


def number(records: Records, arm: str, metric: str, step: int | None = None, digits: str = "") -> Computed | None:
    value = reading(arm, metric, step)(records)
    return None if value is None else Computed("{}", value, reading(arm, metric, step),
                                               shown=format(value, digits) if digits else "")


def finished(records: Records, level: str, betas: list[float], last: int) -> list[tuple[float, str]]:
    """(β, arm) of the level's arms that reached their last step, smallest β first."""
    return [(b, arm_of(level, b)) for b in sorted(betas) if records.at(arm_of(level, b), "kl", last) is not None]


def trade_count(arms: list[str], last: int) -> Compute:
    """records -> at how many steps down the sweep (a β to the next smaller one) both E[r] and KL rose."""
    def compute(records: Records) -> float | None:
        ends = [(records.at(a, "true_reward", last), records.at(a, "kl", last)) for a in arms]
        if any(None in end for end in ends):
            return None
        return float(sum(r_small > r_big and kl_small > kl_big
                         for (r_small, kl_small), (r_big, kl_big) in zip(ends, ends[1:])))
    return compute


def extreme(arms: list[str], metric: str, last: int, pick: Callable) -> Compute:
    def compute(records: Records) -> float | None:
        values = [records.at(a, metric, last) for a in arms]
        return None if None in values else pick(values)
    return compute


def trade(records: Records, level: str, done: list[tuple[float, str]], last: int) -> Sentence:
    """The takeaway for one level: the β trade, as far as the run shows it, and the sweep's ends."""
    ends = [done[0], done[-1]] if len(done) > 1 else done[:1]
    points = [claim for _, arm in ends for claim in (number(records, arm, "true_reward", last),
                                                     number(records, arm, "kl", last))]
    words = ", ".join(f"{beta_label(b)}: E[r] {{}} at KL {{}} nats" for b, _ in ends)
    if len(done) == 1:
        return say(f"{level.capitalize()}: {words}", *points)
    steps, arms = len(done) - 1, [arm for _, arm in done]
    count = trade_count(arms, last)(records)
    span = f"{counted_noun(steps, 'step')} down the sweep"
    text = ("smaller β, more reward and more KL" + (" at each of the {} steps down the sweep" if steps > 1 else "")
            if count == steps else "reward and KL both rose at {} of " + span)
    return say(f"{level.capitalize()}: {{}} — {words}",
               Computed(text, count, trade_count(arms, last), shown=f"{count:.0f}"), *points)


def against_optimum(records: Records, level: str, done: list[tuple[float, str]], last: int) -> Sentence:
    ends = [done[0], done[-1]] if len(done) > 1 else done[:1]
    claims = [c for _, arm in ends for c in (number(records, arm, "true_reward", last),
                                             number(records, arm, "optimum/true_reward", 0))]
    words = f"{level.capitalize()} against π* ∝ π_ref·exp(r/β): " + ", ".join(
        f"{beta_label(b)} ends at E[r] {{}} (π*: {{}})" for b, _ in ends)
    arms = [arm for _, arm in done]
    tv = extreme(arms, "tv_to_optimum", last, max)(records)
    if tv is None:
        return say(words + ".", *claims)
    return say(words + "; total variation to π* at most {} across β.", *claims,
               Computed("{}", tv, extreme(arms, "tv_to_optimum", last, max)))


def starts_at_log2(records: Records, arms: list[str]) -> Sentence | None:
    """Every arm's first loss, when they all agree: log 2 exactly at π = π_ref."""
    def common(r: Records) -> float | None:
        firsts = {r.at(arm, "loss", 0) for arm in arms}
        return firsts.pop() if len(firsts) == 1 and None not in firsts else None
    value = common(records)
    if not arms or value is None:
        return None
    exact = value == LOG2
    text = ("every β arm starts at loss {} = log 2 exactly (π = π_ref: every implicit reward is 0)" if exact else
            f"every β arm starts at loss {{}} (log 2 = {LOG2:.6f})")
    return say("At step 0 {}.", Computed(text, value, common, rel=0.0 if exact else 1e-9, shown=f"{value:.6f}"))


def margins(records: Records, done: dict[str, list[tuple[float, str]]], lasts: dict[str, int]) -> Sentence | None:
    """Each level's final margins across β, beside the pairs' mean true reward gap."""
    parts, claims, unwritten = [], [], []  # unwritten: checked, not shown (the min, when it reads as the max)
    for level, arms in done.items():
        last, names = lasts[level], [arm for _, arm in arms]
        gap = number(records, optimum_arm(level), "pairs/true_margin")
        if not names or gap is None:
            continue
        low, high = (Computed("{}", f(records), f) for f in (extreme(names, "rewards/margins", last, min),
                                                            extreme(names, "rewards/margins", last, max)))
        alike = len(names) > 1 and str(low) == str(high)
        parts.append(("{} at every β" if alike else "{}" if len(names) == 1 else "{}–{}")
                     + f" ({level}; the pairs' true gap r_w − r_l is {{}})")
        claims += ([high] if alike else [low] if len(names) == 1 else [low, high]) + [gap]
        unwritten += [low] if alike else []
    if not parts:
        return None
    return say("The implicit-reward margin (trl's rewards/margins) ends at " + " and ".join(parts) + ".",
               *claims, *unwritten)


def both_go_down(records: Records, done: dict[str, list[tuple[float, str]]],
                 lasts: dict[str, int]) -> Sentence | None:
    """The smallest β whose mean log π of chosen and of rejected both ended below where they began."""
    for level, arms in reversed(done.items()):  # the sequence level first: its mass can leave the dataset
        last = lasts[level]
        for beta, arm in arms:
            ends = {side: (records.first(arm, f"dataset/logps_{side}"), records.at(arm, f"dataset/logps_{side}", last))
                    for side in ("chosen", "rejected")}
            if any(None in pair or pair[1] >= pair[0] for pair in ends.values()):
                continue
            claims = [number(records, arm, f"dataset/logps_{side}", step, ".2f") for side in ends for step in (None, last)]
            mass = [number(records, arm, "dataset/policy_mass", step, ".0%") for step in (None, last)]
            words = (f"Both go down at {beta_label(beta)} ({level}): the mean log π of chosen {{}} → {{}} nats and of "
                     "rejected {} → {}")
            if None not in mass:
                return say(words + ", while π's mass on the dataset's completions goes {} → {}.", *claims, *mass)
            return say(words + ".", *claims)
    return None


def explanation(records: Records, levels: list[str], betas: list[float], last: dict[str, int]) -> Explanation:
    done = {level: finished(records, level, betas, last[level]) for level in levels}
    diverged = [say("{} {}.", arm, DivergedAt(arm, step)) for level in levels for arm in
                (arm_of(level, b) for b in betas) if (step := records.diverged_at(arm)) is not None]
    trades = [trade(records, level, arms, last[level]) for level, arms in done.items() if arms]
    if not trades and not diverged:
        return Explanation(waiting="Run to see where each β lands between π_ref and π*.")
    takeaway = join(*trades) if trades else diverged.pop(0)
    started = [arm_of(level, b) for level in levels for b in betas if records.at(arm_of(level, b), "loss", 0) is not None]
    details = diverged + [against_optimum(records, level, arms, last[level]) for level, arms in done.items() if arms]
    details += [s for s in (starts_at_log2(records, started), margins(records, done, last),
                            both_go_down(records, done, last)) if s is not None]
    return Explanation(takeaway, tuple(details[:5]))

