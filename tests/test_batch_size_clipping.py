"""Batch size and clipping, asserted: mini-batch gradient variance ∝ 1/B, the clip identity of
clip_grad_norm_, the unclipped RNN diverging where the clipped one stays finite, and the cosine
schedule's closed form. Thresholds calibrated over seeds 0-5 (measured values in the docstrings)."""
import math

import numpy as np
import pytest
import torch
from torch import nn

from engines.loop.records import Diverged
from engines.supervised.clipping import Clipper, clip_arm
from engines.supervised.gradient_noise import batch_arm, make_model, noise_records, per_example_grads
from scenarios import get_scenario
from scenarios.records import Records

SCENARIO = get_scenario("batch-size-clipping")


def items(arm) -> list:
    return [item for item in arm if item is not None]


@pytest.mark.parametrize("seed", range(3))
def test_gradient_variance_falls_as_one_over_batch_size(seed: int) -> None:
    """log E‖ĝ_B − G‖² against log B over B = 8…1024: slope −1 ± 0.15 (seeds 0-5 measured −0.974…−1.003),
    and B·variance/tr(Σ) within [0.75, 1.3] at every B (measured 0.876…1.14)."""
    records = list(noise_records(make_model(seed), seed + 3))
    trace = records[0].metrics["trace_cov"]
    sizes = np.array([r.step for r in records[1:]], dtype=float)
    variance = np.array([r.metrics["grad_var"] for r in records[1:]])
    slope = np.polyfit(np.log(sizes), np.log(variance), 1)[0]
    assert abs(slope + 1) < 0.15, f"seed {seed}: slope {slope:.3f}"
    ratio = variance * sizes / trace
    assert ratio.min() > 0.75 and ratio.max() < 1.3, f"seed {seed}: B·var/tr(Σ) from {ratio.min():.3f} to {ratio.max():.3f}"
    assert records[0].metrics["noise_scale"] == pytest.approx(trace / records[0].metrics["grad_sq"], rel=1e-12)


def test_vmap_per_example_gradients_equal_one_backward_per_example() -> None:
    """torch.func's per-example gradients are the gradients of each example's own loss (to 1e-6)."""
    model = make_model(0)
    x, y = torch.randn(6, 16, generator=torch.Generator().manual_seed(1)), torch.tensor([0, 1, 2, 3, 0, 1])
    batched = per_example_grads(model, x, y)
    for i in range(len(x)):
        model.zero_grad()
        nn.functional.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
        single = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        assert torch.allclose(batched[i], single, atol=1e-6, rtol=1e-5), f"example {i}: {(batched[i] - single).abs().max():.2e}"


@pytest.mark.parametrize("scale", [1e-3, 0.3, 1.0, 7.0, 1e4])
def test_after_clip_grad_norm_the_global_norm_is_min_of_norm_and_c(scale: float) -> None:
    """Gradients of global norm ‖g‖ = scale·‖g₀‖: after clipping at c = 1, the norm is min(‖g‖, c) to 1e-5."""
    generator = torch.Generator().manual_seed(0)
    params = [nn.Parameter(torch.zeros(shape)) for shape in [(8, 4), (4,), (3, 8)]]
    for p in params:
        p.grad = torch.randn(p.shape, generator=generator) * scale
    before, after = Clipper(params, "norm", 1.0).clip()
    assert abs(after.item() - min(before.item(), 1.0)) < 1e-5 * max(1.0, min(before.item(), 1.0)), (before, after)
    direction = torch.cat([p.grad.reshape(-1) for p in params]) / after
    assert direction.norm().item() == pytest.approx(1.0, rel=1e-6)


def test_clip_grad_value_clamps_every_coordinate() -> None:
    params = [nn.Parameter(torch.zeros(50))]
    params[0].grad = torch.linspace(-3, 3, 50)
    Clipper(params, "value", 0.5).clip()
    assert params[0].grad.abs().max().item() == pytest.approx(0.5) and params[0].grad[25].item() == pytest.approx(3 / 49)


@pytest.mark.parametrize("seed", range(3))
def test_radius_1_2_over_50_steps_diverges_unclipped_and_stays_finite_clipped(seed: int) -> None:
    """Linear RNN, ρ 1.2, T 50, SGD lr 0.1: unclipped diverges (seeds 0-2: at step 1); both clipped arms
    finish finite and below their first loss (seeds 0-2: ~1e8 → 0.16…0.86 in 100 steps)."""
    unclipped = items(clip_arm("none", 0.0, 1.2, 50, "linear", 0.1, 100, seed))
    assert isinstance(unclipped[-1], Diverged), f"seed {seed}: unclipped ended with {unclipped[-1]}"
    for mode, threshold in (("norm", 1.0), ("value", 0.1)):
        records = items(clip_arm(mode, threshold, 1.2, 50, "linear", 0.1, 100, seed, log_every=5))
        last = records[-1]
        assert not isinstance(last, Diverged), f"seed {seed} {mode}: {last}"
        assert math.isfinite(last.metrics["loss"]) and last.metrics["loss"] < 1e-3 * records[0].metrics["loss"], \
            f"seed {seed} {mode}: loss {records[0].metrics['loss']:.3g} → {last.metrics['loss']:.3g}"


def test_the_recorded_clip_coefficient_and_norms_obey_the_identity() -> None:
    """In a run: clipped_norm = min(grad_norm, c) at every logged step (to 1e-5), coefficient = their ratio."""
    for record in items(clip_arm("norm", 1.0, 1.2, 30, "linear", 0.1, 40, 0)):
        m = record.metrics
        assert abs(m["clipped_norm"] - min(m["grad_norm"], 1.0)) < 1e-5, m
        assert m["clip_coef"] == pytest.approx(m["clipped_norm"] / m["grad_norm"], rel=1e-6)


def test_cosine_annealing_equals_its_closed_form_with_a_floor() -> None:
    """CosineAnnealingLR: η_t = η_min + ½(η_max − η_min)(1 + cos(πt/T)) for t = 0…T."""
    weight = nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weight], lr=0.3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=40, eta_min=0.01)
    for t in range(41):
        expected = 0.01 + 0.5 * (0.3 - 0.01) * (1 + math.cos(math.pi * t / 40))
        assert optimizer.param_groups[0]["lr"] == pytest.approx(expected, rel=1e-12, abs=1e-15), t
        weight.grad = torch.zeros(1)
        optimizer.step()
        scheduler.step()


@pytest.mark.parametrize("decay, warmup", [("cosine", 0), ("cosine", 10)])
def test_every_recorded_rate_is_the_closed_form(decay: str, warmup: int) -> None:
    """The rate each step used (train's `lr`) equals lr_at(...) in both views, to 1e-12."""
    arms = [batch_arm(32, 0.1, 60, 0, decay=decay, warmup_steps=warmup),
            clip_arm("norm", 1.0, 1.0, 10, "tanh", 0.1, 60, 0, decay=decay, warmup_steps=warmup)]
    for arm in arms:
        for record in items(arm):
            assert record.metrics["lr"] == pytest.approx(record.metrics["lr_closed_form"], rel=1e-12, abs=1e-15)


def test_the_default_run_shows_it() -> None:
    """Defaults: slope within −1 ± 0.15, the unclipped RNN diverges, both clipped arms end finite."""
    result = SCENARIO.run({"steps": 20})
    records, headline = Records(result.frame), result.summary["headline"]
    assert abs(headline["gradient variance slope vs B (at init)"] + 1) < 0.15, headline
    assert records.diverged_at("no clipping") is not None, headline
    for arm in ("clip_grad_norm_", "clip_grad_value_"):
        assert records.diverged_at(arm) is None and math.isfinite(records.last(arm, "loss")), arm


def test_no_point_at_or_below_zero_is_drawn_on_a_log_axis() -> None:
    """Step 0 has seen 0 examples: on the log x axis plotly would draw a flat line from the left edge
    to the first real point, so every figure's log axes hold only positive values."""
    result = SCENARIO.run(SCENARIO.tiny)
    records = Records(result.frame)
    assert records.at("B=1024", "examples", 0) == 0, "the run logs step 0 (0 examples): the case this test is for"
    figures = SCENARIO.figures(result.frame, SCENARIO.validate(SCENARIO.tiny))
    for name in figures:
        fig = figures[name]
        for trace in fig.data:
            for letter in "xy":
                axis = fig.layout[letter + "axis" + (getattr(trace, letter + "axis") or letter)[1:]]
                values = getattr(trace, letter) if getattr(trace, letter) is not None else ()
                bad = [v for v in values if isinstance(v, (int, float)) and v <= 0]
                assert axis.type != "log" or not bad, f"{name}: {trace.name} puts {bad[:3]} on the log {letter} axis"
    for trace in figures["loss_vs_examples"].data:
        second = records.series(trace.name, "eval_loss").index[1]  # the first logged step after step 0
        first_seen = records.at(trace.name, "examples", second)
        assert trace.x[0] == first_seen > 0, f"{trace.name}: first point at {trace.x[0]}, step {second} saw {first_seen}"
