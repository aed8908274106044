"""The instrumented loop: deterministic, divergence as a result, hooks cleaned up."""
import torch

from engines.loop.probes import LayerProbe
from engines.loop.training import Diverged, StepRecord, log_every_for, supervised, train
from engines.supervised.data import TeacherTask
from engines.supervised.models import DeepMLP
from scenarios import get_scenario


def run_loop(lr: float, steps: int = 30, seed: int = 0) -> list:
    model = DeepMLP(8, 16, 4, 2, activation="relu", init="he", seed=seed)
    probe = LayerProbe(list(model.linears), list(model.activations))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    try:
        items = train(model, optimizer, TeacherTask(8, 2, seed).batches(32),
                      supervised(model, torch.nn.functional.cross_entropy), steps, probe=probe, log_every=5)
        return [item for item in items if item is not None]
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


def test_the_loop_yields_once_per_step_so_stop_is_checked_every_step() -> None:
    """Between logged records the loop yields None after every step: a consumer sees each step."""
    model = DeepMLP(8, 16, 2, 2, seed=0)
    items = list(train(model, torch.optim.SGD(model.parameters(), lr=0.1), TeacherTask(8, 2, 0).batches(16),
                       supervised(model, torch.nn.functional.cross_entropy), 10, log_every=4))
    assert len(items) == 10 and [i for i, item in enumerate(items) if item is not None] == [0, 4, 8, 9]


def test_on_log_sees_this_steps_gradients_before_the_update() -> None:
    """The hook runs after backward and before the optimizer step: the weights it sees are the
    ones the step's forward pass used, and the gradient is that step's."""
    model = DeepMLP(8, 16, 2, 2, seed=0)
    weight = model.head.weight
    seen = {}

    def on_log(step: int) -> dict:
        seen[step] = (weight.detach().clone(), weight.grad.detach().clone())
        return {"head_grad_norm": weight.grad.norm()}

    before = weight.detach().clone()
    records = [r for r in train(model, torch.optim.SGD(model.parameters(), lr=0.1), TeacherTask(8, 2, 0).batches(16),
                                supervised(model, torch.nn.functional.cross_entropy), 3, log_every=1, on_log=on_log)
               if r is not None]
    assert torch.equal(seen[0][0], before), "on_log ran after the update"
    assert abs(records[0].metrics["head_grad_norm"] - seen[0][1].norm().item()) < 1e-6


def test_window_averages_the_objective_metrics_between_logs() -> None:
    """window=True logs each objective metric as its mean over the steps since the last log."""
    counter = torch.zeros(1, requires_grad=True)
    steps = iter(range(100))

    def objective(batch, logging):
        value = float(next(steps))
        return (counter * 0).sum() + value, {"step_value": torch.tensor(value)}

    records = [r for r in train(None, torch.optim.SGD([counter], lr=0.1), iter(lambda: None, 1), objective, 6,
                                log_every=3, window=True) if r is not None]
    assert [r.metrics["step_value"] for r in records] == [0.0, 2.0, 4.5], [r.metrics for r in records]


def test_importing_the_loop_changes_no_thread_count() -> None:
    """Importing engines.loop.training leaves torch's thread count to whoever trains."""
    import subprocess
    import sys
    code = ("import torch; before = torch.get_num_threads(); import engines.loop.training; "
            "assert torch.get_num_threads() == before, (before, torch.get_num_threads())")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=__import__("pathlib").Path(__file__).parents[1])
