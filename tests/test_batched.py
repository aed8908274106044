"""Batched arms, asserted on the engine: K arms as one model give each arm what it gets alone.

The stacked optimizers are torch.optim's per arm bit for bit; a stacked Linear is F.linear's,
forward and backward; a diverging arm ends alone and poisons no other; adding an arm changes
no other arm's records; the driver reports a batched step's records under each arm's name.
"""
import pytest
import torch
import torch.nn.functional as F

from engines.loop.batched import per_arm_metrics, train_arms
from engines.loop.probes import LayerProbe
from engines.loop.records import Diverged, StepRecord
from engines.loop.stacked import ArmProbe, StackedLinear, StackedMLP, arm_cross_entropy
from engines.loop.stacked_optim import StackedAdam, StackedSGD
from engines.loop.training import supervised, train
from engines.supervised.data import TeacherTask
from engines.supervised.models import DeepMLP
from scenarios.base import Arm, Run

LRS, MOMENTA, NESTEROV, DECAYS = [0.1, 0.01, 0.3, 0.05], [0.0, 0.9, 0.9, 0.5], [False, False, True, True], [0.0, 0.1, 0.0, 0.01]
DECOUPLED = [True, False, True, False]


def stepped(make_solo, make_stacked, dtype: torch.dtype, steps: int = 20) -> int:
    """How many elements differ between each arm stepped alone by torch.optim and all stepped together."""
    generator = torch.Generator().manual_seed(0)
    start = torch.randn(4, 7, 5, generator=generator, dtype=dtype)
    grads = [torch.randn(4, 7, 5, generator=generator, dtype=dtype) for _ in range(steps)]
    alone = []
    for k in range(4):
        p = start[k].clone().requires_grad_()
        optimizer = make_solo(k, [p])
        for grad in grads:
            p.grad = grad[k].clone()
            optimizer.step()
        alone.append(p.detach())
    stacked = start.clone().requires_grad_()
    optimizer = make_stacked([stacked])
    for grad in grads:
        stacked.grad = grad.clone()
        optimizer.step()
    return sum(int((stacked[k] != alone[k]).sum()) for k in range(4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_stacked_optimizers_are_torch_optim_per_arm_bit_for_bit(dtype: torch.dtype) -> None:
    """SGD (momentum 0 or μ, Nesterov, L2), Adam + L2, AdamW and a mix, each arm with its own settings."""
    cases = {
        "sgd": (lambda k, ps: torch.optim.SGD(ps, lr=LRS[k], momentum=MOMENTA[k], nesterov=NESTEROV[k],
                                             weight_decay=DECAYS[k]),
                lambda ps: StackedSGD(ps, 4, LRS, MOMENTA, NESTEROV, DECAYS)),
        "adam": (lambda k, ps: torch.optim.Adam(ps, lr=LRS[k], weight_decay=DECAYS[k], foreach=True),
                 lambda ps: StackedAdam(ps, 4, LRS, weight_decay=DECAYS)),
        "adamw": (lambda k, ps: torch.optim.AdamW(ps, lr=LRS[k], weight_decay=0.5 + DECAYS[k]),
                  lambda ps: StackedAdam(ps, 4, LRS, weight_decay=[0.5 + d for d in DECAYS], decoupled=True)),
        "mixed": (lambda k, ps: (torch.optim.AdamW if DECOUPLED[k] else torch.optim.Adam)(ps, lr=LRS[k], weight_decay=0.1),
                  lambda ps: StackedAdam(ps, 4, LRS, weight_decay=0.1, decoupled=DECOUPLED)),
    }
    differing = {name: stepped(solo, together, dtype) for name, (solo, together) in cases.items()}
    assert not any(differing.values()), f"elements that differ from torch.optim's, per case: {differing}"


def test_a_stacked_linear_is_f_linear_per_arm_forward_and_backward_bit_for_bit() -> None:
    generator = torch.Generator().manual_seed(1)
    linears = [torch.nn.Linear(16, 24) for _ in range(3)]
    for linear in linears:
        torch.nn.init.normal_(linear.weight, generator=generator)
    x = torch.randn(64, 16, generator=generator)
    upstream = torch.randn(3, 64, 24, generator=generator)
    stacked = StackedLinear(linears)
    (stacked(x) * upstream).sum().backward()
    for k, linear in enumerate(linears):
        out = F.linear(x, linear.weight, linear.bias)
        (out * upstream[k]).sum().backward()
        assert torch.equal(stacked(x)[k], out), f"arm {k}: forward differs"
        assert torch.equal(stacked.weight.grad[k], linear.weight.grad), f"arm {k}: weight gradient differs"
        assert torch.equal(stacked.bias.grad[k], linear.bias.grad), f"arm {k}: bias gradient differs"


def test_arm_cross_entropy_has_cross_entropys_gradient_and_logged_value() -> None:
    generator = torch.Generator().manual_seed(2)
    logits = torch.randn(3, 200, 10, generator=generator, requires_grad=True)
    targets = torch.randint(0, 10, (200,), generator=generator)
    losses = arm_cross_entropy(logits, targets, exact_value=True)
    (grad,) = torch.autograd.grad(losses.sum(), logits)
    for k in range(3):
        alone = logits[k].detach().requires_grad_()
        loss = F.cross_entropy(alone, targets)
        loss.backward()
        assert losses[k].item() == loss.item(), f"arm {k}: {losses[k].item()!r} vs {loss.item()!r}"
        assert torch.equal(grad[k], alone.grad), f"arm {k}: gradient differs"


def mlp_arms(lrs: list[float], steps: int = 12) -> dict[str, dict]:
    """Arms `lr=…` of one ReLU MLP (same init, same batches) trained together by SGD: records by arm and step."""
    nets = [DeepMLP(8, 16, 2, 3, seed=0) for _ in lrs]
    model = StackedMLP([[*net.linears, net.head] for net in nets])
    params = list(model.parameters())
    probe = ArmProbe([linear.weight for linear in model.linears] + [model.head.weight])
    names = [f"lr={lr:g}" for lr in lrs]
    records = {name: {} for name in names}
    objective = lambda batch, logging: arm_cross_entropy(model(batch[0]), batch[1], exact_value=logging)  # noqa: E731
    for items in train_arms(names, params, StackedSGD(params, len(lrs), lrs), TeacherTask(8, 3, seed=1).batches(32),
                            objective, steps, probe=probe, log_every=3):
        for name, item in items or []:
            records[name][item.step] = item if isinstance(item, Diverged) else item.metrics
    return records


def solo_arm(lr: float, steps: int = 12) -> dict:
    """The same arm alone, through `engines.loop.training.train` and torch.optim.SGD."""
    net = DeepMLP(8, 16, 2, 3, seed=0)
    probe = LayerProbe([*net.linears, net.head])
    items = train(net, torch.optim.SGD(net.parameters(), lr=lr), TeacherTask(8, 3, seed=1).batches(32),
                  supervised(net, F.cross_entropy, metric_fn=None), steps, probe=probe, log_every=3)
    return {item.step: item.metrics for item in items if isinstance(item, StepRecord)}


def test_a_diverging_arm_ends_alone_and_the_stable_arms_equal_their_solo_runs() -> None:
    """lr 200 diverges beside lr 0.05, 0.1, 0.3: it ends with its own Diverged; the others run to the end
    and every one of their records (loss, lr, per-layer grad norms and update ratios) is their solo run's."""
    lrs = [0.05, 0.1, 200.0, 0.3]
    records = mlp_arms(lrs)
    died = [(name, item) for name, steps in records.items() for item in steps.values() if isinstance(item, Diverged)]
    assert [name for name, _ in died] == ["lr=200"], f"diverged: {died}"
    assert "diverged at step" in died[0][1].message, died[0][1].message
    for lr in (0.05, 0.1, 0.3):
        together, alone = records[f"lr={lr:g}"], solo_arm(lr)
        assert together == alone, f"lr={lr}: batched records differ from the solo run's (steps {sorted(alone)})"


def test_adding_an_arm_changes_no_other_arms_records() -> None:
    two, four = mlp_arms([0.1, 0.3]), mlp_arms([0.05, 0.1, 0.2, 0.3])
    for name in ("lr=0.1", "lr=0.3"):
        assert two[name] == four[name], f"{name}: records changed when two arms were added"


def test_arm_probe_is_layer_probe_per_arm() -> None:
    records = mlp_arms([0.1, 0.2], steps=4)
    for lr in (0.1, 0.2):
        alone = solo_arm(lr, steps=4)
        names = [n for n in alone[0] if n.startswith(("grad_norm/", "update_ratio/"))]
        assert len(names) == 6, names
        for step in alone:
            assert {n: records[f"lr={lr:g}"][step][n] for n in names} == {n: alone[step][n] for n in names}


def test_per_arm_metrics_take_tensors_lists_with_gaps_and_shared_numbers() -> None:
    rows = per_arm_metrics(3, {"loss": torch.tensor([1.0, 2.0, 3.0]), "kl": [None, 0.5, 0.25], "log_n": 4.0},
                           {"grad_norm": torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])})
    assert rows[0] == {"loss": 1.0, "log_n": 4.0, "grad_norm/layer_01": 1.0, "grad_norm/layer_02": 2.0}, rows[0]
    assert rows[2]["kl"] == 0.25 and rows[2]["grad_norm/layer_02"] == 6.0, rows[2]


def test_the_driver_reports_a_batched_step_under_each_arms_name_and_a_death_ends_only_that_arm() -> None:
    def group():
        yield [("a", StepRecord(0, {"loss": 1.0})), ("b", StepRecord(0, {"loss": 2.0}))]
        yield [("b", Diverged(1, "diverged at step 1: loss is nan"))]
        yield None
        yield [("a", StepRecord(3, {"loss": 0.5}))]
    run = Run()
    run.drive([[Arm("a and b", group(), 4)]])
    rows = sorted(run.rows)
    assert rows == [("a", 0, "loss", 1.0), ("a", 3, "loss", 0.5), ("b", 0, "loss", 2.0), ("b", 1, "diverged", 1.0)], rows
    assert [(e.arm, e.step, e.kind) for e in run.events] == [("b", 1, "diverged")]


def test_every_arm_diverging_ends_the_group() -> None:
    records = mlp_arms([300.0, 500.0], steps=50)
    ends = {name: max(steps) for name, steps in records.items()}
    assert all(isinstance(records[name][step], Diverged) for name, step in ends.items()), ends
    assert all(step < 49 for step in ends.values()), f"the group went on after every arm died: {ends}"


@pytest.mark.parametrize("arms", [1, 3])
def test_one_arm_batched_is_the_solo_run(arms: int) -> None:
    lrs = [0.1, 0.2, 0.3][:arms]
    records = mlp_arms(lrs)
    differing = [lr for lr in lrs if records[f"lr={lr:g}"] != solo_arm(lr)]
    assert not differing, f"arms whose records differ from their solo runs: {differing}"


def test_a_padded_lora_arm_equals_peft_unpadded_and_its_padding_stays_zero() -> None:
    """Ranks 1, 2, 8 padded to 8 beside peft's own adapters: outputs and gradients equal to float32 rounding
    (1e-6 of their scale), the padded rows of A and columns of B get gradient exactly 0 and stay exactly 0."""
    from engines.supervised.lora import BATCH, Sweep, add_lora, lora_layer
    from engines.supervised.lora_arms import PaddedLoRA, arm_mse
    ranks, targets = [1, 2, 8], ("fc1", "fc2")
    sweep = Sweep(4, tuple(ranks), 0)
    x, y = sweep.task.batch(BATCH)
    model = PaddedLoRA(sweep.base, ranks, "alpha = 2r", targets, ranks)
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():  # B away from 0, so every gradient is generic
        for k, rank in enumerate(ranks):
            for t in targets:
                model.lora_B[t][k, :, :rank] = 0.1 * torch.randn(64, rank, generator=generator)
    outputs = model(x)
    arm_mse(outputs, y).sum().backward()
    for k, rank in enumerate(ranks):
        peft_model = add_lora(sweep.base, rank, "alpha = 2r", targets, seed=rank)
        with torch.no_grad():
            for t in targets:
                lora_layer(peft_model, t).lora_B["default"].weight.copy_(model.lora_B[t][k, :, :rank])
        expected = peft_model(x)
        F.mse_loss(expected, y).backward()
        scale = expected.abs().max()
        assert (outputs[k] - expected).abs().max() <= 1e-6 * scale, f"r={rank}: outputs differ"
        for t in targets:
            layer = lora_layer(peft_model, t)
            for padded, own in ((model.lora_A[t].grad[k, :rank], layer.lora_A["default"].weight.grad),
                                (model.lora_B[t].grad[k, :, :rank], layer.lora_B["default"].weight.grad)):
                error = ((padded - own).abs().max() / own.abs().max()).item()
                assert error < 1e-5, f"r={rank} {t}: gradient differs by {error:.1e} of its scale"
            assert not model.lora_A[t].grad[k, rank:].any() and not model.lora_B[t].grad[k, :, rank:].any(), \
                f"r={rank} {t}: the padding has a gradient"
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.05)
    for _ in range(5):
        optimizer.zero_grad()
        arm_mse(model(x), y).sum().backward()
        optimizer.step()
    for k, rank in enumerate(ranks):
        for t in targets:
            assert not model.lora_A[t][k, rank:].any() and not model.lora_B[t][k, :, rank:].any(), \
                f"r={rank} {t}: the padding moved"
