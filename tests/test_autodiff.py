"""Autodiff, asserted: the module's tensors, the graph autograd records, the chain rule by hand
against torch.autograd.grad, finite differences and gradcheck, and what pretraining carries.

Transfer thresholds were calibrated on seeds 0-4 (ranges in the comments)."""
import pytest
import torch

from engines.loop.records import StepRecord
from engines.supervised.autodiff import (TinyNet, autodiff_records, by_hand, chain_records, check_records, graph_records,
                              module_records, walk_graph)
from engines.supervised.transfer import ARMS, Transfer

HIDDEN = 3


def example(seed: int = 0):
    generator = torch.Generator().manual_seed(seed + 1)
    return TinyNet(HIDDEN, seed), torch.randn(1, 2, generator=generator), torch.randn(1, 1, generator=generator)


def test_the_module_lists_four_parameters_and_two_buffers_and_only_parameters_train() -> None:
    model, _, _ = example()
    metrics = module_records(model)
    names = sorted({m.split("/")[1] for m in metrics})
    assert names == sorted([*dict(model.named_parameters()), *dict(model.named_buffers())]), names
    for name in ("input_mean", "input_std"):
        assert metrics[f"module/{name}/is_buffer"] == 1.0 and metrics[f"module/{name}/requires_grad"] == 0.0
        assert name in model.state_dict(), f"buffer {name} is not saved with the module"
    assert metrics["module/hidden.weight/rows"] == HIDDEN and metrics["module/hidden.weight/cols"] == 2
    assert sum(metrics[f"module/{n}/numel"] for n, _ in model.named_parameters()) == 4 * HIDDEN + 1


def test_the_graph_has_one_accumulate_grad_per_parameter_and_backward_runs_parents_first() -> None:
    model, x, y = example()
    metrics = graph_records(model, x, y)
    labels = {int(m.split("/")[1][5:]): m.split("/")[2] for m in metrics
              if m.startswith("graph/node_") and not m.endswith(("backward_order", "grad_norm"))}
    leaves = sorted(label.split(":")[1] for label in labels.values() if label.startswith("AccumulateGrad"))
    assert leaves == sorted(dict(model.named_parameters())), f"AccumulateGrad nodes for {leaves}"
    assert labels[0] == "MseLossBackward0" and metrics["graph/node_00/backward_order"] == 1.0
    order = {i: metrics[f"graph/node_{i:02d}/backward_order"] for i in labels}
    edges = [(int(metrics[f"graph/edge_{k:02d}/from"]), int(metrics[f"graph/edge_{k:02d}/to"]))
             for k in range(sum(m.endswith("/from") for m in metrics))]
    assert all(order[parent] < order[child] for parent, child in edges), f"order {order}, edges {edges}"


def test_walking_grad_fn_finds_one_node_per_op_and_a_tree() -> None:
    model, x, y = example()
    loss = torch.nn.functional.mse_loss(model(x), y)
    _, edges, labels = walk_graph(loss, {id(p): n for n, p in model.named_parameters()})
    assert labels.count("AddmmBackward0") == 2 and labels.count("TBackward0") == 2, labels
    assert {"MseLossBackward0", "TanhBackward0"} <= set(labels), labels
    assert len(edges) == len(labels) - 1, f"no tensor is used twice, so the graph is a tree: {edges}"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_chain_rule_product_equals_autograd_at_every_node_and_finite_differences_at_the_end(seed: int) -> None:
    model, x, y = example(seed)
    metrics = chain_records(model, x, y)
    for j in range(1, HIDDEN + 1):
        for i in (1, 2):
            key = f"chain/u{j}_i{i}"
            for s in range(1, 5):
                product, autograd = metrics[f"{key}/product_{s}"], metrics[f"{key}/autograd_{s}"]
                assert product == pytest.approx(autograd, rel=1e-5, abs=1e-7), f"{key} step {s}: {product} vs {autograd}"
            fd = metrics[f"{key}/finite_diff"]
            assert metrics[f"{key}/product_4"] == pytest.approx(fd, rel=1e-4, abs=1e-6), f"{key}: {metrics[f'{key}/product_4']} vs {fd}"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_by_hand_autograd_finite_differences_and_gradcheck_agree_in_float64(seed: int) -> None:
    """By hand vs autograd ~1e-16 (the same arithmetic); vs central differences ~1e-9 (ε = 1e-6, ε² truncation)."""
    metrics = check_records(*example(seed))
    hand = max(v for k, v in metrics.items() if k.startswith("check/hand_vs_autograd/"))
    fd = max(v for k, v in metrics.items() if k.startswith("check/autograd_vs_fd/"))
    assert hand < 1e-12, f"by hand vs autograd: {hand:.2e}"
    assert fd < 1e-6, f"autograd vs finite differences: {fd:.2e}"
    assert metrics["check/gradcheck"] == 1.0


def test_the_matrix_chain_rule_is_the_gradient_torch_computes() -> None:
    model, x, y = example()
    loss = torch.nn.functional.mse_loss(model(x), y)
    grads = dict(zip([n for n, _ in model.named_parameters()], torch.autograd.grad(loss, list(model.parameters()))))
    for name, value in by_hand(model, x, y).items():
        assert torch.allclose(value, grads[name], rtol=1e-5, atol=1e-6), f"{name}: {value} vs {grads[name]}"


def test_the_page_records_everything_in_one_step() -> None:
    records = list(autodiff_records(HIDDEN, 0))
    assert len(records) == 1 and records[0].step == 0 and records[0].metrics["check/gradcheck"] == 1.0


def finals(relatedness: float, seed: int, pretrain_steps: int = 300, finetune_steps: int = 200) -> dict[str, float]:
    transfer = Transfer(relatedness, 64, seed)
    list(transfer.pretrain(pretrain_steps, 3e-3, pretrain_steps))
    return {arm: [r for r in transfer.finetune(arm, finetune_steps, 1e-2, finetune_steps)
                  if isinstance(r, StepRecord)][-1].metrics["test_accuracy"] for arm in ARMS}


def test_last_layer_only_trains_the_head_and_leaves_the_pretrained_body_as_it_was() -> None:
    transfer = Transfer(1.0, 32, 0)
    list(transfer.pretrain(20, 3e-3, 20))
    body = [p.detach().clone() for p in transfer.pretrained[:-1].parameters()]
    records = [r for r in transfer.finetune("last layer only", 10, 1e-2, 10) if isinstance(r, StepRecord)]
    assert records[-1].metrics["trained_weights"] == 64 * 4 + 4
    assert all(torch.equal(a, b) for a, b in zip(body, transfer.pretrained[:-1].parameters())), "the pretrained net moved"


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_pretrained_features_help_a_related_task_and_hurt_an_unrelated_one(seed: int) -> None:
    """relatedness 1: last layer only beats scratch by 0.08-0.16; relatedness 0: loses to it by 0.15-0.33 (seeds 0-4)."""
    related, unrelated = finals(1.0, seed), finals(0.0, seed)
    gain = related["last layer only"] - related["from scratch"]
    loss = unrelated["from scratch"] - unrelated["last layer only"]
    assert gain > 0.04, f"related: last layer {related['last layer only']:.3f} vs scratch {related['from scratch']:.3f}"
    assert loss > 0.08, f"unrelated: last layer {unrelated['last layer only']:.3f} vs scratch {unrelated['from scratch']:.3f}"
