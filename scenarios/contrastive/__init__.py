"""Contrastive learning with InfoNCE: what does the temperature τ do to an embedding space?

No labels: an encoder sees two noisy views of the same latent point and must pick, among the
N candidates of its batch, which is the other view of each anchor. InfoNCE is that choice as
a cross-entropy over cosine similarities divided by τ. At uniform similarity it is log N, and
log N − L bounds the information the two views share from below (van den Oord et al. 2018):
a larger batch can certify more. What the views share here is the latent point, and the
latent point carries its class, so a linear probe on the frozen embeddings reads the class
off (chance is 1/classes; the same probe on the raw observations is the baseline).

The temperature sets how the loss spreads its pull over the negatives: each negative is
weighted by its softmax share, so a small τ puts almost all of it on the hardest (most
similar) negative, a large τ treats them alike (Wang & Liu 2021). Wang & Isola (2020) split
what the loss buys into alignment (positives close) and uniformity (embeddings spread over
the sphere). Every τ arm starts from the same encoder and sees the same batches.

Look at the loss under its log N line, the hardest negative's weight by τ, the alignment and
uniformity path, the probe accuracy against the raw-observation line, and the PCA panels.
Whether a middle τ is best depends on the data: the page says where the best probe landed.
Measured at the defaults (seeds 0–5): probe 78–96% on 8 classes against 65–83% on the raw
observations, the τ arms 1.2–3.1 points apart.
"""
from typing import Literal

import pandas as pd
import plotly.graph_objects as go
from pydantic import Field

from engines.loop import arms_memory
from scenarios.base import Arm, Machine, Scenario, ScenarioConfig, Work, in_turn, shown_by, together
from scenarios.cost import logs
from scenarios.contrastive import figures as look
from scenarios.contrastive.figures import RAW, arm_of
from scenarios.explanation import Explanation
from scenarios.plotting import Figures, arm_colors, curves_figure
from scenarios.records import Records
from scenarios.seeded import named

Sweep = Literal["0.05,0.1,0.5,1", "0.02,0.1,1", "0.02,0.05,0.1,0.2,0.5,1", "0.02,1", "0.1"]
TAU_ARMS = "τ="
PROBE_SIZE = 512  # held-out views the probe is scored on (engines/supervised/contrastive.py)


class Config(ScenarioConfig):
    temperatures: Sweep = Field("0.05,0.1,0.5,1", description="τ values to train, one arm each (SimCLR compared 0.05, 0.1, 0.5, 1).")
    batch: int = Field(128, ge=16, le=512, json_schema_extra={"scale": "log"},
                       description="Pairs per batch N: each anchor has N − 1 negatives; the loss starts near log N.")
    embedding_dim: int = Field(16, ge=2, le=64, description="Dimension of the unit embedding. At 2 the 8 classes share "
                               "a circle: the probe falls below the raw observations' (seed 0: 46-54% against 73%).")
    classes: int = Field(8, ge=2, le=8, description="Latent clusters; the probe's chance is 1/classes.")
    view_noise: float = Field(0.3, ge=0.0, le=1.0, description="Noise on the latent point, fresh for each view.")
    nuisance: float = Field(2.0, ge=0.0, le=4.0, description="Scale of the nuisance input that differs between the two views.")
    steps: int = Field(200, ge=10, le=2000, description="Adam steps, a fresh batch of pairs each.")
    lr: float = Field(3e-3, ge=1e-4, le=3e-2, json_schema_extra={"scale": "log"}, description="Adam learning rate.")


def taus_of(config: Config) -> list[float]:
    return [float(t) for t in config.temperatures.split(",")]


def tau_arms(config: Config) -> list[str]:
    return [arm_of(t) for t in taus_of(config)]


def as_arm(name: str, records):
    """Records reported under `name` (a seed's raw-observation arm inside a run of several seeds)."""
    for record in records:
        yield name, record


class Contrastive(Scenario):
    id = "contrastive"
    title = "Contrastive learning and InfoNCE"
    order = 63
    arms_note = ("The τ arms train together as one batched encoder (one per τ, stacked): each arm's records are those "
                 "it gives trained alone, bit for bit.")
    batches_seeds = True  # repeat over seeds: every seed's τ arms in the same batched encoder
    topic = "Generalization"
    question = "What does InfoNCE's temperature do to the embeddings a contrastive encoder learns?"
    terms = {
        "Embedding": shown_by("embeddings", "pca/", arm=TAU_ARMS, how="the unit embeddings of held-out views, PCA, by latent class"),
        "Contrastive learning": shown_by("probe", "probe_accuracy", arm=TAU_ARMS,
                                         how="trained without labels, the embeddings let a linear probe read the class"),
        "InfoNCE": shown_by("loss", "loss", "log_n", "mi_bound", arm=TAU_ARMS, how="the loss under log N; log N − L bounds I(view₁; view₂)"),
        "Cosine similarity": shown_by("cosine", "cos_pos", "cos_neg", arm=TAU_ARMS, how="positives against negatives, F.cosine_similarity"),
        "Temperature": shown_by("hardest_negative", "hardest_negative_weight", arm=TAU_ARMS,
                                how="a small τ hands the hardest negative most of the weight"),
        "Cross-entropy": shown_by("loss", "loss", arm=TAU_ARMS, how="InfoNCE is the cross-entropy of naming the partner among N"),
    }
    formula = (r"\begin{aligned}\mathcal{L} &= -\frac1N\sum_i \log\frac{e^{\cos(a_i, b_i)/\tau}}{\sum_j e^{\cos(a_i, b_j)/\tau}}"
               r"\qquad \mathcal{L} = \log N\ \text{at uniform similarity}\\"
               r"I(\text{view}_1; \text{view}_2) &\ge \log N - \mathcal{L}\qquad"
               r"w_{ij} = \frac{e^{s_{ij}/\tau}}{\sum_{k\ne i} e^{s_{ik}/\tau}}\end{aligned}")
    Config = Config
    tiny = {"temperatures": "0.1", "steps": 12, "batch": 32}
    presets = {
        "the failure: a 2-d embedding": {"embedding_dim": 2},
        "the fix: 16 dimensions, Chen et al. 2020's τ sweep": {"embedding_dim": 16, "temperatures": "0.05,0.1,0.5,1"},
        "the extremes: τ = 0.02 and 1": {"temperatures": "0.02,1"},
        "fewer negatives (N = 16)": {"batch": 16},
        "more negatives (N = 512)": {"batch": 512},
    }

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"example_steps": 3.42e-07, "log_pairs": 5.6e-08, "pair_steps": 9.46e-10, "run": 0.0473, "steps": 0.000692}
    rates_reference = 0.1405  # the reference workload's CPU s beside the fit
    timed = ({"batch": 512, "steps": 20}, {"steps": 600, "temperatures": "0.1", "batch": 64},
             {"embedding_dim": 64, "steps": 150, "temperatures": "0.02,1"})

    def work(self, config: Config) -> Work:
        """One encoder per τ side by side, each step two views of `batch` points and the batch × batch scores;
        every log fits and scores the ridge probe on 512 + 512 held-out points."""
        arms, batch = len(taus_of(config)), config.batch
        steps, logged = arms * config.steps, arms * logs(config.steps, 50)
        return Work({"steps": steps, "example_steps": steps * batch, "pair_steps": steps * batch ** 2 * config.embedding_dim,
                     "logs": logged, "log_pairs": logged * batch ** 2},
                    floats=arms * (4 * 7000 + 2 * batch * 200 + 4 * batch ** 2) + 2048 * 64)

    def phases(self, config: Config, batched: bool = True) -> list[list[Arm]]:
        """The raw-observation probe, then the τ arms: one batched encoder for all of them, or
        (`batched=False`, the reference the tests compare with) one encoder each, side by side."""
        if batched:
            return self.seed_phases(config, [config.seed])
        from engines.loop.training import log_every_for
        from engines.supervised.contrastive import TauArm, raw_records, train_tau_arm
        fields = config.model_dump(include={"batch", "embedding_dim", "classes", "view_noise", "nuisance", "lr", "seed"})
        raw = Arm(RAW, raw_records(TauArm(tau=1.0, **fields)), 1, cost=5)
        trained = [Arm(arm_of(t), train_tau_arm(TauArm(tau=t, **fields), config.steps, log_every_for(config.steps, 50)),
                       config.steps) for t in taus_of(config)]
        return in_turn(raw) + together(*trained)

    def seed_phases(self, config: Config, seeds: list[int]) -> list[list[Arm]]:
        """Every seed's raw-observation probe, then the τ arms of every seed as one batched encoder."""
        from engines.loop.batched import arm_cost
        from engines.loop.training import log_every_for
        from engines.supervised.contrastive import TauArm, raw_records
        from engines.supervised.contrastive_arms import train_tau_arms
        fields = config.model_dump(include={"batch", "embedding_dim", "classes", "view_noise", "nuisance", "lr"})
        raws = [Arm(name, as_arm(name, raw_records(TauArm(tau=1.0, seed=seed, **fields))), 1, cost=5)
                for name, seed in zip(named([RAW], seeds), seeds)]
        specs = [TauArm(tau=t, seed=seed, **fields) for seed in seeds for t in taus_of(config)]
        return in_turn(*raws) + together(Arm("τ arms", train_tau_arms(named(tau_arms(config), seeds), specs, config.steps,
                                                                      log_every_for(config.steps, 50)),
                                             config.steps, arm_cost(len(specs))))

    def batched_bytes(self, config: Config) -> float:
        """The τ arms as one batched encoder (32 → 64 → 64 → d, Adam) and the larger of the step's pass (two
        views of the batch, and the N × N scores) and the probe's (2 · PROBE_SIZE held-out views)."""
        weights = arms_memory.linear_weights(32, 64, 64, config.embedding_dim)
        width = 64 + 64 + config.embedding_dim
        activations = max(2 * config.batch * width + config.batch ** 2, 2 * PROBE_SIZE * width)
        return arms_memory.batched_bytes(len(taus_of(config)), weights, 2, activations)

    def refusal(self, config: Config, machine: Machine) -> str | None:
        return arms_memory.refusal(f"temperatures={config.temperatures}", len(taus_of(config)),
                                   self.batched_bytes(config), machine.memory_limit_bytes,
                                   machine.memory_basis(arms_memory.FILL))

    def arm_universe(self) -> list[str]:
        every = [arm_of(float(t)) for sweep in Sweep.__args__ for t in sweep.split(",")]
        return list(dict.fromkeys([*every, RAW]))

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records, last, arms = Records(frame), config.steps - 1, tau_arms(config)
        probe = {arm: records.at(arm, "probe_accuracy", last) for arm in arms}
        bound = {arm: records.at(arm, "mi_bound", last) for arm in arms}
        done = [v for v in probe.values() if v is not None]
        headline = {"probe accuracy, best τ": max(done) if done else None,
                    "probe accuracy, raw observations": records.first(RAW, "probe_accuracy"),
                    "log N − L, largest (nats)": max([v for v in bound.values() if v is not None], default=None),
                    "final loss at the smallest τ": records.at(arms[0], "loss", last)}
        return {"headline": headline, "probe_accuracy": probe, "mi_bound": bound,
                "hardest_negative_weight_step0": {arm: records.at(arm, "hardest_negative_weight", 0) for arm in arms},
                "log_n": records.first(arms[0], "log_n")}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records, last, arms = Records(frame), config.steps - 1, tau_arms(config)
        probe = look.probe_sentence(records, arms, config.classes, last)
        if probe is None:
            return Explanation(waiting="Run to train one encoder per τ on the same pairs of views.")
        details = [look.loss_sentence(records, arms, config.batch, last), look.hardest_sentence(records, arms, last),
                   look.cosine_sentence(records, arms, last), look.optimum_sentence(records, arms, last, PROBE_SIZE)]
        return Explanation(probe, tuple(d for d in details if d is not None))

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records, arms = Records(frame), tau_arms(config)
        colors = arm_colors([*arms, RAW], self.arm_universe())
        log_n = records.first(arms[0], "log_n")
        chance = dict(chance=log_n, chance_label=f"log N = log {config.batch}: uniform similarity") if log_n else {}
        def cosine() -> go.Figure:
            figure = curves_figure(records, colors, "cos_pos", arms=arms, title="Mean cosine similarity: positives (solid), "
                                   "negatives (dashed)", y_title="cosine similarity", log_y=False)
            negatives = curves_figure(records, colors, "cos_neg", arms=arms, title="", y_title="")
            return figure.add_traces(look.dashed(negatives, "negatives").data)

        return Figures({
            "loss": lambda: curves_figure(records, colors, "loss", arms=arms, title="InfoNCE loss", y_title="nats", log_y=False,
                                          **chance),
            "mi_bound": lambda: curves_figure(records, colors, "mi_bound", arms=arms, log_y=False, y_title="nats",
                                              title="log N − L: a lower bound on I(view₁; view₂)"),
            "hardest_negative": lambda: look.hardest_figure(curves_figure(
                records, colors, "hardest_negative_weight", arms=arms, log_y=True, y_title="share of the negatives' weight",
                title="Weight on the hardest negative (mean over anchors)"), config.batch),
            "align_uniform": lambda: look.align_uniform_figure(records, colors, arms),
            "cosine": cosine,
            "probe": lambda: look.probe_figure(curves_figure(records, colors, "probe_accuracy", arms=arms, log_y=False,
                                                             title="Linear-probe accuracy on the latent class (held-out views)",
                                                             y_title="accuracy"), records, config.classes),
            "embeddings": lambda: look.embeddings_figure(records, arms, config.classes),
        })
