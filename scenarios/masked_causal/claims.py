"""What the masked-vs-causal page says, each number a claim its records prove (re-derived when checked)."""
from engines.sequence.relational import COUNTRIES, vocabulary
from scenarios.claims import Computed
from scenarios.explanation import Sentence, say
from scenarios.masked_causal.figures import CAUSAL, EXACT, MASKED, RELATION_NAMES, SGNS, WORLD, spelled
from scenarios.recorded import percent, recorded
from scenarios.records import Records


def fill_sentence(records: Records) -> Sentence | None:
    """Each model's middle-token fill at its last log, against the source's own from both sides and from the left."""
    masked, causal = (recorded(records, arm, "fill/accuracy", shown=percent) for arm in (MASKED, CAUSAL))
    both, left = (recorded(records, EXACT, f"bayes/{side}_accuracy", shown=percent) for side in ("both", "left"))
    if None in (masked, causal, both, left):
        return None
    step = records.last_step(MASKED, "fill/accuracy")
    return say("A hidden middle word of held-out lines, filled after " + str(step + 1) + " steps of each: the masked "
               "(bidirectional) model {} right, the causal one {} (it reads only the words before); the source itself "
               "allows at best {} from both sides and {} from the left alone.", masked, causal, both, left)


def loss_sentence(records: Records, mask_rate: float) -> Sentence | None:
    next_token = recorded(records, CAUSAL, "heldout_nats")
    masked = recorded(records, MASKED, "heldout_masked_nats")
    rate = recorded(records, EXACT, "entropy_rate")
    fills = [recorded(records, arm, "fill/nats") for arm in (MASKED, CAUSAL)]
    floor = recorded(records, EXACT, "bayes/both_nats")
    if None in (next_token, masked, rate, floor) or None in fills:
        return None
    return say(f"Held-out loss: next-token {{}} nats per token (the entropy rate {{}} is its floor); masked-token {{}} "
               f"nats per masked token ({mask_rate:.0%} of the tokens chosen: 80% [MASK], 10% random, 10% kept). On the "
               "hidden middle word: masked {} nats, causal {}; the source given both sides, {}.",
               next_token, rate, masked, *fills, floor)


def analogy_sentence(records: Records) -> Sentence | None:
    total = recorded(records, SGNS, "analogy/accuracy", shown=percent)
    words_only = recorded(records, SGNS, "analogy/accuracy_words", shown=percent)
    parts = [recorded(records, SGNS, f"analogy/{key}", shown=percent, text=f"{name} {{}}")
             for key, name in RELATION_NAMES.items()]
    questions = records.first(WORLD, "questions")
    if None in (total, words_only, questions) or None in parts:
        return None
    return say(f"Analogies a : b :: c : ? ({questions:.0f} questions, the word nearest b − a + c): {{}} right with "
               "w + c ({}, {}, {}); {} with the word vectors w alone.", total, *parts, words_only)


def identity_sentence(records: Records, negatives: int, power: float) -> Sentence | None:
    """Levy & Goldberg's identity, read from the last log: correlation and mean gap on the frequent pairs."""
    r = recorded(records, SGNS, "identity/correlation")
    plain = recorded(records, SGNS, "identity/correlation_plain")
    gap = recorded(records, SGNS, "identity/mean_gap")
    count = records.first(WORLD, "frequent_pairs")
    if None in (r, plain, gap, count):
        return None
    return say(f"On the {count:.0f} frequent pairs (20 or more in the corpus), w·c against ln(#(w,c)/(#(w)·k·P_n(c))) "
               f"with k = {negatives} and P_n ∝ #(c)^{power:g}: correlation {{}}, mean gap {{}} nats; against plain "
               "PMI − ln k, correlation {}.", r, gap, plain)


ROLES = ("country", "capital", "people")


def relation(word: str, other: str, countries: int) -> str | None:
    """How `other` stands to `word` in the corpus's world: "its capital", "another capital", … (None: no such tie)."""
    roles = {name: (role, index) for index, entry in enumerate(COUNTRIES[:countries])
             for role, name in zip(ROLES, entry[:3])}
    if word not in roles or other not in roles:
        return None
    (role, index), (other_role, other_index) = roles[word], roles[other]
    if index == other_index:
        return "its " + other_role
    return {"country": "another country", "capital": "another capital", "people": "another nationality"}[role] \
        if role == other_role else None


def neighbour_sentence(records: Records, countries: int) -> Sentence | None:
    """The nearest word to each of the first probes (country, capital), named and re-read from the records."""
    words = vocabulary(countries)
    probes = sorted({int(m.split("/")[1]) for m in records.metrics(SGNS) if m.startswith("neighbour/")})[:4]
    if not probes:
        return None
    parts = []
    for probe in probes:
        metric = f"neighbour/{probe:03d}/1"
        value = records.last(SGNS, metric)
        word = spelled(words, value)
        kin = relation(words[probe], word, countries)
        nearest = Computed(f"{words[probe]} → {{}}", value, lambda r, m=metric: r.last(SGNS, m),
                           shown=f"{word} ({kin})" if kin else word)
        parts.append(nearest)
    return say("Nearest words (cosine of w + c): " + ", ".join(["{}"] * len(parts)) + ".", *parts)
