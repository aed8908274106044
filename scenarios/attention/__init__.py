"""Scaled dot-product attention: why divide by √d_k, and what do several heads buy?

Attention turns each token into a query q, a key k and a value v (three linear maps), scores
every key against the query, and mixes the values by softmax(QKᵀ/√d_k). For q and k with
unit-variance entries, q·k is a sum of d_k unit-variance products: Var(q·k) = d_k. Without
the 1/√d_k the scores spread as √d_k, the softmax puts almost all weight on one key, and its
Jacobian diag(p) − ppᵀ, the gradient that reaches the scores, goes to zero. The sweep draws
random q, k for d_k = 4 … 512 and measures all of it, unscaled and scaled.

Then a tiny attention-only Transformer (embeddings, 1–2 self-attention layers through
torch's `scaled_dot_product_attention`, no MLP) learns a lookup: the context holds 8
key→value pairs, and each query token names two keys whose values it must return. One head
is one weighted mean of value vectors: attending to both keys it reads the sum of both
values and loses which went with which, so it gets one lookup right and guesses the other's
order. Two heads make one lookup each (so do two layers with one head). The same model with
every score frozen at 0 — uniform weights, no attention — sees only the bag of values.
Measured at the defaults (200 steps): two heads 99.9–100% on seeds 0–23, one head 52–55%,
uniform scores 22–23% (chance 1/16); the sweep's Var(q·k)/d_k within 5% of 1 on seeds 0–19.

Look at the sweep (variance, entropy, score gradient against d_k), the held-out accuracy
against the number of heads, and the attention maps: with two heads, each query's row in
head 1 lights one pair and in head 2 the other.
"""
import math
from typing import Literal

import pandas as pd
from pydantic import Field

from scenarios.attention import figures as look
from scenarios.attention.figures import SWEEP, heads_label, heads_of, uniform_label
from scenarios.base import Arm, Scenario, ScenarioConfig, Work, shown_by, together, view_field
from scenarios.cost import logs
from scenarios.explanation import Explanation, join
from scenarios.plotting import Figures, arm_colors, as_percent, curves_figure
from scenarios.records import Records

DIMS = [4, 8, 16, 32, 64, 128, 256, 512]  # the d_k sweep
SWEEP_QUERIES = 512
Heads = Literal["1,2,4", "1,2,4,8", "1,2", "1", "2", "4,8"]


class Config(ScenarioConfig):
    d_k: int = view_field(64, title="d_k (key width)", ge=4, le=512, json_schema_extra={"scale": "log"},
                          description="The d_k whose query is drawn (nearest of the sweep 4…512); every d_k is recorded.")
    keys: int = Field(16, ge=4, le=64, description="Keys each random query scores: the softmax's length (entropy ≤ ln keys).")
    heads: Heads = Field("1,2,4", description="Head counts to train, one arm each: d_model 32 split into heads of 32/heads.")
    layers: int = Field(1, ge=1, le=2, description="Self-attention layers. With two, one head can make both lookups in turn.")
    pairs: int = Field(8, ge=4, le=12, description="Key→value pairs in each context (16 possible keys, 16 values).")
    steps: int = Field(200, ge=10, le=2000, description="Adam steps, a fresh batch of 32 contexts each.")
    lr: float = Field(5e-3, ge=1e-4, le=3e-2, json_schema_extra={"scale": "log"}, description="Adam learning rate.")
    baseline: bool = Field(True, description="Also train the same model with every score frozen at 0: uniform weights, no attention.")
    map_heads: int = view_field(2, title="maps of the arm with heads", ge=1, le=8, description="Whose attention maps to draw: the arm with this many heads (or the nearest).")


def heads_of_config(config: Config) -> list[int]:
    return [int(h) for h in config.heads.split(",")]


def model_arms(config: Config) -> dict[str, dict]:
    """Label -> HeadsArm fields: one arm per head count, then the uniform-score baseline (as many
    heads as the largest; with every score 0 the head count changes nothing)."""
    common = dict(layers=config.layers, pairs=config.pairs, lr=config.lr, seed=config.seed)
    arms = {heads_label(h, config.layers): dict(heads=h, **common) for h in heads_of_config(config)}
    if config.baseline:
        arms[uniform_label(config.layers)] = dict(heads=max(heads_of_config(config)), uniform=True, **common)
    return arms


class Attention(Scenario):
    id = "attention"
    title = "Scaled dot-product attention"
    order = 33
    arms_note = ("The arms train side by side as separate models, not as one batched model: their heads and layers "
                 "differ in shape.")
    topic = "Architecture"
    question = "Why does attention divide its scores by √d_k, and what do several heads buy?"
    terms = {
        "Attention": shown_by("attention_maps", "attn/", arm="head",
                              how="each query's weights over the drawn example's positions, per head"),
        "Scaled dot-product attention": shown_by("entropy", "entropy/scaled", "entropy/unscaled", "sdpa_max_abs_diff", arm=SWEEP,
                                                 how="softmax(QKᵀ/√d_k): scaled scores keep their entropy at every d_k"),
        "Query / Key / Value (Q/K/V)": shown_by("attention_maps", "attn/", arm="head",
                                                how="a row per query: its match weights over the keys, the shares "
                                                    "in which their values are mixed"),
        "Multi-head attention": shown_by("accuracy_vs_heads", "eval_accuracy", arm="heads",
                                         how="one head makes one lookup: two heads solve what one cannot"),
        "Softmax": shown_by("example_weights", "example_weight/", "max_weight/unscaled", arm=SWEEP,
                            how="unscaled scores push one key's weight toward 1"),
    }
    formula = (r"\begin{aligned}\mathrm{Attention}(Q,K,V) &= \mathrm{softmax}\!\Big(\frac{QK^{\top}}{\sqrt{d_k}}\Big)V"
               r"\qquad \mathrm{Var}(q\cdot k) = d_k\ \text{for unit-variance entries}\\"
               r"\frac{\partial p}{\partial s} &= \mathrm{diag}(p) - pp^{\top} \to 0\ \text{as}\ p \to \text{one-hot}\end{aligned}")
    Config = Config
    tiny = {"heads": "1,2", "steps": 20, "keys": 8}
    presets = {
        "the failure: one head, two lookups": {"heads": "1", "baseline": True},
        "the fix: two heads": {"heads": "1,2", "map_heads": 2},
        "two layers, one head": {"heads": "1,2", "layers": 2, "map_heads": 1},
        "Vaswani et al. 2017: 8 heads of d_model/8": {"heads": "1,2,4,8", "map_heads": 8},
    }

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"keys": 0.00444, "layer_logs": 0.0033, "run": 0.00529, "steps": 0.000249, "token_layer_steps": 9.65e-05}
    rates_reference = 0.1371  # the reference workload's CPU s beside the fit
    timed = ({"heads": "1,2,4,8", "steps": 40}, {"steps": 300, "heads": "1", "baseline": False}, {"keys": 64, "heads": "2", "steps": 100})

    def work(self, config: Config) -> Work:
        """The d_k sweep (512 queries over `keys` keys at 8 sizes), then one arm per head count (and the
        baseline) on batches of 32, `pairs` + 4 tokens through `layers` attention layers."""
        heads = heads_of_config(config)
        arms, tokens = len(heads) + config.baseline, config.pairs + 4
        steps = arms * config.steps
        return Work({"keys": config.keys, "steps": steps, "token_layer_steps": steps * tokens * config.layers,
                     "layer_logs": arms * logs(config.steps, 50) * config.layers},
                    floats=512 * config.keys * 1024 + arms * config.layers * 32 * tokens * 32 * 16)

    def phases(self, config: Config) -> list[list[Arm]]:
        from engines.loop.training import log_every_for
        from engines.sequence.attention import score_sweep
        from engines.sequence.retrieval import HeadsArm, train_heads_arm
        log_every = log_every_for(config.steps, 50)
        sweep = Arm(SWEEP, score_sweep(DIMS, config.keys, SWEEP_QUERIES, config.seed), len(DIMS), cost=5.0)
        trained = [Arm(name, train_heads_arm(HeadsArm(**spec), config.steps, log_every), config.steps)
                   for name, spec in model_arms(config).items()]
        return together(sweep) + together(*trained)

    def arm_universe(self) -> list[str]:
        every = [heads_label(h, layers) for layers in (1, 2) for h in (1, 2, 4, 8)]
        return list(dict.fromkeys([heads_label(2, 1), heads_label(1, 1), uniform_label(1), *every, uniform_label(2), SWEEP]))

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records, last = Records(frame), config.steps - 1
        accuracy = {arm: look.final_accuracy(records, arm, last) for arm in model_arms(config)}
        heads = {arm: a for arm, a in accuracy.items() if heads_of(arm) and a is not None}
        span = look.variance_ratio_range(records)
        top = DIMS[-1]
        headline = {"Var(q·k)/d_k, farthest from 1": max(span, key=lambda r: abs(r - 1)) if span else None,
                    f"unscaled entropy at d_k = {top} (nats)": records.at(SWEEP, "entropy/unscaled", top),
                    "held-out accuracy, best head count": max(heads.values()) if heads else None,
                    "held-out accuracy, uniform scores": accuracy.get(uniform_label(config.layers))}
        return {"headline": headline, "accuracy": accuracy, "variance_ratio_range": span,
                "sdpa_max_abs_diff": look.sdpa_gap([SWEEP, *model_arms(config)])(records),
                "sweep": {d: {m: records.at(SWEEP, m, d) for m in ("var_qk", "entropy/unscaled", "entropy/scaled",
                                                                   "grad_scores/unscaled", "grad_scores/scaled")}
                          for d in look.dims(records)}}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records, last, arms = Records(frame), config.steps - 1, list(model_arms(config))
        sweep = look.saturation_sentence(records, config.keys, config.d_k)
        accuracy = look.accuracy_sentence(records, arms, last)
        leading = [s for s in (sweep, accuracy) if s is not None]
        if not leading:
            return Explanation(waiting="Run to sweep random q, k over d_k, then train one lookup model per head count.")
        details = [s for s in (look.gradient_sentence(records), look.variance_sentence(records),
                               look.sdpa_sentence(records, [SWEEP, *arms])) if s]
        return Explanation(join(*leading), tuple(details))

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records, arms, last = Records(frame), list(model_arms(config)), config.steps - 1
        colors = arm_colors(arms, self.arm_universe())
        trained = [arm for arm in arms if heads_of(arm)]
        shown = min(trained, key=lambda a: abs(heads_of(a) - config.map_heads)) if trained else None
        lines = dict(marker=config.d_k)
        return Figures({
            "variance": lambda: look.sweep_figure(records, "var_qk", "Var(q·k) against d_k (random unit-variance q, k)",
                                                  "Var(q·k)", log_y=True, reference=("d_k", DIMS), **lines),
            "entropy": lambda: look.sweep_figure(records, "entropy", f"Softmax entropy over {config.keys} keys against d_k",
                                                 "entropy (nats)", log_y=False, reference=(f"ln {config.keys}", [math.log(config.keys)] * len(DIMS)), **lines),
            "score_gradient": lambda: look.sweep_figure(records, "grad_scores", "Gradient reaching the scores, ‖∂L/∂scores‖",
                                                        "‖∂L/∂s‖, mean over queries", log_y=False, **lines),
            "example_weights": lambda: look.example_weights_figure(records, config.d_k),
            "loss": lambda: curves_figure(records, colors, "loss", arms=arms, title="Training loss (cross-entropy per lookup)",
                                          y_title="nats", log_y=False),
            "eval_accuracy": lambda: as_percent(curves_figure(
                records, colors, "eval_accuracy", arms=arms, log_y=False, chance=1 / look.VALUES,
                title="Held-out lookup accuracy (256 contexts never trained on)", y_title="lookups right",
                chance_label=f"chance 1/{look.VALUES} = {100 / look.VALUES:.1f}%")),
            "accuracy_vs_heads": lambda: look.heads_figure(records, colors, arms, last),
            "attention_maps": lambda: look.maps_figure(records, shown),
        })
