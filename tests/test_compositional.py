"""Compositional generalization: the language's interpretation function, its splits, the training
targets, and the physics — near 100% on a random split, failure on "add jump" located at the JUMP token,
what a few jump compositions in training do, and the length split."""
import pytest

from engines.sequence import scan
from engines.sequence.compositional import targets_of
from engines.sequence.lm import IGNORE
from scenarios import get_scenario
from scenarios.base import ConfigError
from scenarios.compositional.figures import ADD_JUMP, JUMP_PLUS, LENGTH, RANDOM
from scenarios.compositional.language import shape
from scenarios.records import Records
from tests.sentence_checks import explained_and_holding
from tests.tiny_runs import tiny_frame

SCENARIO = get_scenario("compositional")


@pytest.mark.parametrize("command, actions", [
    ("jump", "JUMP"), ("turn left", "LTURN"), ("walk left", "LTURN WALK"), ("run opposite right", "RTURN RTURN RUN"),
    ("jump twice and walk left", "JUMP JUMP LTURN WALK"), ("look thrice after turn right", "RTURN LOOK LOOK LOOK"),
    ("walk around left", "LTURN WALK LTURN WALK LTURN WALK LTURN WALK"), ("turn around right twice", " ".join(["RTURN"] * 8)),
    ("turn opposite left thrice after jump", "JUMP " + " ".join(["LTURN"] * 6)),
])
def test_the_interpretation_function(command, actions) -> None:
    assert scan.meaning(command) == actions.split(), f"{command!r} → {scan.meaning(command)}"


def test_the_full_grammar_has_scans_20910_commands_each_with_its_own_text() -> None:
    full = scan.commands(opposite=True, around=True)
    assert len(full) == len(set(full)) == 20910, f"{len(full)} commands, {len(set(full))} distinct"
    assert max(len(scan.meaning(c)) for c in full) == 48, "SCAN's longest meaning is 48 actions"
    small = scan.commands(False, False, ("and",))
    assert len(small) == 42 + 42 ** 2, len(small)  # 14 verbs × 3 repetitions = 42 phrases
    assert max(len(scan.meaning(c)) for c in small) == 12


def test_add_jump_trains_jump_alone_and_tests_every_composition_with_it() -> None:
    commands = scan.commands()
    split = scan.add_jump_split(commands)
    with_jump = [c for c in split.train if "jump" in c.split()]
    assert with_jump == ["jump"], with_jump
    assert all("jump" in c.split() for c in split.test)
    assert sorted(split.train + split.test) == sorted(commands)
    plus = scan.add_jump_split(commands, 32, seed=3)
    moved = set(plus.train) - set(split.train)
    assert len(moved) == 32 and moved <= set(split.test) and not moved & set(plus.test), len(moved)


def test_random_and_length_splits_partition_the_language() -> None:
    commands = scan.commands()
    split = scan.random_split(commands, 0.2, seed=1)
    assert len(split.test) == round(0.2 * len(commands)) and not set(split.train) & set(split.test)
    length = scan.length_split(commands, 6)
    assert max(len(scan.meaning(c)) for c in length.train) == 6 < min(len(scan.meaning(c)) for c in length.test)
    assert len(length.train) + len(length.test) == len(commands)


@pytest.mark.parametrize("thrice, opposite, after", [(False, False, False), (True, False, False), (False, True, True),
                                                     (True, True, True)])
def test_the_torch_free_counts_match_the_generated_language(thrice, opposite, after) -> None:
    commands = scan.commands(opposite, False, ("and", "after") if after else ("and",), thrice)
    counted = shape(thrice, opposite, after)
    generated = (len(commands), sum("jump" in c.split() for c in commands), max(len(scan.meaning(c)) for c in commands),
                 scan.aligned(commands)[1], [len(scan.length_split(commands, m).test) for m in (2, 4, 7)])
    assert (counted.commands, counted.with_jump, counted.longest, counted.tokens,
            [counted.longer_than(m) for m in (2, 4, 7)]) == generated, generated


def test_the_loss_counts_the_actions_and_eos_only() -> None:
    ids, seps = scan.encode(["jump twice and walk left", "turn right"], 14)
    targets = targets_of(ids, seps)
    words = [[scan.VOCAB[t] for t in row if t != IGNORE] for row in targets.tolist()]
    assert words == [["JUMP", "JUMP", "LTURN", "WALK", scan.EOS], ["RTURN", scan.EOS]], words


@pytest.mark.parametrize("field, value", [("max_train_actions", 8), ("max_train_actions", 18), ("d_model", 40), ("test_share", 0.9),
                                          ("jump_examples", 0), ("steps", 10)])
def test_bad_input_is_refused_naming_the_field(field, value) -> None:
    with pytest.raises(ConfigError) as refused:
        SCENARIO.validate({field: value})
    assert field in str(refused.value), str(refused.value)


def run(**overrides) -> tuple[Records, dict]:
    frame, summary = SCENARIO.run(overrides)
    return Records(frame), summary


def claims_hold(overrides: dict) -> None:
    records, _ = run(**overrides)
    explanation = explained_and_holding(SCENARIO, overrides, records)
    construction = next(s.text for s in explanation.details if "exact match by construction" in s.text)
    assert "'bare' " in construction and "'and' " in construction, construction  # a construction's name is quoted
    for arm in (RANDOM, ADD_JUMP, JUMP_PLUS, LENGTH):
        assert arm in explanation.markdown(), explanation.markdown()


@pytest.mark.parametrize("overrides", [
    {"seed": 4, "steps": 50, "layers": 1, "eval_commands": 32, "jump_examples": 8, "max_train_actions": 3},
    {"seed": 5, "steps": 50, "layers": 1, "heads": 2, "eval_commands": 32, "thrice": True, "jump_examples": 128,
     "max_train_actions": 7}])
def test_every_claim_holds_off_the_defaults(overrides) -> None:
    claims_hold(overrides)


@pytest.mark.slow
def test_every_claim_holds_with_the_larger_language() -> None:
    claims_hold({"seed": 7, "steps": 120, "opposite": True, "after": True, "eval_commands": 64, "max_train_actions": 7,
                 "batch_size": 32, "lr": 3e-3})


@pytest.mark.slow
@pytest.mark.parametrize("overrides", [{}, {"seed": 1}, {"seed": 2}, {"seed": 2, "test_share": 0.3, "jump_examples": 64}])
def test_random_split_is_learned_and_add_jump_fails_at_the_jump_token(overrides) -> None:
    _, summary = run(**overrides)
    exact, tokens = summary["test_exact"], summary["actions"][ADD_JUMP]
    # measured 2026-12-05 at the defaults, seeds 0/1/2: random split 96.9/95.7/95.7% (97.5% with 30% held out, seed 2);
    # add jump 0.0% at each (its training commands 100%); fed the true prefix, JUMP 0.4/0.0/0.0%, the least of WALK,
    # RUN and LOOK 96.3/94.4/88.9%; + 32 jump compositions 85.7/74.0/73.3% (90.0% with 64); length split 0.0%
    assert exact[RANDOM] >= 0.93, f"{overrides}: random split {exact[RANDOM]:.3f} of its test commands"
    assert exact[ADD_JUMP] <= 0.05, f"{overrides}: add jump {exact[ADD_JUMP]:.3f}"
    assert summary["train_exact"][ADD_JUMP] >= 0.95, f"{overrides}: add jump's training commands {summary['train_exact']}"
    assert tokens["JUMP"] <= 0.1 and min(tokens[a] for a in ("WALK", "RUN", "LOOK")) >= 0.85, f"{overrides}: {tokens}"
    assert exact[JUMP_PLUS] >= exact[ADD_JUMP] + 0.3, f"{overrides}: with compositions {exact[JUMP_PLUS]:.3f}"
    assert exact[LENGTH] <= 0.2, f"{overrides}: length split {exact[LENGTH]:.3f}"


def test_add_jumps_line_shows_where_it_lies_on_the_length_splits() -> None:
    """Both sit at 0% exactly right and add jump (the result) was hidden under the length split: it is drawn first
    and widest, and every test line has its own markers; the bars' numbers are turned to stay in their own column."""
    from scenarios.compositional.figures import ARMS
    frame = tiny_frame("compositional")
    figures = SCENARIO.figures(frame, SCENARIO.validate(SCENARIO.tiny))
    tests = [trace for trace in figures["exact"].data if trace.showlegend is not False]
    assert tests[0].name == ADD_JUMP and tests[0].line.width > max(t.line.width for t in tests[1:]), \
        [(t.name, t.line.width) for t in tests]
    assert len({t.marker.symbol for t in tests}) == len(ARMS) and all("markers" in t.mode for t in tests), \
        [(t.name, t.mode, t.marker.symbol) for t in tests]
    labelled = [bar for bar in figures["actions"].data if bar.texttemplate]
    assert labelled and all(bar.textangle == -90 for bar in labelled), [(b.name, b.textangle) for b in labelled]
