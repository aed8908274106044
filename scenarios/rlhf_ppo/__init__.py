"""RLHF beside DPO: what does the classic recipe, a reward model and then PPO, buy over DPO?

The classic recipe (Ouyang et al. 2022) learns from preference pairs in two stages. First a
reward model r_φ is fitted to the pairs through the Bradley–Terry model, P(y_w ≻ y_l) =
σ(r_φ(y_w) − r_φ(y_l)), by its negative log-likelihood. Then PPO (Schulman et al. 2017)
samples responses from the policy, scores them with r_φ minus a KL penalty β·log(π/π_ref),
and takes clipped steps: min(ρ·A, clip(ρ, 1 − ε, 1 + ε)·A), ρ = π/π_old. The baseline here is a
*group baseline*: G responses per prompt, each one's advantage its reward minus the mean of
the other G − 1 (RLOO's; no value network). DPO trains on the same pairs at the same β with
no reward model and no sampling. Both aim at the optimum of E[r] − β·KL, π* ∝ π_ref·exp(r/β) —
but PPO can only reach the one of its reward model, π_ref·exp(r_φ/β).

The data and the tiny policy are the DPO page's: every response can be enumerated, so KL, the
true reward and the reward model's reward of every policy are exact. Look at the reward
model's held-out accuracy and calibration first; then the frontier (true reward against KL:
π*, the reward model's optimum, and where PPO and DPO walk); then the true reward against the
reward model's over the steps — where r_φ is wrong, PPO can push r_φ up while the true reward
falls (reward over-optimization, Gao et al. 2022); last, PPO's clip fraction and KL.
"""
from typing import Literal

import pandas as pd
from pydantic import Field

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, in_turn, shown_by, together
from scenarios.explanation import Explanation
from scenarios.plotting import Figures
from scenarios.records import Records
from scenarios.rlhf_ppo import figures as look
from scenarios.rlhf_ppo.claims import explanation, headline

FRONTIER_BETAS = [10 ** (k / 10) for k in range(-25, 21)]  # 0.003 … 100: the exact curves
PROMPTS_PER_ROLLOUT = 16
REWARD_LR = 0.05
POINTS = 50  # logged points per policy arm


class Config(ScenarioConfig):
    level: Literal["sequence", "tabular"] = Field(
        "sequence", description="sequence: the tiny LM over 4 prompts × 1024 completions (the DPO page's); "
                                "tabular: one prompt, K responses, free logits and free reward-model scores.")
    beta: float = Field(0.05, ge=0.01, le=10.0, description="KL coefficient β: PPO's penalty β·log(π/π_ref) in the "
                        "reward and DPO's β, the same for both.", json_schema_extra={"scale": "log"})
    labels: Literal["hard", "soft"] = Field(
        "hard", description="hard: one sampled winner per pair, as in a real preference dataset; soft: each pair "
                            "carries its Bradley–Terry probability σ(r_w − r_l).")
    label_noise: float = Field(0.0, ge=0.0, le=0.45, description="Probability that a preference label is flipped.")
    pairs: int = Field(512, ge=64, le=4096, description="Preference pairs (sequence level; tabular with hard labels). "
                       "Fewer pairs: a worse reward model for PPO to exploit.")
    reward_steps: int = Field(200, ge=5, le=2000, description="Adam steps fitting the reward model (full batch).")
    steps: int = Field(240, ge=4, le=2000, description="Policy updates, for PPO and for DPO each.")
    lr: float = Field(0.01, ge=1e-4, le=1.0, description="Adam learning rate of both policies (the tabular "
                      "logits want about 0.1).", json_schema_extra={"scale": "log"})
    ppo_epochs: int = Field(4, ge=1, le=8, description="PPO updates per rollout: after the first, π ≠ π_old "
                            "and the clip can act.")
    clip: float = Field(0.2, ge=0.01, le=1.0, description="PPO's clip range ε: ρ is clipped to [1 − ε, 1 + ε].")
    group: int = Field(8, ge=2, le=32, description=f"Responses sampled per prompt ({PROMPTS_PER_ROLLOUT} prompts a "
                       "rollout): each one's baseline is the mean reward of the others.")
    responses: int = Field(8, ge=3, le=32, description="Tabular level: K candidate responses.")


def world_records(config: Config, built: dict):
    """Build the world (pairs, reference, true rewards), then fit the reward model on the pairs."""
    from engines.loop.training import log_every_for
    from engines.rl import rlhf, rlhf_worlds
    common = dict(labels=config.labels, noise=config.label_noise, pairs=config.pairs, seed=config.seed)
    built["world"] = (rlhf_worlds.sequence_world(**common) if config.level == "sequence" else
                      rlhf_worlds.tabular_world(config.responses, **common))
    yield from rlhf.reward_model_arm(built["world"], config.reward_steps, REWARD_LR,
                                     log_every_for(config.reward_steps, POINTS), built)


def policy_log_every(config: Config) -> int:
    """A multiple of the PPO epochs: every PPO log falls on a rollout's first update (π = π_old)."""
    return config.ppo_epochs * max(1, -(-config.steps // (config.ppo_epochs * POINTS)))


def policy_records(config: Config, built: dict, method: str):
    from engines.rl import rlhf
    world, rm = built["world"], built["rm"]
    if method == "π*":
        yield from rlhf.optimum_records(world, rm, config.beta, FRONTIER_BETAS)
    elif method == "PPO":
        yield from rlhf.ppo_arm(world, rm, config.beta, config.steps, config.lr, epochs=config.ppo_epochs,
                                prompts=PROMPTS_PER_ROLLOUT, group=config.group, clip=config.clip,
                                log_every=policy_log_every(config), seed=config.seed + 5)
    else:
        yield from rlhf.dpo_arm(world, rm, config.beta, config.steps, config.lr, log_every=policy_log_every(config),
                                batch_pairs=64 if config.level == "sequence" else None, seed=config.seed + 6)


class RlhfPpo(Scenario):
    id = "rlhf-ppo"
    title = "RLHF (reward model + PPO) beside DPO"
    order = 75
    topic = "Alignment"
    question = "What does the classic RLHF recipe, a reward model and then PPO, do that DPO does not?"
    terms = {
        "Reward model": shown_by("calibration", "heldout/accuracy", "calibration/", arm="reward model",
                                 how="r_φ fitted on the pairs: its held-out accuracy and calibration"),
        "Bradley-Terry model": shown_by("reward_model_fit", "loss", "heldout/loss", arm="reward model",
                                        how="the reward model's loss: −log σ(r_φ(y_w) − r_φ(y_l)) per pair"),
        "RLHF": shown_by("frontier", "kl", "true_reward", "rm_reward", arm="PPO",
                         how="PPO against the fitted reward model: its path in true reward against KL"),
        "PPO": shown_by("ppo_diagnostics", "ppo/clipfrac", "ppo/approx_kl", arm="PPO",
                        how="the clipped surrogate: the share of samples the clip stops, update by update"),
        "KL divergence": shown_by("ppo_diagnostics", "kl", arm="PPO", how="the exact KL(π‖π_ref) of each policy"),
        "DPO": shown_by("frontier", "rewards/margins", "true_reward", arm="DPO",
                        how="DPO on the same pairs at the same β: no reward model, no sampling"),
    }
    methods = {"Reinforcement learning from human feedback": shown_by(
        "frontier", "kl", "true_reward", "rm_reward", arm="PPO", how="a reward model fitted to preferences, then PPO against it")}
    formula = (r"\begin{aligned}\mathcal{L}_{\mathrm{RM}} &= -\log\sigma\big(r_\phi(y_w) - r_\phi(y_l)\big)\qquad"
               r"R = r_\phi(x,y) - \beta\log\tfrac{\pi_{\mathrm{old}}(y|x)}{\pi_{\mathrm{ref}}(y|x)}\qquad"
               r"A_i = R_i - \tfrac{1}{G-1}\textstyle\sum_{j\neq i}R_j\\"
               r"\mathcal{L}_{\mathrm{PPO}} &= -\mathbb{E}\big[\min\big(\rho A,\ \mathrm{clip}(\rho, 1-\epsilon, 1+\epsilon)"
               r"A\big)\big],\ \rho = \tfrac{\pi(y|x)}{\pi_{\mathrm{old}}(y|x)}\qquad"
               r"\pi^* \propto \pi_{\mathrm{ref}}\,e^{r/\beta}\end{aligned}")
    Config = Config
    tiny = {"reward_steps": 10, "steps": 8, "pairs": 64, "ppo_epochs": 2, "group": 4}
    presets = {
        "the failure: reward over-optimization": {},
        "the fix: a larger KL penalty (β = 0.3)": {"beta": 0.3},
        "the fix: 4096 pairs for the reward model": {"pairs": 4096},
        "exact reward model (tabular, soft labels): both reach π*": {"level": "tabular", "labels": "soft",
                                                                     "beta": 0.1, "lr": 0.1, "steps": 400},
        "Ouyang et al. 2022 (InstructGPT: β = 0.02)": {"beta": 0.02},
    }

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"logs": 0.00402, "reward_pair_steps": 2.45e-07, "reward_steps": 0.000669, "run": 0.0117, "samples":
             2.24e-06, "steps": 0.00117, "tabular_steps": 0.000439}
    rates_reference = 0.1396  # the reference workload's CPU s beside the fit
    timed = ({"steps": 250, "ppo_epochs": 2}, {"reward_steps": 500, "pairs": 2048, "steps": 40},
             {"level": "tabular", "steps": 800, "reward_steps": 500})

    def work(self, config: Config) -> Work:
        """The reward model full-batch on the pairs, then PPO (a rollout of 16 prompts × `group` every
        `ppo_epochs` updates) and DPO (64 pairs a step) side by side, each scored at about 50 logs."""
        logged = 2 * -(-config.steps // policy_log_every(config))
        samples = -(-config.steps // config.ppo_epochs) * PROMPTS_PER_ROLLOUT * config.group
        sequence = config.level == "sequence"  # the tabular level costs little but its steps
        return Work({"tabular_steps": 0 if sequence else config.reward_steps + 2 * config.steps + logged,
                     "reward_steps": sequence * config.reward_steps, "reward_pair_steps": sequence * config.reward_steps * config.pairs,
                     "steps": sequence * 2 * config.steps,
                     "samples": sequence * samples, "logs": sequence * logged},
                    floats=config.pairs * 64 * 4 + sequence * 4096 * 16 * 32 * 4)

    def phases(self, config: Config) -> list[list[Arm]]:
        built: dict = {}
        fit = Arm("reward model", world_records(config, built), config.reward_steps + 1, cost=0.5, needed=True)
        return in_turn(fit) + together(Arm("π*", policy_records(config, built, "π*"), len(FRONTIER_BETAS), cost=0.05),
                                       *(Arm(m, policy_records(config, built, m), config.steps) for m in ("PPO", "DPO")))

    def arm_universe(self) -> list[str]:
        return ["PPO", "DPO", "reward model", "π*"]

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records = Records(frame)
        arms = {arm: {name: records.last(arm, name) for name in ("true_reward", "rm_reward", "kl", "tv_to_optimum",
                                                                  "tv_to_rm_optimum")}
                for arm in ("PPO", "DPO") if records.has("kl", arm)}
        fit = {name: records.last("reward model", name) for name in ("loss", "heldout/accuracy", "heldout/ece",
                                                                     "fitted/correlation")}
        optimum = {name: records.first("π*", name) for name in ("optimum/kl", "optimum/true_reward",
                                                                "rm_optimum/kl", "rm_optimum/true_reward")}
        return {"headline": headline(records), "arms": arms, "reward_model": fit, "optimum": optimum,
                "baseline": "group (leave-one-out mean of the prompt's other samples)"}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        return explanation(Records(frame), config.beta, config.clip)

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records = Records(frame)
        colors = look.colors(self.arm_universe())
        figures = {"reward_model_fit": lambda: look.fit_figure(records, colors),
                   "calibration": lambda: look.calibration_figure(records),
                   "frontier": lambda: look.frontier_figure(records, colors, config.beta),
                   "over_optimization": lambda: look.rewards_figure(records, colors),
                   "ppo_diagnostics": lambda: look.diagnostics_figure(records, colors, config.clip)}
        if config.level == "tabular":
            figures["policy_vs_optimum"] = lambda: look.policy_figure(records, colors, config.beta)
        return Figures(figures)
