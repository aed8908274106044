"""The instrumented loop: deterministic, divergence as a result, hooks cleaned up."""
import torch

from engines.data import TeacherTask
from engines.models import DeepMLP
from engines.probes import LayerProbe
from engines.training import Diverged, StepRecord, log_every_for, train
from scenarios import get_scenario


def run_loop(lr: float, steps: int = 30, seed: int = 0) -> list:
    model = DeepMLP(8, 16, 4, 2, activation="relu", init="he", seed=seed)
    probe = LayerProbe(list(model.linears), list(model.activations))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    try:
        return list(train(model, optimizer, TeacherTask(8, 2, seed).batches(32),
                          torch.nn.functional.cross_entropy, steps, probe=probe, log_every=5))
    finally:
        probe.close()


def test_same_config_gives_identical_records() -> None:
    """Deterministic on CPU: two runs of the same config agree to the last bit."""
    scenario = get_scenario("vanishing-gradients")
    config = {"depth": 4, "width": 16, "steps": 20, "contrast": "tanh + xavier"}
    first, second = scenario.run(config).frame, scenario.run(config).frame
    assert first.equals(second), "records differ between two runs of the same config"


def test_different_seeds_give_different_records() -> None:
    """...and the determinism is not a constant: the seed matters."""
    scenario = get_scenario("vanishing-gradients")
    a = scenario.run({"depth": 4, "steps": 10, "seed": 0}).frame
    b = scenario.run({"depth": 4, "steps": 10, "seed": 1}).frame
    assert not a["value"].equals(b["value"])


def test_logs_every_k_steps_and_the_last() -> None:
    records = run_loop(lr=0.1, steps=23)
    assert [r.step for r in records] == [0, 5, 10, 15, 20, 22]
    assert {"loss", "accuracy", "lr", "grad_norm/layer_01", "act_std/layer_04", "update_ratio/layer_02"} <= set(records[0].metrics)


def test_huge_learning_rate_ends_with_a_diverged_record() -> None:
    """Divergence is a result: a Diverged record naming the step, not an exception."""
    records = run_loop(lr=100.0, steps=50)
    assert isinstance(records[-1], Diverged), f"last record {records[-1]}"
    assert records[-1].message.startswith(f"diverged at step {records[-1].step}")
    assert all(isinstance(r, StepRecord) for r in records[:-1])


def test_diverged_arm_is_drawn_in_the_frame() -> None:
    """A diverged arm gets a 'diverged' row and the run's status says so."""
    result = get_scenario("vanishing-gradients").run(
        {"depth": 3, "activation": "relu", "init": "he", "optimizer": "sgd", "lr": 1.0, "steps": 200,
         "contrast": "none", "width": 256})
    diverged = result.frame[result.frame["metric"] == "diverged"]
    assert result.status == "diverged" and len(diverged) == 1, result.status
    assert result.events[0].message.startswith("diverged at step")


def test_log_every_keeps_curves_short() -> None:
    assert log_every_for(300) == 3 and log_every_for(100) == 1 and log_every_for(3000) == 30
