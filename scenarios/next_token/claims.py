"""What the next-token page says, each number a claim its records prove (re-derived when checked)."""
from collections.abc import Callable

from scenarios.claims import Above, Computed, Low, fmt, listed_format, three_digits
from scenarios.explanation import Sentence, say
from scenarios.next_token.figures import (BI_P, BI_T, MODES, PROSE, PROSE_FACTS, SOURCE, SS, TEMPERATURE_PREFIX, TF,
                                          UNI_P, UNI_T, exposure_profile, line_length, quarter_median, sampled_floor,
                                          temperatures)
from scenarios.recorded import recorded
from scenarios.records import Records
from scenarios.words import noun


def derived(records: Records, text: str, compute: Callable[[Records], float | None],
            shown: Callable[[float], str] = fmt) -> Computed | None:
    value = compute(records)
    return None if value is None else Computed(text, value, compute, shown=shown(value))


def listed_together(records: Records, computes: list[Callable[[Records], float | None]],
                    texts: list[str] | None = None) -> list[Computed] | None:
    """Claims on numbers written side by side, in one shared format; None while one is missing."""
    values = [compute(records) for compute in computes]
    if None in values:
        return None
    shown = listed_format(values)
    texts = texts or ["{}"] * len(values)
    return [Computed(text, value, compute, shown=shown(value)) for text, value, compute in zip(texts, values, computes)]


def floor_sentence(records: Records) -> Sentence | None:
    """Held-out loss of the teacher-forced model against the exact floor and the counted baselines."""
    floor = records.first(SOURCE, "entropy_rate")
    final = recorded(records, TF, "heldout_nats")
    if floor is None or final is None:
        return None
    step = records.last_step(TF, "heldout_nats")
    rate = recorded(records, SOURCE, "entropy_rate", shown=three_digits)
    gap = derived(records, "{}", lambda r: (r.at(TF, "heldout_nats", step) or 0) - r.first(SOURCE, "entropy_rate"))
    above = Above(TF, "heldout_nats", floor, None, name="the floor")
    if above.holds(records):
        where = above
    else:
        series = records.series(TF, "heldout_nats")
        where = Low(TF, "heldout_nats", int(series.idxmin()), float(series.min()), "but its held-out loss")
    baselines = [recorded(records, arm, "heldout_nats") for arm in (BI_T, UNI_T)]
    if None in baselines:
        return say("Topic lines: held-out loss {} nats per token at step " + str(step) + ", {} above the exact "
                   "entropy rate {}; it {}.", final, gap, rate, where)
    return say("Topic lines: held-out loss {} nats per token at step " + str(step) + ", {} above the exact entropy "
               "rate {}; it {}; counting gives bigram {} and unigram {}.", final, gap, rate, where, *baselines)


def exposure_claims(records: Records, arm: str) -> list[Computed] | None:
    """Error on the first and last quarter of positions, true prefix then own samples, in one format."""
    return listed_together(records, [lambda r, m=mode, e=last: quarter_median(exposure_profile(r, arm, m), e)
                                     for mode in MODES for last in (False, True)])


def exposure_sentence(records: Records) -> Sentence | None:
    parts = exposure_claims(records, TF)
    if parts is None:
        return None
    positions = sorted(exposure_profile(records, TF, "teacher_forced"))
    return say(f"Probability put on tokens the source forbids (median over the first, then the last quarter of "
               f"positions {positions[0]}–{positions[-1]} of a line): fed the true line {{}} → {{}}; running on its own "
               "samples {} → {} (teacher forcing trained it on true prefixes only).", *parts)


def scheduled_sentence(records: Records) -> Sentence | None:
    parts = exposure_claims(records, SS)
    loss = recorded(records, SS, "heldout_nats")
    share = recorded(records, SS, "own_share")
    if parts is None or loss is None or share is None:
        return None
    return say("Scheduled sampling (own samples in up to {} of the inputs by its last step): held-out loss {} nats; "
               "error fed the true line {} → {}, on its own samples {} → {}.", share, loss, *parts)


def prose_sentence(records: Records) -> Sentence | None:
    size = recorded(records, PROSE_FACTS, "prose_bytes", shown=lambda v: f"{v:,.0f}")
    digest = recorded(records, PROSE_FACTS, "prose_hash48", shown=lambda v: f"{int(v):012x}")
    values = [recorded(records, PROSE, unit) for unit in ("heldout_bpb", "heldout_nats", "heldout_ppl")]
    per_byte = recorded(records, PROSE_FACTS, "tokens_per_byte")
    if None in (size, digest, per_byte) or None in values:
        return None
    baselines = [recorded(records, arm, "heldout_bpb") for arm in (BI_P, UNI_P)]
    tokens = noun(float(f"{records.last(PROSE_FACTS, 'tokens_per_byte'):.3g}"), "token")  # plain bytes: 1 token per byte
    text = ("Prose ({} bytes of standard-library docstrings, sha256 {}…): held-out {} bits per byte ({} nats per "
            f"token at {{}} {tokens} per byte, perplexity {{}})")
    if None in baselines:
        return say(text + ".", size, digest, *values[:2], per_byte, values[2])
    return say(text + "; counted bigram {}, unigram {} bits per byte.", size, digest, *values[:2], per_byte, values[2],
               *baselines)


def temperature_sentence(records: Records) -> Sentence | None:
    found = temperatures(records, TF)
    if not found:
        return None
    picks = [found[0], 1.0, found[-1]] if 1.0 in found else [found[0], found[-1]]
    texts = [f"{{}} at T={t:g}" for t in picks]
    entropy = listed_together(records, [lambda r, t=t: r.last(TF, f"{TEMPERATURE_PREFIX}{t:.2f}") for t in picks], texts)
    forbidden = listed_together(records, [lambda r, t=t: r.last(TF, f"sampling/forbidden/T_{t:.2f}") for t in picks], texts)
    if entropy is None or forbidden is None:
        return None
    slots = ", ".join(["{}"] * len(picks))
    text = (f"Sampling the same prompts: entropy of each draw {slots} nats per token; share of drawn tokens the "
            f"source forbids {slots}")
    drawn, rate = sampled_floor(records), recorded(records, SOURCE, "entropy_rate", shown=three_digits)
    if drawn is None or rate is None:
        return say(text + ".", *entropy, *forbidden)
    first, last, _ = drawn
    own = derived(records, "{}", lambda r: (sampled_floor(r) or (0, 0, None))[2], shown=three_digits)
    return say(text + f". The source's own entropy at the positions drawn ({first}–{last}) is {{}} nats per token; "
               f"the entropy rate H under the held-out loss, {{}}, averages all {line_length(records)} positions of a line.",
               *entropy, *forbidden, own, rate)
