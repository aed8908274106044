"""The order a rank streams its records in: the page draws what arrives, so the measured step's
memory is sent as soon as it is measured, not after the arm's last step."""
from engines.distributed.launch import launch
from tests.descendants import ranks_alive, tag_environment

JOB = {"strategies": ["ddp"], "seed": 0, "vocab": 64, "hidden": 16, "layers": 1, "heads": 4, "batch": 2, "seq_len": 8,
       "steps": 3, "lr": 1e-3, "optimizer": "adam", "device": "cpu"}


def kind(record: dict) -> str:
    metrics = record["metrics"]
    if "loss" in metrics:
        return "loss"
    if "exact/parameters" in metrics:
        return "memory"
    return "collectives" if "collectives/all-reduce" in metrics else "?"


def test_the_measured_step_is_streamed_before_the_arms_next_step(monkeypatch) -> None:
    """Step 1 is measured: its memory follows its loss at once, before step 2's loss; the collectives
    counted in one step more come after the arm's last loss, as a second record of step 1."""
    tag = tag_environment(monkeypatch)
    records = [r for r in launch(JOB, 1) if r is not None]
    assert [(r["step"], kind(r)) for r in records] == [(0, "loss"), (1, "loss"), (1, "memory"), (2, "loss"),
                                                      (1, "collectives")]
    memory, collectives = records[2]["metrics"], records[4]["metrics"]
    assert memory["exact/parameters"] > 0 and memory["n_params"] > 0 and collectives["collectives/all-reduce"] > 0
    assert not set(memory) & set(collectives)  # nothing sent twice
    assert ranks_alive(tag) == []
