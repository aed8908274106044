"""The words around a run: the status line's step count, a log slider's labels."""


def test_the_status_line_counts_steps_per_arm() -> None:
    """A teacher trained 400 steps and two students 300: "400 steps for “teacher”, 300 for the other arms",
    not "after 400 steps"; three arms at three counts: each named; arms a Stop caught at five different
    steps: "up to 400 steps"."""
    import pandas as pd

    from explorer.runs.handle import Snapshot
    from explorer.view.live import status_line
    rows = [("teacher", s, "loss", 1.0) for s in range(400)] + [(f"T={t}", s, "loss", 1.0) for t in (1, 4)
                                                                 for s in range(300)]
    uneven = pd.DataFrame(rows, columns=["arm", "step", "metric", "value"])
    assert status_line(Snapshot(uneven, "finished", 1.0, [], None, 2.0, "abc")).startswith(
        "Finished after 400 steps for “teacher”, 300 for the other arms, in 2.0 s")
    three = pd.DataFrame([(arm, s, "loss", 1.0) for arm, n in (("gradient", 1), ("pretrain", 300), ("finetune", 200))
                          for s in range(n)], columns=["arm", "step", "metric", "value"])
    assert status_line(Snapshot(three, "finished", 1.0, [], None, 2.0, "abc")).startswith(
        "Finished after 1 step for “gradient”, 300 for “pretrain”, 200 for “finetune”, in 2.0 s")
    caught = pd.DataFrame([(f"arm {n}", s, "loss", 1.0) for n in (100, 200, 300, 350, 400) for s in range(n)],
                          columns=["arm", "step", "metric", "value"])
    assert status_line(Snapshot(caught, "stopped", 1.0, [], None, 2.0, "abc")).startswith(
        "Stopped — partial result after up to 400 steps in 2.0 s")
    even = uneven[uneven["step"] < 10]
    assert "after 10 steps in" in status_line(Snapshot(even, "stopped", 0.1, [], None, 0.5, None))


def test_the_status_line_counts_only_training_steps() -> None:
    """An arm indexed by something else (N up to 1024, d_k) is no count of steps; a page that only
    measures (flash-attention) gives no count at all."""
    import pandas as pd

    from explorer.runs.handle import RunHandle, Snapshot
    from explorer.view.status_words import status_line, steps_per_arm
    from scenarios import get_scenario
    rows = [("1 head", s, "loss", 1.0) for s in range(20)] + [("random q, k", n, "score_std", 1.0) for n in range(513)]
    mixed = pd.DataFrame(rows, columns=["arm", "step", "metric", "value"])
    assert steps_per_arm(mixed) == "20 steps", steps_per_arm(mixed)
    flash = get_scenario("flash-attention")
    result = flash.run(flash.tiny)
    handle = RunHandle(flash, flash.validate(flash.tiny))
    line = status_line(Snapshot(result.frame, "finished", 1.0, [], None, 1.5, "abc"), handle)
    assert line == "Finished in 1.5 s · stored as run abc", (line, result.frame.groupby("arm")["step"].max().to_dict())
    general = get_scenario("generalization")  # its final/ rows sit at step `steps`: not a training step
    config = general.validate(general.tiny)
    assert steps_per_arm(general.run(general.tiny).frame, general.counted) == f"{config.steps} steps"


def test_a_running_line_gives_the_step_of_the_arm_training_now() -> None:
    """rlvr-grpo's warm start trains 30 steps, then each GRPO arm counts its own updates: while the
    second arm is at update 4 the line says step 4, not the warm start's 30."""
    from explorer.runs.handle import RunHandle
    from explorer.view.status_words import status_line
    from scenarios import get_scenario
    scenario = get_scenario("rlvr-grpo")
    handle = RunHandle(scenario, scenario.validate({}))
    handle.receive({"kind": "rows", "rows": [("warm start", s, "loss", 1.0) for s in range(30)]})
    handle.receive({"kind": "rows", "rows": [("GRPO", s, "loss", 1.0) for s in range(4)]})
    line = status_line(handle.snapshot(with_frame=False), handle)
    assert "(step 4 of “GRPO”," in line, f"the count started again: the line names whose it is: {line}"
    assert handle.snapshot(with_frame=False).steps == 30, "the furthest step stays what a first plot waits on"


def test_a_running_line_names_no_arm_while_one_arm_trains_or_arms_train_together() -> None:
    from explorer.runs.handle import RunHandle
    from explorer.view.status_words import status_line
    from scenarios import get_scenario
    scenario = get_scenario("dpo-beta")
    handle = RunHandle(scenario, scenario.validate({}))
    handle.receive({"kind": "rows", "rows": [("tabular β=0.1", s, "loss", 1.0) for s in range(3)]})
    alone = status_line(handle.snapshot(with_frame=False), handle)
    handle.receive({"kind": "rows", "rows": [(arm, 3, "loss", 1.0) for arm in ("tabular β=0.1", "tabular β=1")]})
    together = status_line(handle.snapshot(with_frame=False), handle)
    assert "(step 3," in alone and "(step 4," in together and "“" not in alone + together, (alone, together)


def test_a_log_sliders_power_of_two_reads_as_one() -> None:
    """reinforce's step sizes are powers of two: 2⁻¹³ ≈ 0.000122, not 0.00012207; decimals stay as written."""
    from explorer.page.controls import log_label
    assert log_label(2 ** -13) == "2⁻¹³ ≈ 0.000122"
    assert log_label(2 ** -6) == "2⁻⁶ ≈ 0.0156"
    assert [log_label(v) for v in (0.001, 3e-4, 0.5, 1e-5, 0.0625)] == ["0.001", "0.0003", "0.5", "1e-05", "0.0625"]
