"""Optimizers, asserted: AdamW's decoupled decay identity, momentum against SGD at the same lr,
the exact stability edge of gradient descent on a quadratic and each momentum method's own edge
(against torch's SGD), and Adam's sign-sized first step — all through torch.optim's own
optimizers on the engine's arms."""
import math

import numpy as np
import pytest
import torch

from engines.loop.records import Diverged, StepRecord
from engines.supervised.optimizers import idle_weight_arm, lambda_max, surface_arm, surface_fn
from scenarios import get_scenario
from scenarios.optimizers.figures import stability_edge, surface_values
from scenarios.records import Records

SCENARIO = get_scenario("optimizers")


def records_of(arm) -> list[StepRecord | Diverged]:
    return [item for item in arm if item is not None]


def last_loss(kind: str, lr: float, steps: int = 200, kappa: float = 100.0, momentum: float = 0.9) -> float:
    final = records_of(surface_arm(kind, "quadratic", kappa, lr, momentum, 0.0, steps))[-1]
    return math.inf if isinstance(final, Diverged) else final.metrics["loss"]


@pytest.mark.parametrize("lr, weight_decay", [(0.01, 0.1), (0.1, 0.1), (0.05, 0.5)])
def test_adamw_weight_follows_one_minus_lr_lambda_to_the_t_and_adam_l2_does_not(lr: float, weight_decay: float) -> None:
    """A weight with zero task gradient: AdamW gives p_t = (1 − lr·λ)^t exactly; Adam + L2 does not."""
    adamw = records_of(idle_weight_arm("adamw", lr, weight_decay, 100))
    worst = max(abs(r.metrics["weight"] - r.metrics["closed_form"]) / r.metrics["closed_form"] for r in adamw)
    assert worst < 1e-6, f"AdamW vs (1 − lr·λ)^t: largest relative error {worst:.2e}"
    closed = adamw[-1].metrics["closed_form"]
    l2 = records_of(idle_weight_arm("adam_l2", lr, weight_decay, 100))[-1].metrics["weight"]
    assert abs(l2 - closed) > 0.3 * closed, f"Adam + L2 {l2:.4f} vs (1 − lr·λ)^t {closed:.4f}"


def test_physics_md_decay_numbers() -> None:
    """lr 0.01, λ 0.1, 100 steps: AdamW 0.9048 = 0.999^100; Adam + L2 0.2244 (PHYSICS.md)."""
    adamw = records_of(idle_weight_arm("adamw", 0.01, 0.1, 101))[-1].metrics["weight"]
    l2 = records_of(idle_weight_arm("adam_l2", 0.01, 0.1, 101))[-1].metrics["weight"]
    assert adamw == pytest.approx(0.999 ** 100, rel=1e-12) and adamw == pytest.approx(0.9048, abs=1e-4), adamw
    assert l2 == pytest.approx(0.2244, abs=1e-3), f"Adam + L2 after 100 steps {l2:.4f}"


@pytest.mark.parametrize("lr", [0.005, 0.01, 0.015, 0.019])
def test_momentum_reaches_a_lower_loss_than_sgd_at_the_same_lr_on_kappa_100(lr: float) -> None:
    """κ = 100, 200 steps from (−2, 0.2): at lr 0.01 SGD ends near 3.7e-2, momentum 0.9 near 5e-10."""
    sgd, momentum = last_loss("sgd", lr), last_loss("momentum", lr)
    assert momentum < 1e-3 * sgd, f"lr {lr}: momentum {momentum:.2e} vs SGD {sgd:.2e}"


@pytest.mark.parametrize("kappa", [10.0, 100.0, 1000.0])
def test_sgd_converges_below_two_over_lambda_max_and_diverges_above(kappa: float) -> None:
    """y ← (1 − lr·κ)·y: 1% under 2/κ the loss falls, 1% over it grows (1000 steps: ×1e-4 vs ×1e4)."""
    start = 0.5 * (4.0 + 4.0)  # both coordinates add 2 at the start
    below, above = last_loss("sgd", 0.99 * 2 / kappa, 1000, kappa), last_loss("sgd", 1.01 * 2 / kappa, 1000, kappa)
    assert below < start and above > 1e3 * start, f"κ {kappa}: below the edge {below:.2e}, above {above:.2e}"


def test_at_the_edge_the_steep_coordinate_flips_sign_with_constant_size() -> None:
    """κ = 128, lr = 1/64 (lr·κ = 2 exactly in binary): y_t = (−1)^t y_0 to the last bit."""
    records = records_of(surface_arm("sgd", "quadratic", 128.0, 1 / 64, 0.0, 0.0, 50))
    ys = np.array([r.metrics["y"] for r in records])
    expected = ys[0] * (-1.0) ** np.arange(len(ys))
    assert np.abs(ys - expected).max() <= 1e-15 * abs(ys[0]), f"largest drift {np.abs(ys - expected).max():.2e}"


def test_nesterov_has_a_narrower_stable_range_than_heavy_ball_momentum() -> None:
    """β = 0.9, κ = 100: Nesterov stable iff lr·κ < 2(1+β)/(1+2β) ≈ 1.357, heavy ball iff < 2(1+β) = 3.8."""
    assert last_loss("nesterov", 0.0132, 2000) < 1e-6 and last_loss("nesterov", 0.0140, 2000) > 1e3
    assert last_loss("momentum", 0.037, 2000) < 1e-6 and last_loss("momentum", 0.039, 2000) > 1e3


@pytest.mark.parametrize("surface", ["quadratic", "rosenbrock"])
def test_adams_first_step_is_lr_times_sign_of_the_gradient_per_coordinate(surface: str) -> None:
    """Δ = −lr·g/(|g| + ε): each coordinate moves by lr (to 1e-6) against its gradient's sign."""
    lr = 0.1
    first, second = records_of(surface_arm("adam", surface, 100.0, lr, 0.9, 0.0, 2))
    point = torch.tensor([first.metrics["x"], first.metrics["y"]], dtype=torch.float64, requires_grad=True)
    surface_fn(surface, 100.0)(point).backward()
    step = np.array([second.metrics["x"] - first.metrics["x"], second.metrics["y"] - first.metrics["y"]])
    expected = -lr * np.sign(point.grad.numpy())
    assert np.abs(step - expected).max() < 1e-6 * lr, f"{surface}: first step {step} vs −lr·sign(g) {expected}"


def test_lambda_max_is_kappa_on_the_quadratic_and_1001_6_on_rosenbrock() -> None:
    rosenbrock = 501 + math.hypot(301, 400)  # eigenvalues of [[802, −400], [−400, 200]]
    assert lambda_max("quadratic", 37.0) == pytest.approx(37.0, rel=1e-12)
    assert lambda_max("rosenbrock", 1.0) == pytest.approx(rosenbrock, rel=1e-12), lambda_max("rosenbrock", 1.0)


@pytest.mark.parametrize("surface", ["quadratic", "rosenbrock"])
def test_the_drawn_contours_are_the_trained_loss(surface: str) -> None:
    """The figure's numpy surface equals the engine's torch loss at random points."""
    points = np.random.default_rng(0).uniform(-2, 2, size=(50, 2))
    drawn = surface_values(surface, 30.0, points[:, 0], points[:, 1])
    trained = [surface_fn(surface, 30.0)(torch.tensor(p, dtype=torch.float64)).item() for p in points]
    assert np.allclose(drawn, trained, rtol=1e-12), surface


def test_the_default_run_says_what_the_issue_asserts() -> None:
    """Defaults (κ 100, lr 1/κ): momentum ends below SGD; AdamW's decay error below 1e-6; Adam's first step ≈ lr."""
    result = SCENARIO.run({"net_steps": 10})
    records, summary = Records(result.frame), result.summary
    assert records.last("SGD + momentum", "loss") < 1e-3 * records.last("SGD", "loss"), summary["headline"]
    assert summary["headline"]["AdamW decay vs (1 − lr·λ)^t, relative error"] < 1e-6, summary["headline"]
    assert all(abs(v - 1) < 1e-6 for v in summary["adam_first_step_over_lr"]), summary["adam_first_step_over_lr"]
    assert summary["lr_times_lambda_max"] == pytest.approx(1.0), summary["lr_times_lambda_max"]


def size_after(h: float, momentum: float, nesterov: bool, steps: int = 400) -> float:
    """torch's SGD on f(w) = ½w² (λ = 1, so lr·λ_max = h) from w = 1: |w| after `steps` (2% off an
    edge the slowest rate is 1 ± 0.04 per step: 400 steps take it past 1e3 or below 1e-3)."""
    w = torch.ones(1, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.SGD([w], lr=h, momentum=momentum, nesterov=nesterov)
    for _ in range(steps):
        w.grad = w.detach().clone()  # ∇½w² = w
        optimizer.step()
    return w.abs().item()


@pytest.mark.parametrize("momentum", [0.3, 0.9])
@pytest.mark.parametrize("arm, nesterov", [("SGD", False), ("SGD + momentum", False), ("Nesterov", True)])
def test_each_methods_stability_edge_is_where_torch_sgd_starts_to_grow(arm: str, nesterov: bool, momentum: float) -> None:
    """The edge the page states per method (GD 2, heavy ball 2(1+μ), Nesterov 2(1+μ)/(1+2μ)): 2% below it
    torch's SGD shrinks w on a 1-D quadratic, 2% above it w grows."""
    edge = stability_edge(arm, momentum)
    mu = 0.0 if arm == "SGD" else momentum
    below, above = size_after(0.98 * edge, mu, nesterov), size_after(1.02 * edge, mu, nesterov)
    assert below < 1e-3 and above > 1e3, f"{arm}, μ {momentum}: edge {edge:.4f}; |w| {below:.2e} at 0.98×, {above:.2e} at 1.02×"


def test_the_page_says_each_methods_own_edge_at_the_issues_config() -> None:
    """Issue 33, κ 30, lr 0.05 (lr·λ_max = 1.5), μ 0.9: below plain GD's edge 2 and heavy ball's 3.8, past
    Nesterov's 1.36 — where Nesterov's loss grows to 10^45 — and no sentence calls 2 everyone's edge."""
    config = SCENARIO.validate({"seed": 5, "kappa": 30.0, "lr": 0.05, "net_steps": 10})
    frame = SCENARIO.run(config).frame
    text = SCENARIO.explain(frame, config).markdown()
    assert "SGD 1.5, below its edge 2;" in text, text
    assert "SGD + momentum 1.5, below its edge 2(1 + μ) = 3.8" in text, text
    assert "Nesterov 1.5, past its edge 2(1 + μ)/(1 + 2μ) = 1.36" in text, text
    assert "the stability edge of gradient descent on a quadratic is 2" not in text
    assert Records(frame).last("Nesterov", "loss") > 1e10, "Nesterov grows past its edge"


def test_adams_first_step_is_said_to_the_digits_it_has() -> None:
    """lr·|g|/(|g| + ε) is 1 − 5×10⁻⁹ of lr at |g| = 2: the page read '1.000000·lr'; three digits, 'exactly lr' at 1."""
    from scenarios.optimizers.figures import adam_sentence, first_step, lr_times
    records = Records(SCENARIO.run({"net_steps": 10}).frame)
    moved = [first_step("Adam", c)(records) for c in ("x", "y")]
    text = adam_sentence(records).text
    assert all(0 < 1 - v < 1e-6 for v in moved), f"first step ÷ lr {moved}: just short of 1"
    assert text.startswith("Adam's first step moved the point by 1.00·lr in x and 1.00·lr in y (") and "1.000000" not in text, text
    assert [lr_times(v) for v in (1.0, 0.9999999950000005, 0.5)] == ["exactly lr", "1.00·lr", "0.500·lr"]
