"""Policy gradient: REINFORCE from scratch, with and without a learned baseline.

**The short corridor** (Sutton & Barto, Example 13.1): S, a state where the actions are switched,
S2, then the goal; −1 a step. The policy sees the same features everywhere, so it is one number,
p = P(right). For each p the values solve a 3×3 Bellman system; the page solves it on a grid of p
and refines the best by golden section: p* = 2 − √2 ≈ 0.586 and v*(S) = −(6 + 4√2) ≈ −11.66,
drawn as the limits. REINFORCE (Williams 1992) runs an episode and steps θ by α·Σₜ Gₜ·∇log π(Aₜ)
(α: the policy's step size), the gradient taken by autograd; with a baseline, Gₜ − v̂(Sₜ), v̂ a table
learned by its own step size. Three arms: no baseline at a small step (Sutton & Barto's 2⁻¹³), the baseline at a larger
one (their 2⁻⁹), and no baseline at that larger step, so the step size and the baseline are told apart.
The variance of the per-episode gradient is measured at the baseline arm's own θ, with and without
its v̂, on fresh episodes at each log (32; fewer in runs under 1600 episodes). "Converged" is said of an arm whose last quarter of episodes
averages a P(right) within 0.1 of p* and a v(S) within 0.75 of v* (about 6%); "reached" of the first
log window whose policies' mean v(S) is within 0.5 of v*.

**A contextual bandit** where a network is needed: contexts in the plane, K actions, Bernoulli
rewards whose best action depends on the doubled angle of the context (each action owns two
opposite sectors), so a linear softmax cannot follow it. The same estimator trains an MLP, with
and without a learned v̂(x), and a linear policy; the optimum and each policy's expected reward
are exact sums over the finite context set.
"""
from pydantic import Field

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, shown_by, together
from scenarios.explanation import Explanation
from scenarios.plotting import Figures, arm_colors
from scenarios.records import Records
from scenarios.reinforce import claims
from scenarios.reinforce import figures as look
from scenarios.reinforce.figures import (BANDIT_ARMS, BANDIT_BASE, BANDIT_LINEAR, BANDIT_PLAIN, CORRIDOR_ARMS,
                                         CORRIDOR_BASE, CORRIDOR_FAST, CORRIDOR_PLAIN, EXACT)

CURVE_POINTS = 99  # values of p the Bellman curve is drawn at
CORRIDOR_POINTS = 50  # logged points per corridor arm
VARIANCE_EPISODES = 32  # fresh episodes per log for the gradient variance at the baseline arm's θ (at most)


class Config(ScenarioConfig):
    episodes: int = Field(2000, ge=200, le=20000, description="Corridor episodes per arm (one update each).")
    lr_plain: float = Field(2 ** -13, ge=1e-5, le=2 ** -6, json_schema_extra={"scale": "log"},
                            description="Policy step size α of REINFORCE without a baseline (Sutton & Barto: 2⁻¹³ ≈ 1.2×10⁻⁴).")
    lr_policy: float = Field(2 ** -9, ge=1e-5, le=2 ** -6, json_schema_extra={"scale": "log"},
                             description="Policy step size α of REINFORCE with the baseline (Sutton & Barto: 2⁻⁹ ≈ 2×10⁻³); the "
                                         "third arm runs without a baseline at this step.")
    lr_value: float = Field(2 ** -6, ge=1e-3, le=0.5, json_schema_extra={"scale": "log"},
                            description="The baseline table's step size: each visited v̂(Sₜ) moves this share of the way to the "
                                        "return Gₜ (Sutton & Barto: 2⁻⁶).")
    init_right: float = Field(0.05, ge=0.01, le=0.99, description="P(right) of the initial policy "
                              "(0.05: nearly always left, v(S) ≈ −82).")
    bandit_actions: int = Field(4, ge=2, le=8, description="K: the bandit's actions; each owns two opposite "
                                "sectors of the context plane.")
    bandit_steps: int = Field(300, ge=20, le=3000, description="Bandit updates (Adam), each on a batch of rounds.")
    bandit_batch: int = Field(64, ge=8, le=512, description="Rounds (one-step episodes) per bandit update.")
    bandit_lr: float = Field(0.01, ge=1e-4, le=0.1, json_schema_extra={"scale": "log"},
                             description="Adam's learning rate for the bandit's policies and value network.")
    hidden: int = Field(64, ge=8, le=256, description="Width of the bandit MLPs' two hidden layers (ReLU).")


class Reinforce(Scenario):
    id = "reinforce"
    title = "Policy gradient: REINFORCE"
    order = 57
    topic = "Alignment"
    picture = "steps_to_goal"
    counted = ("loss", "p_right")  # the corridor arms count episodes, the bandit arms batches
    question = "Does REINFORCE find the best stochastic policy of the short corridor, and what does a learned baseline buy?"
    arms_note = ("Every arm trains its own policy on its own episodes, side by side; the corridor arms share the "
                 "seed's episode stream, the bandit arms its rounds' stream and the context set.")
    terms = {
        "Gradient": shown_by("variance", "grad_var/plain", "grad_var/baseline", arm=CORRIDOR_BASE,
                             how="the per-episode policy-gradient estimate's variance, with and without the baseline, "
                                 "at the same θ"),
        "Autograd": shown_by("policy", "p_right", arm=CORRIDOR_PLAIN,
                             how="∇log π(Aₜ) of every step comes from autograd on −Σ Gₜ·log π(Aₜ)"),
        "Softmax": shown_by("policy", "p_right", arm=CORRIDOR_PLAIN,
                            how="P(right) = softmax(θ_right, θ_left)[right]; the bandit's policies are softmaxes too"),
        "Learning rate": shown_by("steps_to_goal", "window/v_start", arm=CORRIDOR_FAST,
                                  how="the same estimator at policy step sizes 2⁻¹³ and 2⁻⁹, with and without the baseline"),
        "Batch size": shown_by("bandit", "expected_reward", arm=BANDIT_BASE,
                               how="each bandit update averages the estimator over a batch of rounds"),
        "ReLU": shown_by("bandit", "expected_reward", arm=BANDIT_PLAIN,
                         how="the bandit's MLP policy (ReLU) follows a best action a linear softmax cannot"),
    }
    formula = (r"\begin{aligned}\nabla_\theta J &= \mathbb{E}_\pi\Big[\sum_t (G_t - b(S_t))\,\nabla_\theta \log\pi(A_t|S_t,\theta)\Big],"
               r"\quad \theta \leftarrow \theta + \alpha_\theta \sum_t \delta_t \nabla_\theta\log\pi(A_t|\theta)\\"
               r"\delta_t &= G_t - \hat v(S_t),\quad \hat v(S_t) \leftarrow \hat v(S_t) + \alpha_w\,\delta_t\\"
               r"v_p(S) &= \frac{2p-4}{p(1-p)},\quad p^* = 2-\sqrt2 \approx 0.586,\quad v^*(S) = -(6+4\sqrt2)\approx -11.66"
               r"\end{aligned}")
    Config = Config
    tiny = {"episodes": 200, "bandit_steps": 20, "bandit_batch": 16, "hidden": 16}
    tiny_space = {"init_right": [0.05, 0.2, 0.5, 0.8]}  # near 0.01 or 0.99 an episode lasts hundreds of steps
    presets = {
        "one step size for all three (2⁻⁹)": {"lr_plain": 2 ** -9},
        "start near the optimum (P(right) = 0.5)": {"init_right": 0.5},
        "a slow baseline (its step size 2⁻⁹)": {"lr_value": 2 ** -9},
        "two bandit actions (an XOR)": {"bandit_actions": 2},
    }
    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-05, rates_reference beside them):
    rates = {"episodes": 0.000291, "macs": 8.32e-10, "run": 0.13, "updates": 0.000539}
    rates_reference = 0.1708  # the reference workload's CPU s beside the fit
    timed = ({"episodes": 1000, "bandit_steps": 100}, {"episodes": 500, "bandit_steps": 200, "hidden": 128},
             {"episodes": 2000, "bandit_steps": 50, "bandit_batch": 256})

    def phases(self, config: Config) -> list[list[Arm]]:
        from engines.loop.training import log_every_for
        from engines.rl.reinforce import CorridorArm, train_corridor
        from engines.rl.reinforce_bandit import BanditArm, make_bandit, train_bandit
        specs = {CORRIDOR_PLAIN: CorridorArm(config.lr_plain),
                 CORRIDOR_BASE: CorridorArm(config.lr_policy, config.lr_value, variance_episodes(config.episodes)),
                 CORRIDOR_FAST: CorridorArm(config.lr_policy)}
        every = log_every_for(config.episodes, CORRIDOR_POINTS)
        corridor = [Arm(name, train_corridor(spec, config.episodes, config.init_right, every, config.seed),
                        config.episodes, cost=0.05)
                    for name, spec in specs.items()]
        bandit = make_bandit(config.bandit_actions, config.seed)
        kinds = {BANDIT_PLAIN: BanditArm(True, False), BANDIT_BASE: BanditArm(True, True),
                 BANDIT_LINEAR: BanditArm(False, True)}
        bandits = [Arm(name, train_bandit(kind, bandit, config.bandit_steps, config.bandit_batch, config.bandit_lr,
                                          config.hidden, log_every_for(config.bandit_steps), config.seed),
                       config.bandit_steps) for name, kind in kinds.items()]
        return together(Arm(EXACT, exact_records(bandit), CURVE_POINTS, cost=0.01), *corridor, *bandits)

    def arm_universe(self) -> list[str]:
        return [*CORRIDOR_ARMS, *BANDIT_ARMS, EXACT]

    def work(self, config: Config) -> Work:
        """Corridor episodes (three arms, ~12–80 steps each, plus the variance episodes) and bandit updates."""
        macs = config.bandit_steps * config.bandit_batch * 3 * (2 * config.hidden + config.hidden ** 2) * 6
        return Work({"episodes": 3 * config.episodes, "updates": 3 * config.bandit_steps, "macs": macs},
                    floats=2 * (config.hidden ** 2 + 512 * config.bandit_actions) + 512 * config.hidden * 4)

    def summarize(self, frame, config: Config) -> dict:
        return claims.summary(Records(frame), config.episodes)

    def explain(self, frame, config: Config) -> Explanation:
        return claims.explanation(Records(frame), config.episodes)

    def figures(self, frame, config: Config) -> Figures:
        records = Records(frame)
        colors = arm_colors(self.arm_universe(), self.arm_universe())
        return Figures({
            "policy": lambda: look.policy_figure(records, colors),
            "steps_to_goal": lambda: look.steps_figure(records, colors),
            "bellman": lambda: look.bellman_figure(records, colors, config.episodes),
            "variance": lambda: look.variance_figure(records, [CORRIDOR_BASE], "episode",
                                                     "Per-episode gradient variance at the baseline arm's θ"),
            "bandit": lambda: look.bandit_figure(records, colors),
            "bandit_variance": lambda: look.variance_figure(records, [BANDIT_BASE], "update",
                                                            "Per-round gradient variance at the MLP + baseline arm's weights"),
        })


def variance_episodes(episodes: int) -> int:
    """Fresh episodes per log for the variance: 32, fewer in a short run (never more than its training episodes)."""
    return max(8, min(VARIANCE_EPISODES, episodes // CORRIDOR_POINTS))


def exact_records(bandit):
    """Step 0: the corridor's optimum (solved) and the bandit's (an exact sum); then v(S) on a grid of p."""
    from engines.loop.records import StepRecord
    from engines.rl.reinforce import optimum, value_curve
    p_star, v_star = optimum()
    curve = list(value_curve(CURVE_POINTS))
    first = {**curve[0].metrics, "optimum/p_right": p_star, "optimum/v_start": v_star,
             "bandit/optimum": bandit.optimum, "bandit/uniform": float(bandit.means.mean())}
    yield StepRecord(0, first)
    for record in curve[1:]:
        yield record
