"""What to look for in a watched run: on runs made to show each finding, the diagnosis says it and names
the module; on random runs every sentence it says holds on the records."""
import random

import pandas as pd
import pytest
import torch
from torch import nn

from explorer import watch
from scenarios import get_scenario
from scenarios.records import Records

WATCHED = get_scenario("watched")


def mlp(depth: int, width: int, act, seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    layers, n = [], 16
    for _ in range(depth):
        layers += [nn.Linear(n, width), act()]
        n = width
    return nn.Sequential(*layers, nn.Linear(n, 2))


def watched(model: nn.Module, optimizer, steps: int, every: int = 2, lr_at: tuple[int, float] | None = None,
            seed: int = 0, batch: int = 64):
    """Train on a fixed two-class task with `watch` on; the run's records and its diagnosis."""
    run = watch(model, optimizer, every=every, store=None)
    generator = torch.Generator().manual_seed(seed)
    for step in range(steps):
        if lr_at and step == lr_at[0]:
            optimizer.param_groups[0]["lr"] = lr_at[1]
        x = torch.randn(batch, 16, generator=generator)
        loss = nn.functional.cross_entropy(model(x), (x[:, 0] + x[:, 1] > 0).long())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        run.log(loss=loss)
    frame = pd.DataFrame(run.rows(), columns=["arm", "step", "metric", "value"])
    run.finish()
    config = WATCHED.validate(run.recorder.config)
    explanation = WATCHED.explain(frame, config)
    broken = [str(c) for c in explanation.claims() if not c.holds(Records(frame))]
    assert not broken, f"claims that do not hold: {broken}"
    return frame, explanation.markdown()


def sentence(text: str, start: str) -> str:
    found = [line for line in text.splitlines() if line.startswith(f"- {start}")]
    assert found, f"no sentence starting {start!r} in:\n{text}"
    return found[0]


def test_a_deep_sigmoid_net_is_told_its_gradient_vanishes_toward_the_input() -> None:
    """Sigmoid, depth 12, PyTorch's default init: module 1 gets < 10^-6 of the last module's gradient."""
    model = mlp(12, 32, nn.Sigmoid)
    frame, text = watched(model, torch.optim.SGD(model.parameters(), lr=0.1), steps=10)
    depth = sentence(text, "Across depth")
    assert "it vanishes toward the input" in depth, depth
    first, last = (Records(frame).profile("your model", "grad_norm")[i] for i in (0, -1))
    assert first / last < 1e-6, f"layer 1 / last {first / last:.1e}"


def test_a_relu_net_at_lr_half_is_told_its_dead_units_and_large_updates() -> None:
    """ReLU at SGD lr 0.5: modules with units ≤ 0 on every logged batch (a ReLU follows them), and
    update-to-weight ratios above 10^-2, each named."""
    model = mlp(4, 32, nn.ReLU)
    _, text = watched(model, torch.optim.SGD(model.parameters(), lr=0.5), steps=60, every=3)
    dead = sentence(text, "Dead units")
    assert "(a ReLU follows)" in dead and "`6: Linear`" in dead, dead
    updates = sentence(text, "Update-to-weight ratios far")
    assert "above 10⁻²" in updates, updates


def test_one_module_initialised_a_thousand_times_larger_is_named() -> None:
    """Module 3's weights ×1000: the outputs' std jumps into it (×100 or more), and its update-to-weight
    ratio is the farthest from ~10^-3, below 10^-4."""
    model = mlp(6, 32, nn.Tanh)
    with torch.no_grad():
        model[4].weight.mul_(1e3)
    _, text = watched(model, torch.optim.SGD(model.parameters(), lr=0.05), steps=20)
    jump = sentence(text, "Forward signal")
    assert "grows" in jump and "to `4: Linear`" in jump, jump
    updates = sentence(text, "Update-to-weight ratios far")
    assert updates.split(": ", 1)[1].startswith("`4: Linear` "), updates
    assert "below 10⁻⁴" in updates, updates


def test_a_raised_learning_rate_is_told_as_a_loss_spike_from_where_it_began() -> None:
    """SGD at lr 0.5, then 2 from step 40: a loss spike whose rise began at step 40–42 (41 or 42 on seeds 0–4)."""
    model = mlp(3, 32, nn.ReLU)
    frame, text = watched(model, torch.optim.SGD(model.parameters(), lr=0.5), steps=60, lr_at=(40, 2.0))
    spike = sentence(text, "Loss spikes")
    began = int(spike.split("rising from step ")[1].split(" ")[0]) if "rising from step" in spike else \
        int(spike.split(" at step ")[1].split(",")[0])
    assert 40 <= began <= 42, spike


def test_the_first_nan_is_told_with_its_step_and_the_module_it_appeared_in() -> None:
    """SGD at lr 50 blows up: the loss's first non-finite step, and the first module whose output was."""
    model = mlp(3, 32, nn.ReLU)
    frame, text = watched(model, torch.optim.SGD(model.parameters(), lr=50.0), steps=20, every=1)
    told = sentence(text, "NaN/inf")
    loss = Records(frame).series("your model", "loss")
    first_bad = int(loss[~loss.apply(lambda v: v == v and abs(v) != float("inf"))].index[0])
    assert f"the loss is first non-finite at step {first_bad}" in told, told
    assert "the first such module in forward order" in told or "the deepest such module" in told, told


@pytest.mark.parametrize("seed", range(4))
def test_every_sentence_holds_on_random_watched_runs_and_on_their_first_half(seed: int) -> None:
    """Random depth, width, activation, optimizer, lr and `every`: every claim holds on the whole run
    and on the records of its first half (what a live page diagnoses)."""
    pick = random.Random(seed)
    act = pick.choice([nn.ReLU, nn.Tanh, nn.Sigmoid, nn.GELU])
    model = mlp(pick.randint(1, 8), pick.choice([8, 16, 32]), act, seed=seed)
    lr = 10 ** pick.uniform(-3, 0.5)
    optimizer = (torch.optim.Adam if pick.random() < 0.5 else torch.optim.SGD)(model.parameters(), lr=lr)
    frame, _ = watched(model, optimizer, steps=pick.randint(4, 40), every=pick.randint(1, 5), seed=seed)
    half = frame.iloc[: len(frame) // 2]
    explanation = WATCHED.explain(half, WATCHED.validate({"watch_layers": [str(i) for i in range(20)]}))
    broken = [str(c) for c in explanation.claims() if not c.holds(Records(half))]
    assert not broken, f"seed {seed}: {broken}"


def test_a_sequential_childs_number_is_told_with_its_class() -> None:
    """`0` alone says nothing: a path ending in a number gets its class, as print(model) writes `(0): Linear`;
    named paths stay as they are, and a run that recorded no classes keeps its paths."""
    from scenarios.watched import module_labels
    config = WATCHED.validate({"watch_layers": ["0", "blocks.1", "head", "blocks.1.mlp"],
                               "watch_kinds": ["Linear", "Block", "Linear", "MLP"]})
    assert module_labels(config) == ["0: Linear", "blocks.1: Block", "head", "blocks.1.mlp"], module_labels(config)
    assert module_labels(WATCHED.validate({"watch_layers": ["0", "1"]})) == ["0", "1"]
