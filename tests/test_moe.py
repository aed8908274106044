"""Mixture of experts: the balancing loss's identity, the z-loss, capacity and drops, top-k
dispatch, collapse without balancing against balance with it, and the dense baselines' sizes."""
import math

import pytest
import torch

from engines.supervised.moe import (ArmSpec, Experts, MoELayer, balance_loss, build, capacity, dropped_fraction,
                                    kept_mask, parameter_count, z_loss)
from scenarios import get_scenario
from scenarios.base import ConfigError
from scenarios.moe.figures import AUX, DENSE_ACTIVE, DENSE_TOTAL, NO_AUX, TOP2
from scenarios.records import Records
from tests.sentence_checks import explained_and_holding

SCENARIO = get_scenario("moe")


@pytest.mark.parametrize("n_experts", [2, 8, 13])
def test_the_balancing_loss_is_exactly_alpha_at_perfect_balance(n_experts) -> None:
    even = torch.full((n_experts,), 1 / n_experts, dtype=torch.float64)
    aux = balance_loss(even, even, 0.01).item()
    assert abs(aux - 0.01) < 1e-12, f"E={n_experts}: aux {aux!r} at f = P = 1/E, expected 0.01"
    skew = torch.zeros(n_experts, dtype=torch.float64)
    skew[0] = 1.0
    assert balance_loss(skew, skew, 0.01).item() > 0.01 * (n_experts - 1e-9), "all on one expert: α·E expected"
    lean = even.clone()
    lean[0], lean[1] = lean[0] + 0.5 / n_experts, lean[1] - 0.5 / n_experts
    assert balance_loss(lean, lean, 0.01).item() > 0.01, f"uneven load: {balance_loss(lean, lean, 0.01).item()}"


def test_z_loss_is_the_mean_squared_logsumexp() -> None:
    logits = torch.tensor([[0.0, 1.0, 2.0], [3.0, -1.0, 0.5]], dtype=torch.float64)
    expected = sum(math.log(sum(math.exp(v) for v in row)) ** 2 for row in logits.tolist()) / 2
    assert abs(z_loss(logits).item() - expected) < 1e-12, f"{z_loss(logits).item()} vs {expected}"


def test_capacity_and_drops_on_a_known_routing() -> None:
    """6 tokens, 2 experts, top-1, factor 1: C = ⌈6/2⌉ = 3; expert 0 gets 5 tokens, so 2 are dropped."""
    choices = torch.tensor([[0], [0], [1], [0], [0], [0]])
    assert capacity(1.0, 6, 1, 2) == 3
    kept = kept_mask(choices, 2, 3)[:, 0].tolist()
    assert kept == [True, True, True, True, False, False], kept  # token order: the 4th and 5th of expert 0 go
    assert abs(dropped_fraction(choices, 2, 1.0) - 2 / 6) < 1e-9
    assert dropped_fraction(choices, 2, 2.0) == 0.0  # C = 6
    # first choices first: expert 0 fills with tokens 0-2, expert 1 takes token 3; then the second
    # choices: expert 1 takes tokens 0 and 1 (full at 3), token 2's and token 3's are dropped
    top2 = torch.tensor([[0, 1], [0, 1], [0, 1], [1, 0]])
    assert kept_mask(top2, 2, 3).tolist() == [[True, True], [True, True], [True, False], [True, False]]


def test_top_k_output_is_the_weighted_sum_of_the_chosen_experts() -> None:
    torch.manual_seed(0)
    for k in (1, 2):
        layer = MoELayer(6, 5, 4, k, capacity_factor=None).double()
        h = torch.randn(10, 6, dtype=torch.float64)
        out = layer(h)
        probs = layer.router(h).softmax(-1)
        explicit = h.clone()
        for t in range(10):
            top, chosen = probs[t].topk(k)
            gates = top if k == 1 else top / top.sum()
            for g, e in zip(gates, chosen):
                explicit[t] += g * layer.experts.one(int(e), h[t:t + 1])[0]
        err = (out - explicit).abs().max().item()
        assert err < 1e-12, f"top-{k}: |layer − explicit| = {err:.2e}"


def test_dropped_tokens_pass_on_the_residual_alone() -> None:
    torch.manual_seed(1)
    layer = MoELayer(6, 5, 4, 1, capacity_factor=0.25).double()  # C = ⌈0.25·12/4⌉ = 1 token per expert
    h = torch.randn(12, 6, dtype=torch.float64)
    out = layer(h)
    dropped = ~layer.routing.kept[:, 0]
    assert dropped.sum() >= 8, f"{int(dropped.sum())} dropped of 12"
    assert torch.equal(out[dropped], h[dropped]), "a dropped token must come out as it went in"


def test_dense_baselines_have_the_active_and_the_total_expert_parameters() -> None:
    e, h = 8, 16
    moe = build(ArmSpec(k=1), width=32, hidden=h, n_experts=e, capacity_factor=None, seed=0)
    active = build(ArmSpec(dense_hidden=h), width=32, hidden=h, n_experts=e, capacity_factor=None, seed=0)
    total = build(ArmSpec(dense_hidden=e * h), width=32, hidden=h, n_experts=e, capacity_factor=None, seed=0)
    experts = parameter_count(moe.mixer.experts)
    assert isinstance(moe.mixer.experts, Experts)
    assert parameter_count(active.mixer) * e == experts, f"{parameter_count(active.mixer)}·{e} vs {experts}"
    assert parameter_count(total.mixer) == experts, f"{parameter_count(total.mixer)} vs {experts}"


def run(**overrides) -> tuple[Records, dict]:
    frame, summary = SCENARIO.run(overrides)
    return Records(frame), summary


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_without_balancing_the_busiest_expert_takes_far_more_than_with_it(seed) -> None:
    records, summary = run(seed=seed)
    even = summary["even_share"]
    free, balanced = summary["top_share"][NO_AUX], summary["top_share"][AUX]
    ratio_free, ratio_balanced = free / even, balanced / even
    assert ratio_free > 3.0, f"seed {seed}: no balancing, busiest {free:.3f} = {ratio_free:.2f}× 1/E"
    assert ratio_balanced < 2.0, f"seed {seed}: balanced, busiest {balanced:.3f} = {ratio_balanced:.2f}× 1/E"
    assert ratio_free > 1.5 * ratio_balanced, f"seed {seed}: {ratio_free:.2f}× vs {ratio_balanced:.2f}×"
    for arm, drops in summary["dropped"].items():
        values = [drops[f] for f in ("1", "1.25", "2")]
        assert values[0] >= values[1] >= values[2], f"seed {seed}, {arm}: drops at 1/1.25/2 = {values}"
    assert summary["dropped"][NO_AUX]["1"] > summary["dropped"][AUX]["1"], summary["dropped"]
    assert summary["parameters"][DENSE_TOTAL] == 8 * summary["parameters"][DENSE_ACTIVE], summary["parameters"]


@pytest.mark.parametrize("field, value", [("n_experts", 1), ("alpha", 5.0), ("batch_size", 8), ("lr", 1.0)])
def test_bad_input_is_refused_naming_the_field(field, value) -> None:
    with pytest.raises(ConfigError) as refused:
        SCENARIO.validate({field: value})
    assert field in str(refused.value), str(refused.value)


@pytest.mark.parametrize("overrides", [{"seed": 5, "steps": 40, "n_experts": 4, "clusters": 6, "alpha": 0.5},
                                       {"seed": 9, "steps": 30, "n_experts": 12, "expert_hidden": 8, "batch_size": 128,
                                        "z_coef": 1e-4, "lr": 0.01}])
def test_every_claim_holds_off_the_defaults(overrides) -> None:
    records, _ = run(**overrides)
    explanation = explained_and_holding(SCENARIO, overrides, records)
    assert TOP2 in explanation.markdown() and DENSE_ACTIVE in explanation.markdown()


def test_the_balance_line_says_1_on_its_axis_and_the_load_legend_clears_the_step_titles() -> None:
    """The balance chart draws the loss ÷ α: its reference line at 1 is labelled 1 (it said "exactly α", the
    loss's own value). The load chart's legend hangs from 0.3 of the plot's height below it: at −0.22, anchored
    at its bottom, its expert rows covered the three "step" titles."""
    from tests.tiny_runs import tiny_frame
    figures = SCENARIO.figures(tiny_frame("moe"), SCENARIO.validate(SCENARIO.tiny))
    balance = figures["balance"]
    line = next(shape for shape in balance.layout.shapes if shape.y0 == shape.y1)
    label = str(balance.layout.annotations[0].text)
    assert line.y0 == 1 and f": {line.y0:g} " in label and "exactly α" not in label, \
        f"the line at y = {line.y0} is labelled {label!r}"
    legend = figures["load"].layout.legend
    assert legend.orientation == "h" and legend.yanchor == "top" and legend.y <= -0.3, \
        f"load legend at y = {legend.y}, anchored at its {legend.yanchor}"
