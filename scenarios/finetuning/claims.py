"""What the pretraining-then-fine-tuning page says, each number a claim its records prove (re-derived when checked)."""
from scenarios.claims import SUPERSCRIPT, Computed, listed_format, power_of_ten
from scenarios.explanation import Sentence, say
from scenarios.finetuning.figures import DOMAIN, LN2, PRE, SFT_ALL, SFT_RESPONSE, STARTS, classifier_arms, groups_of
from scenarios.recorded import percent, recorded
from scenarios.records import Records


def accuracy_at(records: Records, labels: int) -> list[Computed] | None:
    """Held-out accuracy of each start at `labels` labelled lines, or None while one is missing."""
    found = []
    for start in STARTS:
        arm = classifier_arms(records, start).get(labels)
        claim = recorded(records, arm, "heldout_accuracy", shown=percent) if arm else None
        if claim is None:
            return None
        found.append(claim)
    return found


def ulmfit_sentence(records: Records, chance: float) -> Sentence | None:
    counts = sorted(set.intersection(*(set(classifier_arms(records, s)) for s in STARTS)))
    parts = [(n, accuracy_at(records, n)) for n in (counts[0], counts[-1])] if counts else []
    parts = list(dict([(n, p) for n, p in parts if p is not None]).items())
    if not parts:
        return None
    names = ", ".join(STARTS.values())
    text = "; ".join(f"with {n} labelled lines {{}}, {{}} and {{}}" for n, _ in parts)
    return say(f"Held-out accuracy ({names}; chance {chance:.0%}): " + text + ".", *[c for _, p in parts for c in p])


def stage_change(records: Records, arm: str, metric: str) -> tuple[Computed, Computed] | None:
    series = records.series(arm, metric)
    if len(series) < 2:
        return None
    first, last = int(series.index[0]), int(series.index[-1])
    return recorded(records, arm, metric, first), recorded(records, arm, metric, last)


def stages_sentence(records: Records) -> Sentence | None:
    """Stage 1's prose loss at its first and last log, stage 2's domain and prose loss at its first and last.
    The shared loop logs before a step's update, so stage 1's last log is one update short of the model stage 2
    starts from (whose first log measures it): two numbers, close but not the same, and the words say which."""
    prose = stage_change(records, PRE, "prose_bpb")
    if prose is None:
        return None
    target, kept = stage_change(records, DOMAIN, "domain_bpb"), stage_change(records, DOMAIN, "prose_bpb")
    if target is None or kept is None:
        return say("Pretraining took the prose's held-out loss from {} to {} bits per byte.", *prose)
    return say("Pretraining took the prose's held-out loss from {} to {} bits per byte (at its last log, taken "
               "before its last update); LM fine-tuning on the unlabelled target domain took the domain's from {} to "
               "{}, and the prose's from {} (the pretrained LM after that last update) to {}.",
               *prose, *target, *kept)


def schedule_sentence(records: Records) -> Sentence | None:
    """ULMFiT's rate per layer group (each 2.6× the one below), and the steps its lowest and top groups
    first trained at."""
    arms = classifier_arms(records, "domain")
    arm = arms[min(arms)] if arms else None
    levels = groups_of(records, arm) if arm else []
    if len(levels) < 2 or records.last_step(arm, "heldout_accuracy") is None:
        return None
    first = int(records.series(arm, f"base_lr/{levels[0]}").index[0])
    rates = [recorded(records, arm, f"base_lr/{level}", first, shown=power_of_ten) for level in levels]
    low, top = f"base_lr/{levels[0]}", f"base_lr/{levels[-1]}"
    ratio = Computed("{}", rates[-1].value / rates[0].value, lambda r: r.at(arm, top, first) / r.at(arm, low, first),
                     shown=f"{rates[-1].value / rates[0].value:.4g}")
    started = [_first_trained(records, arm, level) for level in (levels[-1], levels[0])]
    slots = ", ".join(["{}"] * len(rates))
    text = (f"ULMFiT's classifier ({arm}): η_l from the embeddings up {slots}; top over embeddings {{}} "
            f"(2.6{str(len(levels) - 1).translate(SUPERSCRIPT)} = {2.6 ** (len(levels) - 1):.4g})")
    if None in started:
        return say(text + ".", *rates, ratio)
    return say(text + "; under the slanted triangle and gradual unfreezing the top group first stepped at logged step "
               "{}, the embeddings at {}.", *rates, ratio, *started)


def _first_trained(records: Records, arm: str, level: int) -> Computed | None:
    """The first logged step at which a group's rate was not 0 (it was unfrozen)."""
    def compute(r: Records) -> float | None:
        series = r.series(arm, f"group_lr/{level}")
        moving = series[series > 0]
        return float(moving.index[0]) if len(moving) else None
    value = compute(records)
    return None if value is None else Computed("{}", value, compute, shown=f"{value:.0f}")


def sft_sentence(records: Records) -> Sentence | None:
    series = records.series(SFT_RESPONSE, "instruction_accuracy")
    if len(series) < 2 or records.series(SFT_ALL, "instruction_accuracy").size < 2:
        return None
    before = recorded(records, SFT_RESPONSE, "instruction_accuracy", int(series.index[0]), shown=percent)
    after = [recorded(records, arm, "instruction_accuracy", shown=percent) for arm in (SFT_RESPONSE, SFT_ALL)]
    held = recorded(records, SFT_RESPONSE, "heldout_instructions", shown=lambda v: f"{v:,.0f}")
    return say("Held-out instructions ({} of them, inputs never trained on), exact match: {} before SFT; after, "
               "with the loss on the response only {}, with the loss on every token {}.", held, before, *after)


def prompt_sentence(records: Records) -> Sentence | None:
    """The held-out loss on response and prompt after each SFT, in bits per byte (recorded in nats: ÷ ln 2)."""
    computes = [lambda r, a=arm, m=metric: None if r.last(a, m) is None else r.last(a, m) / LN2
                for arm in (SFT_RESPONSE, SFT_ALL) for metric in ("response_nats", "prompt_nats")]
    values = [compute(records) for compute in computes]
    if None in values:
        return None
    shown = listed_format(values)
    claims = [Computed("{}", value, compute, shown=shown(value)) for value, compute in zip(values, computes)]
    return say("Held-out bits per byte after SFT, response then prompt: response-only loss {} and {}; every-token "
               "loss {} and {}.", *claims)


def forgetting_sentence(records: Records) -> Sentence | None:
    start = recorded(records, PRE, "prose_bpb")
    after = [recorded(records, arm, "prose_bpb") for arm in (SFT_RESPONSE, SFT_ALL)]
    if start is None or None in after:
        return None
    domain = recorded(records, DOMAIN, "prose_bpb")
    text = "The prose's held-out loss, {} bits per byte after pretraining, was {} after SFT on the response and {} after SFT on every token"
    if domain is None:
        return say(text + ".", start, *after)
    return say(text + "; {} after LM fine-tuning on the target domain.", start, *after, domain)

