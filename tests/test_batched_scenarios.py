"""Batched arms, asserted per scenario: the batched run's records, sentences and figures are the
sequential run's, at non-default settings; adding an arm changes no other arm's records.

Every batched scenario keeps its sequential arms as `phases(config, batched=False)`. All but
lora-rank agree bit for bit (their batched models round as the sequential ones do); lora-rank's
padded ranks add zero terms to B·(A x), whose sums then round differently, to float32 rounding.
"""
import pytest

from batched_runs import assert_same_run, batched_frame, by_key
from scenarios import get_scenario

EXACT, FLOAT32 = 0.0, 1e-5

SLOW = pytest.mark.slow  # a second setting of the same scenario: left out of the default run
CASES = [
    ("dpo-beta", {"level": "sequence", "betas": "0.1,1", "labels": "hard", "label_noise": 0.2,
                  "sequence_steps": 5, "sequence_lr": 0.05, "pairs": 64, "seed": 3}, EXACT),
    pytest.param("dpo-beta", {"level": "tabular", "betas": "0.02,0.05,0.1,0.2,0.5,1,2,5", "tabular_steps": 40,
                              "tabular_lr": 0.5, "responses": 5, "seed": 1}, EXACT, marks=SLOW),
    ("distillation-temperature", {"temperatures": "1,3,10,30", "t_squared": False, "alpha": 0.5, "lr": 0.5,
                                  "student_width": 8, "teacher_steps": 12, "teacher_width": 16, "student_steps": 12,
                                  "transfer_size": 60, "seed": 4}, EXACT),
    ("contrastive", {"temperatures": "0.02,0.1,1", "batch": 16, "embedding_dim": 2, "classes": 3, "steps": 12,
                     "lr": 0.01, "seed": 2}, EXACT),
    ("generalization", {"decay_kind": "L2 in the loss", "weight_decay": 0.05, "dropout": 0.3, "n": 60, "width": 8,
                        "steps": 14, "patience": 5, "sweep": "100,1000", "seed": 5}, EXACT),
    pytest.param("generalization", {"n": 50, "width": 8, "steps": 12, "patience": 5, "sweep": "50,200,1000,5000",
                                    "seed": 1}, EXACT, marks=SLOW),
    ("optimizers", {"lr": 0.025, "momentum": 0.5, "weight_decay": 0.5, "steps": 40, "net_steps": 10, "seed": 2}, EXACT),
    pytest.param("optimizers", {"surface": "rosenbrock", "lr": 1.5e-3, "adam_lr": 0.05, "steps": 30, "net_steps": 10,
                                "net_lr": 1.0, "seed": 1}, EXACT, marks=SLOW),
    ("lora-rank", {"alpha_rule": "rsLoRA alpha = 4", "ranks": "1,4,16,64", "target_layers": "fc1", "steps": 20, "seed": 2},
     FLOAT32),
    pytest.param("lora-rank", {"k": 2, "ranks": "1,2,4,8", "alpha_rule": "alpha = 8 fixed", "steps": 60, "seed": 7,
                               "lr": 0.01}, FLOAT32, marks=SLOW),
]

@pytest.mark.parametrize("scenario_id, config, tolerance", CASES, ids=lambda v: v if isinstance(v, str) else None)
def test_batched_arms_give_the_sequential_runs_records_sentences_and_figures(scenario_id: str, config: dict,
                                                                           tolerance: float) -> None:
    assert_same_run(scenario_id, config, tolerance)


SUBSETS = [
    ("dpo-beta", "betas", "0.1,1", "0.01,0.1,1,10", {"tabular_steps": 20, "sequence_steps": 5, "pairs": 64}),
    ("distillation-temperature", "temperatures", "1,20", "1,2,4,8,20", get_scenario("distillation-temperature").tiny),
    ("contrastive", "temperatures", "0.02,1", "0.02,0.1,1", {"steps": 10, "batch": 16}),
]


@pytest.mark.parametrize("scenario_id, field, few, more, base", SUBSETS, ids=lambda v: v if isinstance(v, str) else None)
def test_adding_arms_changes_no_other_arms_records(scenario_id: str, field: str, few: str, more: str, base: dict) -> None:
    """Every arm keeps its own numbers: the arms of the short sweep are bit for bit those of the long one."""
    short, long = (by_key(batched_frame(scenario_id, {**base, field: sweep})) for sweep in (few, more))
    shared = long.loc[short.index]
    assert short.equals(shared), f"{(short != shared).sum()} of {len(short)} records changed when arms were added"


def test_every_scenario_says_how_its_arms_train() -> None:
    """The batched scenarios say their arms train as one batched model; those whose arms differ in code
    say why they train as separate models (the page shows `arms_note` under the mechanism)."""
    batched = {case.values[0] if hasattr(case, "values") else case[0] for case in CASES}
    for scenario_id in batched:
        assert "one batched" in get_scenario(scenario_id).arms_note, scenario_id
    for scenario_id in ("vanishing-gradients", "dead-relu", "warmup", "mixed-precision"):
        assert "separate models" in get_scenario(scenario_id).arms_note, scenario_id
