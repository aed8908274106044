"""REINFORCE: the corridor's Bellman solve against its closed form, the estimator's mean against the
exact gradient (autograd through the solve), the baseline's variance, convergence to the solved
optimum at several seeds and step sizes, and the bandit's MLP against its exact optimum."""
import math

import pytest
import torch

from engines.rl.reinforce import Uniforms, gradient_samples, optimum, values
from engines.rl.reinforce_bandit import make_bandit
from scenarios import get_scenario
from scenarios.base import ConfigError
from scenarios.records import Records
from tests.sentence_checks import explained_and_holding
from scenarios.reinforce.claims import P_TOLERANCE, REACH, V_TOLERANCE
from scenarios.reinforce.figures import (BANDIT_BASE, BANDIT_LINEAR, BANDIT_PLAIN, CORRIDOR_BASE, CORRIDOR_FAST,
                                         CORRIDOR_PLAIN)

SCENARIO = get_scenario("reinforce")
P_STAR, V_STAR = 2 - math.sqrt(2), -(6 + 4 * math.sqrt(2))


def test_the_bellman_solve_matches_the_closed_form_and_its_maximum() -> None:
    """v(S) = (2p − 4)/(p(1 − p)) at every p, and the grid + golden-section maximum is 2 − √2, −(6 + 4√2)."""
    p = torch.tensor([0.05, 0.3, 0.5, P_STAR, 0.9], dtype=torch.float64)
    solved = values(p)
    closed = (2 * p - 4) / (p * (1 - p))
    err = (solved[:, 0] - closed).abs().max().item()
    assert err < 1e-9, f"|solve − closed form| = {err:.2e}: {solved[:, 0].tolist()} vs {closed.tolist()}"
    v0, v1, v2 = solved.T
    residual = max((v0 - (-1 + p * v1 + (1 - p) * v0)).abs().max().item(),
                   (v1 - (-1 + p * v0 + (1 - p) * v2)).abs().max().item(), (v2 - (-1 + (1 - p) * v1)).abs().max().item())
    assert residual < 1e-9, f"Bellman residual {residual:.2e}"
    p_star, v_star = optimum()
    assert abs(p_star - P_STAR) < 1e-6 and abs(v_star - V_STAR) < 1e-9, f"p* {p_star:.9f}, v* {v_star:.9f}"


@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_reinforce_estimates_the_exact_gradient_with_and_without_a_baseline(p) -> None:
    """The mean per-episode estimate matches ∂v(S)/∂θ_right from autograd through the solve (within 4
    standard errors); the exact v_π as baseline keeps the mean and lowers the variance."""
    theta = torch.tensor([math.log(p / (1 - p)), 0.0], dtype=torch.float64, requires_grad=True)
    values(torch.softmax(theta, 0)[0:1])[0, 0].backward()
    exact = theta.grad[0].item()
    table = values(torch.tensor([p]))[0].tolist()
    count = 3000
    out = gradient_samples(theta.detach(), table, Uniforms(11), count)
    for kind in ("plain", "baseline"):
        se = math.sqrt(out[f"grad_var/{kind}"] / 2 / count)  # the two components are ±c: half the total variance each
        gap = abs(out[f"grad_mean/{kind}"] - exact)
        assert gap < 4 * se, f"p={p}, {kind}: mean {out[f'grad_mean/{kind}']:.3f} vs exact {exact:.3f} (se {se:.3f})"
    ratio = out["grad_var/plain"] / out["grad_var/baseline"]
    assert ratio > 1.5, f"p={p}: variance without/with the exact v_π baseline {ratio:.2f}"


def test_the_bandit_optimum_and_the_uniform_policy_are_exact_sums() -> None:
    for actions in (2, 4, 7):
        bandit = make_bandit(actions, 3)
        uniform = bandit.expected(torch.full_like(bandit.means, 1 / actions))
        assert abs(uniform - 0.5) < 1e-6, f"K={actions}: uniform policy {uniform}"
        best = bandit.expected(torch.nn.functional.one_hot(bandit.means.argmax(1), actions).float())
        assert abs(best - bandit.optimum) < 1e-6 and bandit.optimum > 0.7, f"K={actions}: {best} vs {bandit.optimum}"


def run(**overrides) -> tuple[Records, dict]:
    frame, summary = SCENARIO.run(overrides)
    return Records(frame), summary


SMALL = {"episodes": 600, "bandit_steps": 80, "bandit_batch": 32, "hidden": 32}


def test_a_short_run_shows_the_baseline_lowering_the_variance() -> None:
    """Fast version of the slow tests: 600 episodes, seed 4: the baseline arm's variance ratio and the bandit's rise."""
    records, summary = run(seed=4, **SMALL)
    ratio = summary["variance_ratio"][CORRIDOR_BASE]
    assert ratio > 1.5, f"median variance without/with the baseline {ratio:.2f}"
    reached = {arm: summary["corridor"][arm]["reached"] for arm in (CORRIDOR_PLAIN, CORRIDOR_BASE)}
    assert 0 <= reached[CORRIDOR_BASE] < 200, reached
    assert summary["bandit"][BANDIT_BASE] > summary["bandit"][BANDIT_LINEAR], summary["bandit"]


@pytest.mark.slow
@pytest.mark.parametrize("overrides", [{"seed": 0}, {"seed": 1}, {"seed": 2}, {"seed": 3, "lr_policy": 2 ** -10},
                                       {"seed": 5, "init_right": 0.2, "lr_value": 2 ** -4}])
def test_reinforce_converges_to_the_solved_optimum_and_the_baseline_gets_there_sooner(overrides) -> None:
    records, summary = run(**overrides)
    assert abs(summary["p_star"] - P_STAR) < 1e-6 and abs(summary["v_star"] - V_STAR) < 1e-9, summary
    for arm in (CORRIDOR_PLAIN, CORRIDOR_BASE):
        end = summary["corridor"][arm]
        assert abs(end["p_right"] - P_STAR) <= P_TOLERANCE, f"{overrides} {arm}: last-quarter P(right) {end['p_right']:.3f}"
        assert end["v_start"] >= V_STAR - V_TOLERANCE, f"{overrides} {arm}: last-quarter v(S) {end['v_start']:.2f}"
    plain, based = summary["corridor"][CORRIDOR_PLAIN]["reached"], summary["corridor"][CORRIDOR_BASE]["reached"]
    assert 0 <= based < plain, f"{overrides}: reached v* − {REACH} at episode {based} (baseline) vs {plain}"
    assert summary["variance_ratio"][CORRIDOR_BASE] > 1.5, f"{overrides}: {summary['variance_ratio']}"


@pytest.mark.slow
def test_at_the_same_step_size_the_baseline_keeps_the_policy_closer_to_the_optimum() -> None:
    """α_θ = 2⁻⁹ with and without the learned baseline, seeds 0-5: the last quarter's mean v(S) is higher with it
    at every seed (measured 2026-12-05 at seeds 0-9: −11.76…−12.07 with, −12.02…−12.95 without)."""
    from engines.rl.reinforce import CorridorArm, train_corridor

    def last_quarter_v(spec: CorridorArm, seed: int) -> float:
        logged = [r.metrics for r in train_corridor(spec, 2000, 0.05, 20, seed) if r is not None and r.step >= 1500]
        return sum(m["window/v_start"] for m in logged) / len(logged)
    pairs = [(last_quarter_v(CorridorArm(2 ** -9, 2 ** -6), s), last_quarter_v(CorridorArm(2 ** -9), s)) for s in range(6)]
    assert all(a > b for a, b in pairs), f"(with, without) per seed: {pairs}"


@pytest.mark.slow
@pytest.mark.parametrize("overrides", [{"seed": 0}, {"seed": 1}, {"seed": 2, "bandit_actions": 3},
                                       {"seed": 3, "bandit_lr": 0.02, "hidden": 32}])
def test_the_mlp_policy_nears_the_bandit_optimum_and_the_linear_one_does_not(overrides) -> None:
    records, summary = run(episodes=200, **overrides)
    best, uniform = summary["bandit_optimum"], summary["bandit_uniform"]
    closed = {arm: (summary["bandit"][arm] - uniform) / (best - uniform) for arm in (BANDIT_PLAIN, BANDIT_BASE, BANDIT_LINEAR)}
    assert closed[BANDIT_PLAIN] > 0.5 and closed[BANDIT_BASE] > 0.5, f"{overrides}: share of the gap closed {closed}"
    assert closed[BANDIT_LINEAR] < 0.5 and closed[BANDIT_LINEAR] < min(closed[BANDIT_PLAIN], closed[BANDIT_BASE]), \
        f"{overrides}: {closed}"


@pytest.mark.parametrize("field, value", [("episodes", 50), ("lr_policy", 0.1), ("lr_value", 2.0), ("init_right", 1.0),
                                          ("bandit_actions", 1)])
def test_bad_input_is_refused_naming_the_field(field, value) -> None:
    with pytest.raises(ConfigError) as refused:
        SCENARIO.validate({field: value})
    assert field in str(refused.value), str(refused.value)


@pytest.mark.parametrize("overrides", [{"seed": 7, "episodes": 400, "lr_plain": 2 ** -9, "bandit_steps": 40,
                                        "bandit_actions": 3, "hidden": 16},
                                       {"seed": 12, "episodes": 300, "init_right": 0.9, "lr_value": 0.2,
                                        "bandit_steps": 30, "bandit_batch": 16, "bandit_lr": 0.05}])
def test_every_claim_holds_off_the_defaults(overrides) -> None:
    records, _ = run(**overrides)
    explanation = explained_and_holding(SCENARIO, overrides, records)
    assert CORRIDOR_FAST in explanation.markdown() and BANDIT_LINEAR in explanation.markdown()


TWO_LINE_TITLE_PX, X_TITLE_PX, ROW_PX = 72, 50, 19  # a wrapped title's top margin; ticks and x title below the plot


@pytest.mark.parametrize("name", ["policy", "steps_to_goal", "bellman", "variance", "bandit", "bandit_variance"])
def test_a_legend_below_starts_clear_of_the_x_axis_title(name) -> None:
    """Under a two-line title the page's own move of a long-named legend (y = −0.22 of a 430 px chart's plot)
    put "episode" on the first row (1 px apart by this estimate): each legend here hangs from a fraction of the
    plot's height that, with the figure taller by a row per entry, leaves 20 px at least between the two."""
    from explorer.view.look import BASE_HEIGHT_PX, polish
    from tests.tiny_runs import tiny_frame
    figure = polish(SCENARIO.figures(tiny_frame(SCENARIO.id), SCENARIO.validate(SCENARIO.tiny))[name])  # as the page
    legend, height = figure.layout.legend, figure.layout.height or BASE_HEIGHT_PX
    entries = sum(1 for trace in figure.data if trace.showlegend is not False and trace.name)
    plot_px = (height - TWO_LINE_TITLE_PX - ROW_PX * entries) / (1 - legend.y)  # the legend's rows take the bottom margin
    gap_px = -legend.y * plot_px - X_TITLE_PX
    assert legend.orientation == "h" and legend.yanchor == "top" and gap_px >= 20, \
        f"{name}: legend at y = {legend.y} ({legend.yanchor}), {entries} entries, height {height}: {gap_px:.0f} px below the title"


def test_chart_text_has_no_raw_subscripts() -> None:
    """"α_θ" and "E_x[Σ_k π(k|x)·μ_k(x)]" were drawn as typed: arm names, legends, titles and axis titles hold no
    underscore."""
    from tests.tiny_runs import tiny_frame
    figures = SCENARIO.figures(tiny_frame("reinforce"), SCENARIO.validate(SCENARIO.tiny))
    texts = [str(t) for figure in figures.values() for t in (
        figure.layout.title.text, figure.layout.xaxis.title.text, figure.layout.yaxis.title.text,
        *(trace.name for trace in figure.data))]
    assert not [t for t in texts if "_" in t], [t for t in texts if "_" in t]
