"""Dead ReLU, asserted: born dead is monotone in depth and rises as width falls; Adam at a
large learning rate kills ReLU units (zero gradient on every input) but no LeakyReLU unit;
a small learning rate kills essentially none. Thresholds calibrated over seeds 0-5
(ranges in the comments)."""
import functools

import pytest
import torch
import torch.nn.functional as F

from engines.supervised.dead_relu import ActivationMLP, RegressionTask, born_dead_probability, census, constant_prefixes
from scenarios import get_scenario
from scenarios.records import Records

SCENARIO = get_scenario("dead-relu")
SMALL_BORN_DEAD = {"born_dead_depth": 5, "networks": 32, "born_dead_widths": "1,2,3,4,5,6"}  # keep runs on training


@functools.cache
def summary(**config) -> dict:
    return SCENARIO.run({**SMALL_BORN_DEAD, **config}).summary


def arms(**config) -> dict:
    return summary(**config)["arms"]


@pytest.mark.parametrize("width, bias, init", [(2, 0.0, "he"), (3, -0.1, "he"), (4, -0.1, "pytorch-default"), (4, 0.1, "he"),
                                               (6, 0.0, "xavier")])
def test_born_dead_is_monotone_along_nested_prefixes_of_one_network(width: int, bias: float, init: str) -> None:
    """Each prefix of each sampled network is judged on its own activations; once a prefix
    outputs a constant over the probes, every longer prefix does too."""
    constant = constant_prefixes(width, 40, 256, init=init, bias=bias, seed=0)  # (networks, depth)
    revived = (constant[:, :-1] & ~constant[:, 1:]).sum().item()
    assert revived == 0, f"{revived} (network, depth) pairs came back to life one layer deeper"
    changed = (~constant[:, 0] & constant[:, -1]).sum().item()
    assert changed > 10, f"only {changed} of 256 networks died between depth 1 and 40: the check saw nothing"


@pytest.mark.parametrize("seed", [0, 3])
def test_born_dead_rises_with_depth_and_falls_with_width(seed: int) -> None:
    """He init, zero bias, depth 20: width 2 is dead with P ≈ 1 (seeds 0-4: 0.988-1.0),
    width 8 rarely (0.008-0.023); at depth 3 even width 2 mostly lives."""
    narrow, wide = (born_dead_probability(w, 20, 256, seed=seed) for w in (2, 8))
    assert narrow[19] > 0.9 and wide[19] < 0.1, f"P(dead, depth 20): width 2 {narrow[19]:.3f}, width 8 {wide[19]:.3f}"
    assert narrow[2] < 0.5, f"width 2 at depth 3: {narrow[2]:.3f}"
    assert bool((narrow >= wide).all()), "a wider net was more often born dead than a narrower one"


def test_born_dead_extremes_are_exact() -> None:
    """Zero bias: the probe grid holds x and -x, so no layer-1 unit is <= 0 on all of it and
    P(dead at depth 1) = 0. A bias of -10 switches every layer-1 unit off (|w·x| < 10 here):
    P = 1 at every depth."""
    assert born_dead_probability(3, 10, 256, bias=0.0)[0].item() == 0
    assert bool((born_dead_probability(3, 10, 256, bias=-10.0) == 1).all())


def test_a_dead_unit_gets_exactly_zero_gradient_and_a_leaky_one_does_not() -> None:
    """Turn one layer-2 unit off on every input (weights -|w|, bias -1; layer 1's outputs are
    >= 0). ReLU: census calls it dead, its weights get exactly zero gradient. LeakyReLU: the
    same unit is never > 0 but not dead, and its gradient is not zero."""
    task = RegressionTask(seed=1)
    for activation in ("relu", "leaky_relu"):
        model = ActivationMLP(8, 16, 3, activation=activation, seed=0)
        with torch.no_grad():
            model.linears[1].weight[5] = -model.linears[1].weight[5].abs()
            model.linears[1].bias[5] = -1.0
        fractions, _ = census(model, task.x)
        F.mse_loss(model(task.x), task.y).backward()
        row_grad = model.linears[1].weight.grad[5].abs().max().item()
        assert fractions["frac_never_positive"][1].item() >= 1 / 16
        if activation == "relu":
            assert fractions["frac_dead"][1].item() >= 1 / 16 and row_grad == 0.0, f"dead unit gradient {row_grad}"
        else:
            assert fractions["frac_dead"].sum().item() == 0 and row_grad > 0, f"leaky unit gradient {row_grad}"


@pytest.mark.parametrize("seed", [0, 4])
def test_adam_at_lr_0_1_kills_most_of_a_relu_layer_but_no_leaky_unit(seed: int) -> None:
    """Adam, lr 0.1, 60 steps of the default task: the worst ReLU layer loses > 50% of its
    units (seeds 0-5: 91-100%, more than half by step 1-3); LeakyReLU and GELU lose none."""
    result = arms(optimizer="adam", lr=0.1, steps=60, seed=seed)
    relu, leaky = result["ReLU"], result["LeakyReLU"]
    assert relu["worst_dead"] > 0.5, f"ReLU layer {relu['worst_layer']}: {relu['worst_dead']:.0%} dead"
    assert leaky["worst_dead"] == 0.0, f"LeakyReLU layer {leaky['worst_layer']}: {leaky['worst_dead']:.0%} dead"
    assert result["GELU"]["worst_dead"] == 0.0, f"GELU: {result['GELU']['worst_dead']:.0%} dead"


@pytest.mark.parametrize("seed", [0, 4])
def test_adam_at_lr_1e_3_kills_essentially_none(seed: int) -> None:
    """Adam, lr 1e-3, 100 steps: at most 4 of 64 units of any layer die in training (seeds
    0-5: 0-2 units, also at 200 steps); a few are dead on the 256 inputs from init (up to 5)."""
    result = arms(optimizer="adam", lr=1e-3, steps=100, seed=seed)
    for name, arm in result.items():
        assert arm["newly_dead"] <= 4 / 64, f"{name}: {arm['newly_dead']:.1%} of a layer died in training"
        assert arm["worst_dead"] <= 0.1, f"{name}: {arm['worst_dead']:.1%} of layer {arm['worst_layer']} dead"


def test_a_relu_net_with_an_all_dead_last_layer_outputs_a_constant() -> None:
    """Seed 0 at lr 0.1 kills all of layer 4; the output is then the head's bias, so the
    loss cannot go below Var(y) (exact: the best constant's MSE is the variance)."""
    result = summary(optimizer="adam", lr=0.1, steps=60, seed=0)
    relu = result["arms"]["ReLU"]
    assert relu["last_layer_dead"] == 1.0, f"last layer {relu['last_layer_dead']:.0%} dead"
    assert relu["final_loss"] >= result["constant_loss"] * (1 - 1e-6), \
        f"loss {relu['final_loss']:.4f} below Var(y) {result['constant_loss']:.4f}"
    assert relu["grad_norm"] == 0.0, f"hidden-layer gradient {relu['grad_norm']}"


def test_same_config_gives_identical_records() -> None:
    first, second = (SCENARIO.run(SCENARIO.tiny).frame for _ in range(2))
    assert first.equals(second)


def test_the_census_of_a_logged_step_sees_the_weights_its_forward_pass_used() -> None:
    """The census runs in the loop's `on_log` (after backward, before the step): at step 0 it
    must equal the census of the freshly built network, layer by layer."""
    config = {**SCENARIO.tiny, "bias_init": -0.3}
    records = Records(SCENARIO.run(config).frame)
    model = ActivationMLP(8, config["width"], config["depth"], activation="relu", bias_init=-0.3, seed=0)
    fractions, _ = census(model, RegressionTask(seed=1).x)
    for kind in ("frac_dead", "frac_never_positive"):
        recorded, expected = records.profile("ReLU", kind, step=0).tolist(), fractions[kind].tolist()
        assert recorded == expected, f"{kind} at step 0: recorded {recorded}, census of the initial net {expected}"


def test_a_leaky_layer_that_never_fires_is_said_to_be_alive_and_why() -> None:
    """LeakyReLU's units below 0 on every input are not dead (slope 0.01): its detail says "never
    above 0" and, beside it, that no unit is dead, both claims checked on the records."""
    from sentence_checks import explained_and_holding
    config = {**SMALL_BORN_DEAD, "steps": 200}
    records = Records(SCENARIO.run(config).frame)
    explanation = explained_and_holding(SCENARIO, config, records)
    leaky = next(s.text for s in explanation.details if s.text.startswith("LeakyReLU:"))
    dead = records.layers("LeakyReLU", "frac_dead")
    never = records.layers("LeakyReLU", "frac_never_positive")
    assert float(dead.iloc[-1].max()) == 0 and float(never.iloc[-1].max()) > 0, (dead.iloc[-1], never.iloc[-1])
    assert "never above 0" in leaky and "yet 0% of any layer's units dead" in leaky, leaky
