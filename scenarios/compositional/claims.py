"""Compositional generalization, said: each split's exact match on its test and training commands,
where the add-jump arm fails (by construction, by target action), and what the extra jump
compositions and the length split do, every number re-read from the records."""
from scenarios.claims import Computed, Lower
from scenarios.compositional.figures import ACTIONS, ADD_JUMP, CONSTRUCTIONS, JUMP_PLUS, LENGTH, RANDOM, last_values
from scenarios.explanation import Sentence, say
from scenarios.recorded import percent, recorded
from scenarios.records import Records

WHAT = {RANDOM: "held-out commands (a random share)", ADD_JUMP: "commands that use jump in a composition",
        JUMP_PLUS: "remaining commands that use jump in a composition", LENGTH: "commands with longer meanings"}


def final_metric(records: Records, arm: str) -> str:
    """All test commands once the arm has finished, its seeded sample of them before."""
    return "test_exact_all" if records.has("test_exact_all", arm) else "test_exact"


def split_sentence(records: Records, arm: str) -> Sentence | None:
    """`random split: 96.9% of its 162 held-out commands exactly right after step 199 (its training commands: 100.0%)`."""
    metric = final_metric(records, arm)
    test = recorded(records, arm, metric, shown=percent)
    if test is None:
        return None
    step = records.last_step(arm, metric)
    train = recorded(records, arm, "train_exact", step, shown=percent)
    if metric == "test_exact_all":
        count = recorded(records, arm, "n_test", step, shown=lambda v: f"{v:,.0f}")
        return say(f"{arm}: {{}} of its {{}} {WHAT[arm]} exactly right after step {step} (its training commands: {{}})",
                   test, count, train)
    return say(f"{arm}, so far: {{}} of a sample of its {WHAT[arm]} exactly right at step {step} "
               "(training commands: {})", test, train)


def gap_sentence(records: Records) -> Sentence | None:
    """The random split's exact match minus the add-jump split's, in percentage points."""
    a, b = final_metric(records, RANDOM), final_metric(records, ADD_JUMP)
    if not (records.has(a, RANDOM) and records.has(b, ADD_JUMP)):
        return None
    gap = 100 * (records.last(RANDOM, a) - records.last(ADD_JUMP, b))
    claim = Computed("{}", gap, lambda r: 100 * (r.last(RANDOM, a) - r.last(ADD_JUMP, b)), shown=f"{gap:.1f}")
    return say("The same model, the same steps: the random split's test commands score {} percentage points above "
               "the add-jump split's", claim)


def breakdown_sentence(records: Records, arm: str, prefix: str, names: tuple[str, ...], what: str,
                       quote: bool = False) -> Sentence | None:
    """`quote`: the names in quotes (a construction named "and" reads as a word of the sentence otherwise)."""
    values = last_values(records, arm, prefix, names)
    if not values:
        return None
    step = records.last_step(arm, "test_exact")
    label = "'{}' {{}}" if quote else "{} {{}}"
    claims = [Computed(label.format(name), value, lambda r, m=f"{prefix}{name}": r.at(arm, m, step), shown=percent(value))
              for name, value in values.items()]
    return say(f"{arm}, {what} at step {step}: " + ", ".join(["{}"] * len(claims)), *claims)


def extra_sentence(records: Records, jump_examples: int) -> Sentence | None:
    """What moving `jump_examples` jump compositions into training does to the rest of them."""
    a, b = final_metric(records, JUMP_PLUS), final_metric(records, ADD_JUMP)
    plus, alone = recorded(records, JUMP_PLUS, a, shown=percent), recorded(records, ADD_JUMP, b, shown=percent)
    if plus is None or alone is None:
        return None
    if plus.value == alone.value:
        return say(f"With {jump_examples} jump compositions moved into training, the rest score {{}}, as without them ({{}})",
                   plus, alone)
    lower = (Lower(JUMP_PLUS, ADD_JUMP, a, words="below") if a == b and plus.value < alone.value else
             Lower(ADD_JUMP, JUMP_PLUS, a, words="above") if a == b else None)
    if lower is None:
        return say(f"With {jump_examples} jump compositions moved into training, the rest score {{}} (without them: {{}})",
                   plus, alone)
    return say(f"With {jump_examples} jump compositions moved into training, the rest score {{}}, {{}} the {{}} "
               "without them", plus, lower, alone)


def length_sentence(records: Records, max_train_actions: int) -> Sentence | None:
    metric = final_metric(records, LENGTH)
    test = recorded(records, LENGTH, metric, shown=percent)
    if test is None:
        return None
    return say(f"{LENGTH}: trained on meanings of at most {max_train_actions} actions, {{}} of the longer ones exactly right",
               test)


def details(records: Records, jump_examples: int, max_train_actions: int) -> list[Sentence]:
    found = [gap_sentence(records),
             breakdown_sentence(records, ADD_JUMP, "test_exact/", CONSTRUCTIONS, "exact match by construction",
                                quote=True),
             breakdown_sentence(records, ADD_JUMP, "test_token/", ACTIONS,
                                "each target token predicted right when fed the true prefix"),
             extra_sentence(records, jump_examples), length_sentence(records, max_train_actions)]
    return [s for s in found if s is not None]
