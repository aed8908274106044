"""Grokking, said: when each arm fitted its training pairs and when (if ever) its held-out accuracy
followed, what the embedding's spectrum holds, what survives a projection onto the key frequencies,
and the weight norm; every number re-read from the records."""
from scenarios.claims import Claim, Computed, fmt, listed_format
from scenarios.explanation import Sentence, say
from scenarios.records import Records

GROKKED = 0.95  # held-out accuracy that counts as "generalized"
LOW_LOSS = 0.1  # nats: a loss this low is a fitted one


def percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def first_step(records: Records, arm: str, metric: str, *, at_least: float | None = None,
               at_most: float | None = None) -> int | None:
    """The first logged step where `metric` is ≥ `at_least` (or ≤ `at_most`); None if it never is."""
    series = records.series(arm, metric)
    hit = series[series >= at_least] if at_least is not None else series[series <= at_most]
    return int(hit.index[0]) if len(hit) else None


def step_claim(text: str, records: Records, arm: str, metric: str, **bound: float) -> Computed:
    step = first_step(records, arm, metric, **bound)
    return Computed(text, float(step), lambda r: first_step(r, arm, metric, **bound), shown=str(step))


def last_claim(text: str, records: Records, arm: str, metric: str, shown=percent) -> Computed:
    value = records.last(arm, metric)
    return Computed(text, value, lambda r: r.last(arm, metric), shown=shown(value))


def grokking_sentence(records: Records, arm: str, p: int) -> Sentence | None:
    """`arm: training accuracy first reached 100% at step 45; held-out accuracy first reached 95% at step
    750, 705 steps later` — or what the held-out accuracy did instead."""
    if not records.has("test_acc", arm):
        return None
    fitted, grokked = first_step(records, arm, "train_acc", at_least=1.0), first_step(records, arm, "test_acc", at_least=GROKKED)
    last_step = records.last_step(arm, "test_acc")
    parts: list[Claim | str] = [arm]
    if fitted is None:
        template = "{}: training accuracy has not reached 100% by step {} ({})"
        parts += [str(last_step), last_claim("it is {}", records, arm, "train_acc")]
    else:
        template = "{}: training accuracy first reached 100% at step {}"
        parts.append(step_claim("{}", records, arm, "train_acc", at_least=1.0))
    if grokked is None:
        template += "; held-out accuracy has not reached {} by step {}: it is {} (chance 1/p = {})"
        parts += [percent(GROKKED), str(last_step), last_claim("{}", records, arm, "test_acc"), percent(1 / p)]
    else:
        template += "; held-out accuracy first reached {} at step {}"
        parts += [percent(GROKKED), step_claim("{}", records, arm, "test_acc", at_least=GROKKED)]
        if fitted is not None:
            template += ", {}"
            gap = grokked - fitted  # negative when the held-out pairs were right before every training pair was
            parts.append(Computed("{} " + ("step " if abs(gap) == 1 else "steps ") + ("later" if gap >= 0 else "earlier"), float(gap),
                                  lambda r: _gap(r, arm), shown=f"{abs(gap)}"))
    return say(template, *parts)


def _gap(records: Records, arm: str) -> float | None:
    fitted, grokked = first_step(records, arm, "train_acc", at_least=1.0), first_step(records, arm, "test_acc", at_least=GROKKED)
    return None if fitted is None or grokked is None else float(grokked - fitted)


def spectrum_sentence(records: Records, arm: str, key_count: int, p: int) -> Sentence | None:
    """The key frequencies of `arm`'s embedding at the last step and their share of its squared norm (the constant
    component aside, as the spectrum chart's bars), beside an even spread."""
    ranks = [f"key/rank_{r:02d}" for r in range(key_count)]
    if not all(records.has(name, arm) for name in ranks):
        return None
    frequencies = [last_claim("{}", records, arm, name, shown=lambda v: str(int(v))) for name in ranks]
    share = last_claim("{}", records, arm, "key_share")
    even = key_count / ((p - 1) // 2)
    return say("{}'s embedding at the last step: its {} largest frequencies (k = " + ", ".join(["{}"] * key_count) +
               ") carry {} of its squared norm, where an even spread over the {} frequencies would give {}",
               arm, key_count, *frequencies, share, (p - 1) // 2, percent(even))


def distilled_sentence(records: Records, arm: str, key_count: int) -> Sentence | None:
    """What survives when the embedding keeps only its key frequencies, the next ones, or loses the key ones."""
    if not records.has("restricted_acc", arm):
        return None
    return say("{}: with only those {} frequencies kept in the embedding (and the constant), held-out accuracy is {} "
               "(the full network's: {}); with the next {} kept instead, {}; with the key ones removed, {} of the "
               "training pairs are right",
               arm, key_count, last_claim("{}", records, arm, "restricted_acc"), last_claim("{}", records, arm, "test_acc"),
               key_count, last_claim("{}", records, arm, "control_acc"), last_claim("{}", records, arm, "excluded_acc"))


def progress_sentence(records: Records, arm: str) -> Sentence | None:
    """When the restricted loss and the full held-out loss first fell below LOW_LOSS, and the excluded loss at the end."""
    if not records.has("restricted_loss", arm):
        return None
    parts: list = [arm]
    template = "{}: "
    for metric, words in (("restricted_loss", "the restricted loss (held-out)"), ("test_loss", "the held-out loss")):
        template += words + " {}, "
        if first_step(records, arm, metric, at_most=LOW_LOSS) is None:
            parts.append(last_claim(f"stayed above {fmt(LOW_LOSS)} nats (it ends at {{}})", records, arm, metric, shown=fmt))
        else:
            parts.append(step_claim(f"first fell to {fmt(LOW_LOSS)} nats or below at step {{}}", records, arm, metric,
                                    at_most=LOW_LOSS))
    template += "and the excluded loss (training pairs, key frequencies removed) ends at {} nats, the training loss at {}"
    parts += [last_claim("{}", records, arm, "excluded_loss", shown=fmt), last_claim("{}", records, arm, "loss", shown=fmt)]
    return say(template, *parts)


def norm_sentence(records: Records, arms: list[str]) -> Sentence | None:
    """Each arm's weight norm at the first and the last logged step."""
    arms = [arm for arm in arms if records.has("weight_norm", arm)]
    if not arms:
        return None
    parts: list = []
    for arm in arms:
        first = records.first(arm, "weight_norm")
        written = listed_format([first, records.last(arm, "weight_norm")])  # "from 10.4 to 96.0", not "… to 96"
        parts += [arm, Computed("{}", first, lambda r, a=arm: r.first(a, "weight_norm"), shown=written(first)),
                  last_claim("{}", records, arm, "weight_norm", shown=written)]
    return say("Weight norm ‖θ‖₂: " + "; ".join(["{} from {} to {}"] * len(arms)), *parts)
