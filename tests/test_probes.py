"""Probes against hand computations on a model small enough to check by eye."""
import math

import torch
from torch import nn

from engines.loop.probes import LayerProbe, layer_name
from engines.loop.training import _flatten
from engines.supervised.models import DeepMLP


def tiny_model() -> DeepMLP:
    return DeepMLP(4, 8, 3, 2, activation="relu", init="he", seed=0)


def test_grad_norms_equal_per_layer_frobenius_norms() -> None:
    """One fused _foreach_norm gives exactly each layer's ‖∂L/∂W‖_F."""
    model = tiny_model()
    probe = LayerProbe(list(model.linears), list(model.activations))
    x, y = torch.randn(16, 4, generator=torch.Generator().manual_seed(1)), torch.tensor([0, 1] * 8)
    nn.functional.cross_entropy(model(x), y).backward()
    by_hand = [math.sqrt(sum(float(g) ** 2 for g in layer.weight.grad.flatten())) for layer in model.linears]
    measured = probe.grad_norms().tolist()
    for i, (a, b) in enumerate(zip(measured, by_hand)):
        assert math.isclose(a, b, rel_tol=1e-5), f"layer {i + 1}: probe {a} vs hand {b}"
    probe.close()


def test_grad_norms_do_not_underflow() -> None:
    """Gradients of 1e-26 per entry have a norm of ~1e-24, not 0 (float32 squares would underflow)."""
    layer = nn.Linear(64, 64)
    layer.weight.grad = torch.full((64, 64), 1e-26)
    norm = float(LayerProbe([layer]).grad_norms()[0])
    assert math.isclose(norm, 64e-26, rel_tol=1e-3), f"norm {norm:.3e}"


def test_activation_stats_match_the_layer_outputs() -> None:
    """act_std is the std of each activation's output; frac_dead counts units zero on every row."""
    model = tiny_model()
    outputs = []
    hooks = [act.register_forward_hook(lambda m, i, o: outputs.append(o.detach())) for act in model.activations]
    probe = LayerProbe(list(model.linears), list(model.activations))
    probe.armed = True
    model(torch.randn(32, 4, generator=torch.Generator().manual_seed(2))).sum().backward()
    stats = probe.activation_stats()
    for i, out in enumerate(outputs):
        assert math.isclose(float(stats["act_std"][i]), float(out.std()), rel_tol=1e-5)
        dead = float((out <= 0).all(dim=0).float().mean())
        assert float(stats["frac_dead"][i]) == dead, f"layer {i + 1}"
    for hook in hooks:
        hook.remove()
    probe.close()


def test_backprop_gradient_is_the_gradient_at_each_activation_output() -> None:
    """out_grad is ‖∂L/∂a_l‖ for the output a_l of layer l's activation."""
    model = tiny_model()
    outputs = []

    def keep(module, inputs, output):
        output.retain_grad()
        outputs.append(output)

    hooks = [act.register_forward_hook(keep) for act in model.activations]
    probe = LayerProbe(list(model.linears), list(model.activations))
    probe.armed = True
    model(torch.randn(32, 4, generator=torch.Generator().manual_seed(3))).pow(2).sum().backward()
    measured = probe.activation_stats()["out_grad"].tolist()
    for i, out in enumerate(outputs):
        assert math.isclose(measured[i], float(out.grad.norm()), rel_tol=1e-5), f"layer {i + 1}"
    for hook in hooks:
        hook.remove()
    probe.close()


def test_update_ratio_is_step_size_over_weight_size() -> None:
    """For SGD, ‖ΔW‖/‖W‖ = lr·‖∂L/∂W‖/‖W‖ exactly."""
    model = tiny_model()
    probe = LayerProbe(list(model.linears))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    model(torch.randn(8, 4)).sum().backward()
    expected = [0.05 * float(l.weight.grad.norm()) / float(l.weight.detach().norm()) for l in model.linears]
    probe.snapshot()
    optimizer.step()
    for i, (a, b) in enumerate(zip(probe.update_ratios().tolist(), expected)):
        assert math.isclose(a, b, rel_tol=1e-4), f"layer {i + 1}: {a} vs {b}"


def test_unarmed_probe_records_nothing_and_close_removes_hooks() -> None:
    model = tiny_model()
    probe = LayerProbe(list(model.linears), list(model.activations))
    model(torch.randn(4, 4))
    assert probe.activation_stats() == {}
    probe.close()
    assert all(not act._forward_hooks for act in model.activations)


def test_flatten_names_layers_in_order() -> None:
    flat = _flatten({"loss": torch.tensor(0.5)}, {"grad_norm": torch.tensor([1.0, 2.0])})
    assert flat == {"loss": 0.5, f"grad_norm/{layer_name(0)}": 1.0, "grad_norm/layer_02": 2.0}
