"""Positional encodings, asserted: RoPE's identities in float64, θ_i, the sinusoids, exact
permutation equivariance without positions, the order-free optimum, and the task — solved in
length by every scheme, never beaten without positions, carried to longer sequences by RoPE.

Thresholds were calibrated over seeds 0-5 (ranges in the comments).
"""
import math

import pytest
import torch

from engines.sequence.attention import rope_theta, rotate, sinusoidal
from engines.sequence.positions import (IGNORE, PositionalTransformer, ShiftTask, equivariance_error, order_free_accuracy,
                               rope_records)
from scenarios import get_scenario
from scenarios.positions.figures import LEARNED, LENGTH_PREFIX, NONE, ORDER_FREE, ROPE, SCHEMES, SINUSOIDAL
from scenarios.records import Records

SCENARIO = get_scenario("positions")


def random_qk(dim: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(2, dim, generator=generator, dtype=torch.float64)


@pytest.mark.parametrize("dim, base", [(8, 1e4), (16, 1e4), (64, 1e4), (16, 100.0)])
def test_rope_dot_product_depends_on_m_minus_n_only(dim: int, base: float) -> None:
    """⟨R_m q, R_n k⟩ = ⟨R_(m−n) q, k⟩ for m, n < 64 in float64, to 1e-12 (measured ≤ 4e-15 relative)."""
    q, k = random_qk(dim, dim)
    positions = torch.arange(64)
    dots = rotate(q.expand(64, dim), positions, base) @ rotate(k.expand(64, dim), positions, base).T  # (m, n)
    offsets = torch.arange(-63, 64)
    reference = rotate(q.expand(len(offsets), dim), offsets, base) @ k  # ⟨R_δ q, k⟩
    expected = reference[(positions[:, None] - positions[None, :]) + 63]
    error = ((dots - expected).abs().max() / (q.norm() * k.norm())).item()
    assert error < 1e-12, f"d {dim}, base {base:g}: max relative |⟨R_m q, R_n k⟩ − f(m − n)| = {error:.2e}"


def test_rope_preserves_norms_and_is_a_rotation() -> None:
    """‖R_m x‖ = ‖x‖ and R_m R_n = R_(m+n), float64, to 1e-12."""
    x = torch.randn(50, 32, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    positions = torch.arange(50) * 7 - 100
    rotated = rotate(x, positions)
    norm_error = (rotated.norm(dim=1) - x.norm(dim=1)).abs().max().item()
    assert norm_error < 1e-12, f"norm changed by {norm_error:.2e}"
    twice = rotate(rotate(x, positions), positions + 3)
    once = rotate(x, 2 * positions + 3)
    assert (twice - once).abs().max().item() < 1e-12, "R_m R_n ≠ R_(m+n)"


def test_rope_theta_is_base_to_the_minus_two_i_over_d() -> None:
    for dim in (4, 12, 64):
        theta = rope_theta(dim).tolist()
        expected = [10000 ** (-2 * i / dim) for i in range(dim // 2)]
        assert all(abs(a - b) <= 1e-15 * b for a, b in zip(theta, expected)), f"d {dim}: {theta} vs {expected}"


def test_rope_is_multiplication_by_e_to_the_i_m_theta() -> None:
    """Our pairwise rotation equals torch's complex view: (x_2i + i x_2i+1)·e^(i m θ_i) (RoFormer eq. 34)."""
    x = torch.randn(20, 16, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    positions = torch.arange(20)
    angles = positions[:, None].double() * rope_theta(16)
    complex_form = torch.view_as_real(torch.view_as_complex(x.reshape(20, 8, 2)) * torch.polar(torch.ones_like(angles), angles))
    assert (rotate(x, positions) - complex_form.reshape(20, 16)).abs().max().item() < 1e-12


def test_sinusoidal_encoding_follows_the_formula() -> None:
    pe = sinusoidal(50, 24)
    for p in (0, 7, 49):
        for i in (0, 3, 11):
            angle = p / 10000 ** (2 * i / 24)
            assert abs(pe[p, 2 * i] - math.sin(angle)) < 1e-6 and abs(pe[p, 2 * i + 1] - math.cos(angle)) < 1e-6


def test_rope_records_show_the_relative_property() -> None:
    metrics = next(rope_records(12, 32, 1e4, seed=0)).metrics
    assert metrics["rope_relative_error"] < 1e-12 and metrics["rope_norm_error"] < 1e-12, metrics["rope_relative_error"]


@pytest.mark.parametrize("layers", [1, 2])
def test_without_positions_permuting_the_input_permutes_the_output(layers: int) -> None:
    """Float64: max |f(Px) − P f(x)| ≤ 1e-12 without positions; every scheme breaks it by > 0.01."""
    x = torch.randint(0, 16, (16, 10), generator=torch.Generator().manual_seed(3))
    for scheme in SCHEMES.values():
        model = PositionalTransformer(scheme, layers=layers, heads=2, seed=4).double()
        with torch.no_grad():
            errors = [equivariance_error(model, x, seed).item() for seed in range(5)]
        if scheme == "none":
            assert max(errors) < 1e-12, f"no positions, {layers} layer(s): {max(errors):.2e}"
        else:
            assert min(errors) > 1e-2, f"{scheme}: permuting changes the output by only {min(errors):.2e}"


def test_order_free_accuracy_credits_the_commonest_other_token() -> None:
    """x = [0, 0, 1], offset 1: position 1's target 0 ties with 1 in the bag {0, 1} (½); position 2's
    bag without x_2 is {0, 0}, so 0, right (1). Mean ¾."""
    x = torch.tensor([[0, 0, 1]])
    y = torch.tensor([[IGNORE, 0, 0]])
    assert order_free_accuracy(x, y) == pytest.approx(0.75)


def test_the_shift_task_targets_the_token_offset_places_back() -> None:
    x, y = ShiftTask(offset=2, seed=0).batch(4, 9)
    assert (y[:, :2] == IGNORE).all() and torch.equal(y[:, 2:], x[:, :-2])


def position_run(seed: int, **overrides) -> tuple[Records, int]:
    config = SCENARIO.validate({"seed": seed, **overrides})
    return Records(SCENARIO.run(config).frame), config.train_length


def accuracy(records: Records, arm: str, length: int) -> float:
    return records.last(arm, f"{LENGTH_PREFIX}{length:02d}")


def assert_position_physics(records: Records, length: int, seed: int) -> None:
    """Seeds 0-5 (length 8, 200 steps): every scheme 99.0-100% in length; no positions 24-27% against the
    order-free 26-29% (at most +0.5 points above); at 2× length RoPE 100%, learned 50-51%; at 4× RoPE 95-99%."""
    for arm in (LEARNED, SINUSOIDAL, ROPE):
        assert accuracy(records, arm, length) >= 0.95, f"seed {seed}: {arm} in length {accuracy(records, arm, length):.3f}"
    none, guess = accuracy(records, NONE, length), accuracy(records, ORDER_FREE, length)
    assert none <= guess + 0.03, f"seed {seed}: no positions {none:.3f} beats the order-free guess {guess:.3f}"
    assert accuracy(records, ROPE, 2 * length) >= 0.95, f"seed {seed}: RoPE at 2× {accuracy(records, ROPE, 2 * length):.3f}"
    assert accuracy(records, LEARNED, 2 * length) <= 0.7, f"seed {seed}: learned at 2× {accuracy(records, LEARNED, 2 * length):.3f}"
    assert records.last(NONE, "equivariance_error") < 1e-5, f"no positions: {records.last(NONE, 'equivariance_error'):.2e}"


def test_every_scheme_solves_the_task_and_only_rope_carries_it_to_twice_the_length() -> None:
    assert_position_physics(*position_run(0), 0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_position_physics_holds_on_other_seeds(seed: int) -> None:
    assert_position_physics(*position_run(seed), seed)
