"""The hooks that watch a person's own loop (engines/loop/watching.py): what they measure is what
the tensors say, they run only on logged steps, and they say what they measured."""
import math

import pytest
import torch
from torch import nn

from engines.loop.watching import ModuleWatch, WatchError


def mlp(seed: int = 0, width: int = 16, depth: int = 3, act=nn.ReLU) -> nn.Sequential:
    torch.manual_seed(seed)
    layers, n = [], 8
    for _ in range(depth):
        layers += [nn.Linear(n, width), act()]
        n = width
    return nn.Sequential(*layers, nn.Linear(n, 2))


def batches(count: int, seed: int = 0, size: int = 32):
    generator = torch.Generator().manual_seed(seed)
    for _ in range(count):
        x = torch.randn(size, 8, generator=generator)
        yield x, (x[:, 0] > 0).long()


class Recorded(dict):
    """step -> metrics, merged over the records of one step."""

    def __call__(self, step: int, metrics: dict[str, float]) -> None:
        self.setdefault(step, {}).update(metrics)


def test_gradient_norms_updates_and_activation_stats_match_the_tensors() -> None:
    """Per module: √Σ‖∂L/∂p‖² over its parameters, ‖ΔW‖/‖W‖ of the step, the output's std and the
    share of units ≤ 0 on the batch — each equal to the same number computed by hand."""
    model, records = mlp(), Recorded()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    watch = ModuleWatch(model, optimizer, 1, records)
    outputs = {}
    handles = [model[i].register_forward_hook(lambda m, i, o, k=i: outputs.__setitem__(k, o.detach()))
               for i in (0, 2, 4, 6)]
    for step, (x, y) in enumerate(batches(3)):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        expected_grads = [math.sqrt(sum(float(p.grad.double().norm()) ** 2 for p in model[i].parameters()))
                          for i in (0, 2, 4, 6)]
        before = [torch.cat([p.detach().flatten().clone() for p in model[i].parameters()]) for i in (0, 2, 4, 6)]
        optimizer.step()
        after = [torch.cat([p.detach().flatten() for p in model[i].parameters()]) for i in (0, 2, 4, 6)]
        got = records[step]
        for layer, (grad, w0, w1, i) in enumerate(zip(expected_grads, before, after, (0, 2, 4, 6)), start=1):
            name = f"layer_{layer:02d}"
            ratio = float((w1 - w0).norm() / w0.norm())
            assert got[f"grad_norm/{name}"] == pytest.approx(grad, rel=1e-6), f"step {step} {name}"
            assert got[f"update_ratio/{name}"] == pytest.approx(ratio, rel=1e-4), f"step {step} {name} {ratio:.3e}"
            assert got[f"act_std/{name}"] == pytest.approx(float(outputs[i].std()), rel=1e-5)
            dead = float((outputs[i] <= 0).all(dim=0).float().mean())
            assert got[f"frac_dead/{name}"] == pytest.approx(dead, abs=1e-12), f"step {step} {name} dead {dead}"
    for handle in handles:
        handle.remove()
    watch.close()


def test_no_measuring_hook_exists_between_logged_steps() -> None:
    """every=5: after logged step 0 every forward and pre-step hook is removed; the step counter's
    post-hook alone stays; they are back for step 5, gone when closed."""
    model, records = mlp(), Recorded()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    watch = ModuleWatch(model, optimizer, 5, records)
    hooked = lambda: (sum(len(m._forward_hooks) for m in model.modules()), len(optimizer._optimizer_step_pre_hooks),
                      len(optimizer._optimizer_step_post_hooks))  # noqa: E731
    seen = []
    for x, y in batches(7):
        seen.append(hooked())
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
    watch.close()
    assert seen == [(4, 1, 1)] + [(0, 0, 1)] * 4 + [(4, 1, 1), (0, 0, 1)], seen
    assert hooked() == (0, 0, 0)
    assert sorted(step for step, metrics in records.items() if "grad_norm/layer_01" in metrics) == [0, 5]


def test_gradient_accumulation_is_measured_once_per_optimizer_step_after_accumulating() -> None:
    """Four backward passes per step: one record per optimizer step, of the summed gradient, and the
    activations of the last training pass (an eval pass under no_grad is not taken)."""
    model, records = mlp(), Recorded()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    watch = ModuleWatch(model, optimizer, 1, records)
    data = list(batches(8))
    for step in range(2):
        for x, y in data[4 * step:4 * step + 4]:
            (nn.functional.cross_entropy(model(x), y) / 4).backward()
        summed = math.sqrt(sum(float(p.grad.double().norm()) ** 2 for p in model[0].parameters()))
        last_output = model[0](data[4 * step + 3][0]).detach()
        with torch.no_grad():
            model(torch.full((5, 8), 100.0))  # an evaluation pass: not the training batch
        optimizer.step()
        optimizer.zero_grad()
        assert records[step]["grad_norm/layer_01"] == pytest.approx(summed, rel=1e-6)
        assert records[step]["act_std/layer_01"] == pytest.approx(float(last_output.std()), rel=1e-5)
    watch.close()
    assert sorted(records) == [0, 1]


@pytest.mark.parametrize("unscaled_by", ["scaler.step", "nothing"])
def test_grad_scaler_norms_are_the_unscaled_ones(unscaled_by: str) -> None:
    """A GradScaler at 2^10: the recorded gradient norms equal those of the same step without it, whether
    GradScaler.step unscaled them or the loop stepped on scaled gradients (the scaler given to watch)."""
    x, y = next(batches(1))
    plain, scaled = Recorded(), Recorded()
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    watch = ModuleWatch(model, optimizer, 1, plain)
    nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
    watch.close()
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
    watch = ModuleWatch(model, optimizer, 1, scaled, scaler=scaler)
    scaler.scale(nn.functional.cross_entropy(model(x), y)).backward()
    scaler.step(optimizer) if unscaled_by == "scaler.step" else optimizer.step()
    watch.close()
    for name, value in plain[0].items():
        if name.startswith("grad_norm/"):
            assert scaled[0][name] == pytest.approx(value, rel=1e-5), f"{name}: {scaled[0][name]} vs {value}"
    assert scaled[0]["loss_scale"] == 2.0 ** 10


@pytest.mark.slow  # compiling takes seconds
def test_a_compiled_model_has_its_gradients_measured_and_says_its_activations_are_not() -> None:
    """torch.compile runs its own graph, where forward hooks added later never run: gradients and
    updates are still recorded, activations are not, and a note says why."""
    model = mlp()
    compiled = torch.compile(model, backend="eager")
    records = Recorded()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    watch = ModuleWatch(compiled, optimizer, 1, records)
    for x, y in batches(2):
        nn.functional.cross_entropy(compiled(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
    watch.close()
    assert [layer.path for layer in watch.layers] == ["0", "2", "4", "6"], "named inside the compiled wrapper"
    assert all(f"grad_norm/layer_0{i}" in records[1] for i in range(1, 5))
    assert not any(name.startswith("act_std/") for name in records[1]), sorted(records[1])
    assert watch.notes and "torch.compile" in watch.notes[0]


def test_every_parameterised_module_counts_named_by_its_path_and_a_tied_weight_once() -> None:
    """Embedding, LayerNorm, Linear and a conv: each a module of its own; a head tied to the embedding
    is counted with the embedding; a conv's units are its channels."""
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(10, 8)
            self.conv = nn.Conv1d(8, 8, 3, padding=1)
            self.norm = nn.LayerNorm(8)
            self.head = nn.Linear(8, 10, bias=False)
            self.head.weight = self.embed.weight

        def forward(self, tokens):
            h = self.embed(tokens)  # (batch, seq, 8)
            h = self.conv(h.transpose(1, 2)).transpose(1, 2)
            return self.head(self.norm(h))

    torch.manual_seed(0)
    net, records = Net(), Recorded()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    watch = ModuleWatch(net, optimizer, 1, records)
    tokens = torch.randint(0, 10, (4, 6), generator=torch.Generator().manual_seed(0))
    nn.functional.cross_entropy(net(tokens).flatten(0, 1), tokens.flatten()).backward()
    optimizer.step()
    watch.close()
    assert [(layer.path, layer.kind) for layer in watch.layers] == [("embed", "Embedding"), ("conv", "Conv1d"),
                                                                    ("norm", "LayerNorm")]
    assert {name for name in records[0] if name.startswith("frac_dead/")} == {f"frac_dead/layer_0{i}" for i in (1, 2, 3)}


@pytest.mark.parametrize("case, message", [
    ("no parameters", "has no parameters"),
    ("frozen", "every parameter of the model is frozen"),
    ("every=0", "every must be a whole number ≥ 1"),
    ("every=-3", "every must be a whole number ≥ 1"),
    ("every=2.5", "every must be a whole number ≥ 1"),
    ("not an optimizer", "optimizer must be a torch.optim.Optimizer"),
])
def test_a_model_or_setting_that_cannot_be_watched_is_one_clear_error(case: str, message: str) -> None:
    """No parameters, a frozen model, every ≤ 0 (or not whole), a non-optimizer: one WatchError line."""
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    every = {"every=0": 0, "every=-3": -3, "every=2.5": 2.5}.get(case, 1)
    if case == "no parameters":
        model = nn.Sequential(nn.ReLU())
    if case == "frozen":
        model.requires_grad_(False)
    if case == "not an optimizer":
        optimizer = "sgd"
    with pytest.raises(WatchError) as raised:
        ModuleWatch(model, optimizer, every, Recorded())
    assert message in str(raised.value) and "\n" not in str(raised.value), str(raised.value)


def test_a_vanished_gradient_below_float32s_reach_is_summed_in_float64() -> None:
    """Sigmoid at depth 40: module 1's gradient elements are so small that their float32 squares are 0; the
    recorded norm is the float64 one (nonzero, equal to the hand-computed norm), not 0."""
    model, records = mlp(depth=40, act=nn.Sigmoid), Recorded()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    watch = ModuleWatch(model, optimizer, 1, records)
    x, y = next(batches(1))
    nn.functional.cross_entropy(model(x), y).backward()
    expected = math.sqrt(sum(float(p.grad.double().norm()) ** 2 for p in model[0].parameters()))
    in_float32 = float(torch.stack([p.grad.norm() for p in model[0].parameters()]).norm())
    optimizer.step()
    watch.close()
    assert in_float32 == 0.0 < expected, f"float32 norm {in_float32}, float64 {expected:.3e}"
    assert records[0]["grad_norm/layer_01"] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_a_float64_or_bfloat16_model_is_watched_with_its_norms_as_the_tensors_say(dtype) -> None:
    """A float64 model once stopped the person's training (a float32 norm may not narrow float64
    weights); now each dtype trains on, watched: gradient norms and update ratios as computed by hand
    in float64."""
    model, records = mlp().to(dtype), Recorded()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    watch = ModuleWatch(model, optimizer, 1, records)
    x, y = next(batches(1))
    nn.functional.cross_entropy(model(x.to(dtype)).float(), y).backward()
    grad = math.sqrt(sum(float(p.grad.double().norm()) ** 2 for p in model[0].parameters()))
    before = torch.cat([p.detach().double().flatten() for p in model[0].parameters()])
    optimizer.step()
    after = torch.cat([p.detach().double().flatten() for p in model[0].parameters()])
    watch.close()
    tolerance = 1e-9 if dtype == torch.float64 else 1e-5
    assert records[0]["grad_norm/layer_01"] == pytest.approx(grad, rel=tolerance), (dtype, records[0])
    ratio = float((after - before).norm() / before.norm())
    assert records[0]["update_ratio/layer_01"] == pytest.approx(ratio, rel=1e-4), (dtype, ratio, records[0])


def test_activation_stats_hold_when_the_outputs_shapes_change_between_logged_steps() -> None:
    """Same-shaped outputs are measured stacked, grouped once per set of shapes: a convolution's units are
    its channels, an unbatched Linear's 1-dim output is one row, and a module that sits out a step (so the
    groups change) is left out of that step's values. Each value equals the tensor's own, and the share
    never > 0 follows each module's units over the logged steps."""
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.skipped = nn.Linear(6, 6), nn.Linear(6, 6), nn.Linear(6, 6)
            self.conv = nn.Conv1d(2, 3, 3)

        def forward(self, x: torch.Tensor, step: int) -> torch.Tensor:
            y = self.b(torch.relu(self.a(x)))
            z = self.conv(y.view(1, 2, 3).repeat(2, 1, 2))
            return y.sum() + z.pow(2).sum() + (self.skipped(y).sum() if step % 2 == 0 else 0.0)

    torch.manual_seed(0)
    net, records = Net(), Recorded()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    watch = ModuleWatch(net, optimizer, 1, records)
    outputs = {}
    for name in ("a", "b", "skipped", "conv"):
        getattr(net, name).register_forward_hook(lambda m, i, o, k=name: outputs.__setitem__(k, o.detach()))
    layer_of = {layer.path: f"layer_{k:02d}" for k, layer in enumerate(watch.layers, start=1)}
    ever_positive: dict[str, torch.Tensor] = {}
    generator = torch.Generator().manual_seed(1)
    for step in range(5):
        outputs.clear()
        net(torch.randn(6, generator=generator), step).backward()
        optimizer.step()
        optimizer.zero_grad()
        got = records[step]
        assert (f"act_std/{layer_of['skipped']}" in got) == (step % 2 == 0), (step, sorted(got))
        for name, out in outputs.items():
            units = out.movedim(1, -1).reshape(-1, out.shape[1]) if name == "conv" else out.reshape(1, -1)
            top = units.amax(dim=0)
            ever_positive[name] = ever_positive.get(name, top > 0) | (top > 0)
            layer = layer_of[name]
            assert got[f"act_std/{layer}"] == pytest.approx(float(out.std()), rel=1e-5), (step, name)
            assert got[f"frac_dead/{layer}"] == pytest.approx(float((top <= 0).double().mean()), abs=1e-12)
            never = float((~ever_positive[name]).double().mean())
            assert got[f"frac_dead_always/{layer}"] == pytest.approx(never, abs=1e-12), (step, name, never)
    watch.close()
