"""DPO β: how far does preference training move a policy from its reference?

RLHF maximises E_π[r] − β·KL(π‖π_ref), whose optimum is π* ∝ π_ref·exp(r/β). DPO (Rafailov
et al., NeurIPS 2023) reaches it without a reward model: it fits β·log(π/π_ref), the policy's
*implicit reward*, to preference pairs through the Bradley–Terry model. β is the exchange rate
between reward and KL: small β lets the policy chase reward far from π_ref, large β holds it near.

Two levels on one page. Tabular: a policy over K responses with known rewards; with soft
Bradley–Terry labels on every pair, DPO lands on π* itself (see "learned policy vs π*").
Sequence: a tiny autoregressive LM and its frozen copy, trained on chosen/rejected completions
drawn from the reference; every sequence can be enumerated, so KL and reward are exact.

Look at the frontier (reward vs KL): each β walks from π_ref (KL 0) toward its own point on the
exact optimal curve. Then the log-probabilities: at small β chosen and rejected can both fall —
DPO only needs their *gap* to grow, and the mass goes to completions the dataset never showed.
"""
from functools import partial
from typing import Literal

import pandas as pd
import plotly.graph_objects as go
from pydantic import Field

from engines.loop import arms_memory
from scenarios.base import Arm, Machine, Scenario, ScenarioConfig, Work, in_turn, shown_by
from scenarios.cost import logs
from scenarios.dpo_beta import figures as look
from scenarios.dpo_beta.claims import explanation, finished
from scenarios.dpo_beta.figures import LOG2, arm_of, beta_label, optimum_arm
from scenarios.explanation import Explanation
from scenarios.plotting import Figures, arm_colors, curves_figure
from scenarios.records import Records
from scenarios.seeded import named

FRONTIER_BETAS = [10 ** (k / 10) for k in range(-25, 21)]  # 0.003 … 100: the exact curve
SEQUENCE_COST = 4  # one LM step costs about four tabular steps (weights the progress bar)
SEQUENCE_WEIGHTS = 3 * 4 * 32 + 2 * 32 + 32 * 4 + 4  # the TinyLM's: prompt, previous, position (6 rows), head
LEVELS = ("tabular", "sequence")
Sweep = Literal["0.05,0.1,0.5,1,5", "0.01,0.1,1,10", "0.1,1", "0.02,0.05,0.1,0.2,0.5,1,2,5"]


class Config(ScenarioConfig):
    level: Literal["both", "tabular", "sequence"] = Field(
        "both", description="Which level runs: the tabular policy over K responses, the tiny LM, or both.")
    betas: Sweep = Field(
        "0.05,0.1,0.5,1,5", description="β sweep, one arm per β. Rewards lie in [0, 1], so near β = 1 KL and reward trade evenly.")
    labels: Literal["soft", "hard"] = Field(
        "soft", description="soft: each pair carries its Bradley–Terry probability σ(r_w − r_l); "
                            "hard: one sampled winner per pair, as in a real preference dataset.")
    label_noise: float = Field(0.0, ge=0.0, le=0.45, description="Probability that a preference label is flipped.")
    tabular_steps: int = Field(300, ge=10, le=3000, description="Tabular level: Adam steps (full batch of pairs).")
    tabular_lr: float = Field(0.1, ge=1e-3, le=1.0, description="Tabular level: Adam learning rate on the policy's logits.",
                              json_schema_extra={"scale": "log"})
    sequence_steps: int = Field(80, ge=5, le=1000, description="Sequence level: Adam steps on the tiny LM, 128 pairs each.")
    sequence_lr: float = Field(0.01, ge=1e-4, le=0.5, description="Sequence level: Adam learning rate on the tiny LM.",
                               json_schema_extra={"scale": "log"})
    responses: int = Field(8, ge=3, le=32, description="Tabular level: K candidate responses.")
    pairs: int = Field(512, ge=64, le=4096, description="Preference pairs in the sequence dataset (and the tabular one with hard labels).")


def betas_of(config: Config) -> list[float]:
    return [float(b) for b in config.betas.split(",")]


def levels_of(config: Config) -> list[str]:
    return list(LEVELS) if config.level == "both" else [config.level]


def steps_of(config: Config, level: str) -> int:
    return config.tabular_steps if level == "tabular" else config.sequence_steps


def optimum_arm_records(config: Config, level: str, built: dict):
    """The level's β-independent parts, built once (kept for its β arms), then π*'s records."""
    from engines.loop.training import log_every_for
    from engines.rl import dpo
    common = dict(labels=config.labels, noise=config.label_noise, pairs=config.pairs, seed=config.seed)
    if level == "tabular":
        built["level"] = dpo.tabular_level(config.responses, steps=config.tabular_steps, lr=config.tabular_lr,
                                           log_every=log_every_for(config.tabular_steps), **common)
    else:  # each log enumerates every sequence: fewer points
        built["level"] = dpo.sequence_level(steps=config.sequence_steps, lr=config.sequence_lr,
                                            log_every=log_every_for(config.sequence_steps, max_points=25), **common)
    yield from built["level"].optimum_records(FRONTIER_BETAS)


def beta_arm_records(built: dict, beta: float):
    """One β arm alone (the sequential path: `batched=False`)."""
    yield from built["level"].records(beta)


def beta_arms_records(builts: list[dict], names: list[str], betas: list[float]):
    """Every β arm of the level, of every seed, as one batched model (engines/rl/dpo_arms.py): the records of
    each equal its sequential arm's; one step of all costs about one arm's."""
    from engines.rl.dpo_arms import level_arms
    yield from level_arms([built["level"] for built in builts for _ in betas], names, betas * len(builts))


def named_records(name: str, records):
    """Records reported under `name` (a seed's π* arm inside a run of several seeds)."""
    for record in records:
        yield name, record


class DpoBeta(Scenario):
    id = "dpo-beta"
    title = "DPO β"
    order = 70
    arms_note = ("The β arms of a level train together as one batched model (one policy per β, stacked): each arm's "
                 "records are those it gives trained alone, bit for bit.")
    batches_seeds = True  # repeat over seeds: every seed's β arms in the same batched policy
    topic = "Alignment"
    question = "How does β trade reward against drift from the reference policy in DPO?"
    terms = {
        "DPO": shown_by("loss", "loss", "rewards/margins", arm="β=",
                        how="the pairwise loss falls from log 2 as the implicit-reward margin grows"),
        "Beta (β), in DPO": shown_by("frontier_tabular", "kl", "true_reward", arm="tabular β=",
                                     how="one arm per β: where each lands between π_ref (KL 0) and π*"),
        "Bradley-Terry model": shown_by("margins_tabular", "rewards/margins", "pairs/true_margin", arm="tabular",
                                        how="with soft σ(r_w − r_l) labels the margin settles on the true reward gap"),
        "KL divergence": shown_by("frontier_tabular", "kl", "frontier/kl", arm="tabular",
                                  how="the exact KL(π‖π_ref) on the frontier's x axis"),
    }
    methods = {"Direct preference optimization": shown_by("loss", "loss", "rewards/margins", arm="β=",
                                                          how="the pairwise logistic loss on log-probability ratios")}
    formula = (r"\begin{aligned}\mathcal{L} &= -\log\sigma\Big(\beta\Big[\log\tfrac{\pi(y_w)}{\pi_{\mathrm{ref}}(y_w)}"
               r" - \log\tfrac{\pi(y_l)}{\pi_{\mathrm{ref}}(y_l)}\Big]\Big)\\"
               r"\pi^*(y) &\propto \pi_{\mathrm{ref}}(y)\,e^{r(y)/\beta}\qquad \mathcal{L}(\pi_{\mathrm{ref}}) = \log 2"
               r"\end{aligned}")
    Config = Config
    tiny = {"betas": "0.1,1", "tabular_steps": 20, "sequence_steps": 6, "pairs": 64}
    presets = {
        "the paper's setting (soft labels, β sweep)": {},
        "sampled hard labels": {"labels": "hard"},
        "20% label noise": {"label_noise": 0.2},
        "small β, more LM steps": {"betas": "0.01,0.1,1,10", "sequence_steps": 200},
        "tabular only, to convergence": {"level": "tabular", "tabular_steps": 1000},
    }

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"run": 0.0401, "sequence_log_pairs": 6.73e-07, "sequence_steps": 0.000652, "tabular_log_pairs": 1.29e-07,
             "tabular_steps": 7.98e-05}
    rates_reference = 0.1406  # the reference workload's CPU s beside the fit
    timed = ({"level": "sequence", "sequence_steps": 200, "betas": "0.1,1"}, {"level": "tabular", "tabular_steps": 500},
             {"pairs": 4096, "sequence_steps": 30, "tabular_steps": 100, "betas": "0.1,1"})

    def work(self, config: Config) -> Work:
        """Per level, one β arm after another: tabular Adam steps on K logits (every log scores every pair),
        and steps of the tiny LM on 64 pairs (every log scores every sequence and every pair)."""
        betas, levels = len(betas_of(config)), levels_of(config)
        tab = betas * config.tabular_steps if "tabular" in levels else 0
        seq = betas * config.sequence_steps if "sequence" in levels else 0
        tab_logs = betas * logs(config.tabular_steps) if tab else 0
        seq_logs = betas * logs(config.sequence_steps, 25) if seq else 0
        return Work({"tabular_steps": tab, "tabular_log_pairs": tab_logs * config.pairs, "sequence_steps": seq,
                     "sequence_logs": seq_logs, "sequence_log_pairs": seq_logs * config.pairs,
                     "sequence_level": float(bool(seq))},
                    floats=config.pairs * 64 + 4096 * 16 * 32 * 4)

    def phases(self, config: Config, batched: bool = True) -> list[list[Arm]]:
        """Per level, π* first (it builds the level), then the β arms: trained together as one batched
        model, or (`batched=False`, the reference the tests compare with) one after another."""
        if batched:
            return self.seed_phases(config, [config.seed])
        phases = []
        for level in levels_of(config):
            built: dict = {}
            optimum = Arm(optimum_arm(level), optimum_arm_records(config, level, built), len(FRONTIER_BETAS),
                          cost=0.1, needed=True)
            phases += in_turn(optimum, *(Arm(arm_of(level, b), beta_arm_records(built, b), steps_of(config, level),
                                             1 if level == "tabular" else SEQUENCE_COST) for b in betas_of(config)))
        return phases

    def seed_phases(self, config: Config, seeds: list[int]) -> list[list[Arm]]:
        """Per level, every seed's π* (each builds its seed's level), then the β arms of every seed as one model."""
        from engines.loop.batched import arm_cost
        phases = []
        for level in levels_of(config):
            builts: list[dict] = [{} for _ in seeds]
            cost, betas = (1 if level == "tabular" else SEQUENCE_COST), betas_of(config)
            optima = [Arm(name, named_records(name, optimum_arm_records(config.model_copy(update={"seed": seed}), level,
                                                                        built)), len(FRONTIER_BETAS), cost=0.1, needed=True)
                      for name, seed, built in zip(named([optimum_arm(level)], seeds), seeds, builts)]
            names = named([arm_of(level, b) for b in betas], seeds)
            phases += in_turn(*optima, Arm(f"{level} β arms", beta_arms_records(builts, names, betas),
                                           steps_of(config, level), cost * arm_cost(len(names))))
        return phases

    def batched_bytes(self, config: Config) -> float:
        """The larger level's β arms as one batched model (engines/loop/arms_memory.py). Tabular: K rows of
        logits (float64) and each pass's (K, pairs) log-probabilities; sequence: K TinyLMs (vocab 4, hidden 32,
        5 completion tokens: 580 weights) and the pass over every pair's two sequences, 6 positions each."""
        arms = len(betas_of(config))
        tabular = arms_memory.batched_bytes(arms, config.responses, 2, 8 * config.pairs, value_bytes=8)
        sequence = arms_memory.batched_bytes(arms, SEQUENCE_WEIGHTS, 2, 2 * config.pairs * 6 * (32 + 4))
        return max(tabular if "tabular" in levels_of(config) else 0.0, sequence if "sequence" in levels_of(config) else 0.0)

    def refusal(self, config: Config, machine: Machine) -> str | None:
        return arms_memory.refusal(f"betas={config.betas}", len(betas_of(config)), self.batched_bytes(config),
                                   machine.memory_limit_bytes,
                                   machine.memory_basis(arms_memory.FILL))

    def arm_universe(self) -> list[str]:
        betas = dict.fromkeys(float(b) for sweep in Sweep.__args__ for b in sweep.split(","))
        return [arm_of(level, b) for b in betas for level in LEVELS] + [optimum_arm(level) for level in LEVELS]

    def beta_colors(self, betas: list[float]) -> dict[str, str]:
        """One colour per β, the same in both levels: the β labels in the arm universe's order."""
        universe = list(dict.fromkeys(arm.split(" ", 1)[1] for arm in self.arm_universe() if "β=" in arm))
        return arm_colors([beta_label(b) for b in betas], universe)

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records, arms, levels = Records(frame), {}, {}
        for level in levels_of(config):
            last = steps_of(config, level) - 1
            done = finished(records, level, betas_of(config), last)
            for beta in betas_of(config):
                if records.has("loss", arm := arm_of(level, beta)):
                    arms[arm] = {"level": level, "beta": beta, **look.arm_summary(records, arm)}
            ends = [(records.at(arm, "true_reward", last), records.at(arm, "kl", last)) for _, arm in done]
            levels[level] = {"reference_true_reward": records.first(optimum_arm(level), "reference/true_reward"),
                             "true_margin": records.first(optimum_arm(level), "pairs/true_margin"),
                             "smaller_beta_more_reward_and_kl": len(done) > 1 and all(
                                 a[0] >= b[0] and a[1] >= b[1] for a, b in zip(ends, ends[1:]))}
        smallest = {level: arm_of(level, min(betas_of(config))) for level in LEVELS}
        headline = {f"{level} {name} at the smallest β": arms.get(smallest[level], {}).get(key)
                    for level in LEVELS for name, key in (("E[r]", "true_reward"), ("KL", "kl"))}
        return {"headline": headline, "arms": arms, "levels": levels, "labels": config.labels,
                "label_noise": config.label_noise}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        lasts = {level: steps_of(config, level) - 1 for level in levels_of(config)}
        return explanation(Records(frame), levels_of(config), betas_of(config), lasts)

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records, levels, betas = Records(frame), levels_of(config), betas_of(config)
        colors = self.beta_colors(betas)
        figures = {f"frontier_{level}": partial(look.frontier_figure, records, level, betas, colors) for level in levels}
        if "tabular" in levels:
            figures["policy_vs_optimum"] = partial(look.policy_figure, records, betas, colors)
        for level in levels:
            figures[f"logps_{level}"] = partial(look.logps_figure, records, level, betas, colors)
            figures[f"margins_{level}"] = partial(look.margins_figure, records, level, betas, colors,
                                                  steps_of(config, level) - 1)
        def loss() -> go.Figure:
            arms = [arm_of(level, b) for level in levels for b in betas]
            figure = curves_figure(records, {arm_of(level, b): colors[beta_label(b)] for level in levels for b in betas},
                                   "loss", arms=arms, chance=LOG2, chance_label="log 2 (π = π_ref)", y_title="loss (nats)",
                                   title="DPO loss" + (" (tabular solid, sequence dotted)" if len(levels) > 1 else ""),
                                   chance_in_legend=True)  # on the line, its label sat on the curves that start there
            figure.for_each_trace(lambda t: t.update(line_dash="dot") if t.name.startswith("sequence") else None)
            figure.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))  # the plot keeps the width
            return look.follow_bulk(figure, records, arms, "loss", LOG2)
        figures["loss"] = loss
        return Figures(figures)
