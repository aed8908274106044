"""Positional encodings and RoPE: how does attention tell positions apart, and which way generalizes?

Self-attention compares every token with every other by content alone: without a position
signal (and without a mask) it is permutation-equivariant — permute the input tokens and the
outputs come out permuted (to float32 rounding, ~1e-6; in float64 to 1e-15). So a model without positions cannot learn a rule
about order. The task: at every position output the token `offset` places back. An order-blind
model sees only its own token and the bag of all tokens; the best it can do is to guess the
commonest other token (the "order-free guess", computed on the very sequences evaluated).

Three ways to add order, each on the same model, seed and batches: a learned vector per
absolute position; the fixed sinusoids of Vaswani et al. (sin and cos of p·θ_i); and RoPE
(Su et al. 2021), which rotates each pair of q's and k's dimensions by m·θ_i, θ_i =
10000^(−2i/d). A rotation keeps norms and ⟨R_m q, R_n k⟩ = ⟨R_(m−n) q, k⟩: scores see only
the offset m − n, which is what "the token one back" is about. Evaluated on sequences longer
than any seen in training, learned rows past the trained length were never trained and the
sinusoids meet positions they never saw; RoPE meets only offsets. Measured at the defaults
(seeds 0–5): every scheme 99–100% at length 8, no positions 24–27% against the order-free
26–29%; at length 16 RoPE 100%, learned 50–51%, sinusoidal 47–57%; at 32 RoPE 95–99%.

Look at the length plot (accuracy against evaluation length, trained length marked), the
attention maps (a diagonal stripe `offset` below the main one), RoPE's dot products lying
on one curve of m − n, and the permutation test (rounding only, without positions).
"""
import math

import pandas as pd
from pydantic import Field

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, in_turn, shown_by, together, view_field
from scenarios.cost import logs
from scenarios.explanation import Explanation
from scenarios.plotting import Figures, arm_colors, curves_figure
from scenarios.positions import figures as look
from scenarios.positions.figures import LENGTH_PREFIX, ORDER_FREE, ROTATION, SCHEMES
from scenarios.records import Records

D_MODEL, VOCAB = 24, 16  # engines/sequence/positions.py; every head count 1-4 leaves an even d_head for RoPE


class Config(ScenarioConfig):
    train_length: int = Field(8, ge=4, le=16, description="Tokens per training sequence. Evaluated at 1×, 1.5×, 2×, 3× and 4× it.")
    offset: int = Field(1, ge=1, le=3, description="Output the token this many places back (positions before it have no target).")
    layers: int = Field(1, ge=1, le=2, description="Self-attention layers (no MLP, no mask), d_model 24.")
    heads: int = Field(2, ge=1, le=4, description="Heads per layer (d_head = 24/heads).")
    rope_base: float = Field(1e4, ge=10.0, le=1e6, json_schema_extra={"scale": "log"},
                             description="RoPE's base b: θ_i = b^(−2i/d). At b = 100 accuracy falls past 1.5× the trained "
                                         "length (seed 0: 84% at 16, 43% at 32); at 10⁴, 98% at 32.")
    steps: int = Field(200, ge=10, le=2000, description="Adam steps, a fresh batch of 64 sequences each.")
    lr: float = Field(3e-3, ge=1e-4, le=3e-2, json_schema_extra={"scale": "log"}, description="Adam learning rate.")
    map_head: int = view_field(1, title="maps of head", ge=1, le=4, description="Which head's attention maps to draw (every head is recorded).")


def arm_specs(config: Config) -> dict[str, dict]:
    fields = config.model_dump(include={"train_length", "offset", "layers", "heads", "rope_base", "lr", "seed"})
    return {arm: dict(scheme=scheme, **fields) for arm, scheme in SCHEMES.items()}


class Positions(Scenario):
    id = "positions"
    title = "Positional encodings and RoPE"
    order = 36
    arms_note = ("The arms train side by side as separate models, not as one batched model: their position schemes "
                 "differ, which is code, not numbers.")
    topic = "Architecture"
    question = "How does attention, blind to order, learn where tokens are, and which encoding carries to longer sequences?"
    terms = {
        "Positional encoding": shown_by("length_generalization", "eval_accuracy/", "equivariance_error",
                                        how="no positions, learned, sinusoidal and RoPE on one task, at and past the trained length"),
        "RoPE": shown_by("rope_rotation", "rope_dot/", "rope_relative_error", arm=ROTATION,
                         how="⟨R_m q, R_n k⟩ depends on m − n only: every pair lies on one curve"),
        "Attention": shown_by("attention_maps", "attn/", arm="RoPE",
                              how="each query's weights over the keys: a stripe `offset` below the diagonal"),
    }
    formula = (r"\begin{aligned}R_m &= \bigoplus_i \begin{pmatrix}\cos m\theta_i & -\sin m\theta_i\\ \sin m\theta_i & \cos m\theta_i"
               r"\end{pmatrix},\quad \theta_i = 10000^{-2i/d}\\ \langle R_m q, R_n k\rangle &= \langle R_{m-n}\,q, k\rangle"
               r"\qquad \mathrm{PE}(p, 2i) = \sin p\theta_i,\ \mathrm{PE}(p, 2i{+}1) = \cos p\theta_i\end{aligned}")
    Config = Config
    tiny = {"steps": 12, "train_length": 6}
    presets = {
        "the failure: RoPE with base 100": {"rope_base": 100.0},
        "the fix: Su et al. 2021's base 10000": {"rope_base": 1e4},
        "two back, two layers": {"offset": 2, "layers": 2},
        "trained on 4 tokens": {"train_length": 4},
    }

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"head_layer_steps": 0.000912, "run": 0.269, "snapshots": 0.000745, "token_layer_logs": 3.23e-05,
             "token_layer_steps": 1.52e-05}
    rates_reference = 0.1388  # the reference workload's CPU s beside the fit
    timed = ({"train_length": 16, "steps": 20}, {"layers": 2, "heads": 4, "steps": 20}, {"train_length": 4, "steps": 80})

    def work(self, config: Config) -> Work:
        """One arm per encoding side by side, each step 64 sequences of `train_length` through `layers`
        layers; every log scores 128 held-out sequences, ten of them every length up to 4× (attention maps)."""
        arms, length, layers = len(SCHEMES), config.train_length, config.layers
        steps, logged = arms * config.steps, arms * logs(config.steps, 50)
        return Work({"steps": steps, "token_layer_steps": steps * length * layers, "head_layer_steps": steps * layers * config.heads, "logs": logged,
                     "token_layer_logs": logged * length * layers, "snapshots": arms * layers * length ** 2},
                    floats=arms * layers * (4 * 7000 + 64 * length * 24 * 16) + 128 * 64 * 24 * 8)

    def phases(self, config: Config) -> list[list[Arm]]:
        from engines.loop.training import log_every_for
        from engines.sequence.positions import MAX_LENGTH, PositionArm, order_free_records, rope_records, train_position_arm
        log_every = log_every_for(config.steps, 50)
        fixed = in_turn(Arm(ORDER_FREE, order_free_records(config.train_length, config.offset, config.seed), 1, cost=5),
                        Arm(ROTATION, rope_records(D_MODEL // config.heads, min(MAX_LENGTH, 4 * config.train_length, 32),
                                                   config.rope_base, config.seed), 1, cost=5))
        trained = [Arm(arm, train_position_arm(PositionArm(**spec), config.steps, log_every), config.steps)
                   for arm, spec in arm_specs(config).items()]
        return fixed + together(*trained)

    def arm_universe(self) -> list[str]:
        return [*SCHEMES, ORDER_FREE, ROTATION]

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records = Records(frame)
        by_length = {arm: {n: records.last(arm, f"{LENGTH_PREFIX}{n:02d}") for n in look.lengths(records, arm)}
                     for arm in [*SCHEMES, ORDER_FREE]}
        trained, longest = config.train_length, max((n for v in by_length.values() for n in v), default=None)
        schemes = [by_length[arm].get(trained) for arm in list(SCHEMES)[1:]]
        headline = {"in-length accuracy, lowest positional scheme": min(schemes) if None not in schemes else None,
                    "in-length accuracy, no positions": by_length[look.NONE].get(trained),
                    "RoPE accuracy at the longest length": by_length[look.ROPE].get(longest),
                    "learned absolute accuracy at the longest length": by_length[look.LEARNED].get(longest)}
        return {"headline": headline, "accuracy_by_length": by_length, "longest_length": longest,
                "equivariance_error": {arm: records.last(arm, "equivariance_error") for arm in SCHEMES},
                "rope_relative_error": records.first(ROTATION, "rope_relative_error"),
                "rope_norm_error": records.first(ROTATION, "rope_norm_error")}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records, arms = Records(frame), list(SCHEMES)
        sentences = [look.lengths_sentence(records, arms, config.train_length),
                     look.permutation_sentence(records, arms, config.train_length),
                     look.rope_sentence(records, D_MODEL // config.heads)]
        sentences = [s for s in sentences if s is not None]
        if not sentences:
            return Explanation(waiting="Run to train the four schemes on the same batches and test them past the trained length.")
        return Explanation(sentences[0], tuple(sentences[1:]))

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records, arms = Records(frame), list(SCHEMES)
        colors = arm_colors([*arms, ORDER_FREE, ROTATION], self.arm_universe())
        guess = records.first(ORDER_FREE, f"{LENGTH_PREFIX}{config.train_length:02d}")
        chance = dict(chance=guess, chance_label=f"order-free guess {guess:.1%}") if guess is not None else {}
        return Figures({
            "length_generalization": lambda: look.length_figure(records, colors, config.train_length),
            "loss": lambda: curves_figure(records, colors, "loss", arms=arms, title="Training loss", log_y=False,
                                          y_title="cross-entropy per target (nats)", chance=math.log(VOCAB),
                                          chance_label=f"uniform guess ln {VOCAB}"),
            "eval_accuracy": lambda: look.in_percent(curves_figure(
                records, colors, "eval_accuracy", arms=arms, log_y=False,
                title=f"Held-out accuracy at the trained length {config.train_length}",
                y_title="held-out accuracy", chance_in_legend=True, **chance)),
            "attention_maps": lambda: look.maps_figure(records, arms, config.map_head),
            "rope_rotation": lambda: look.rope_figure(records, colors),
            "permutation": lambda: look.permutation_figure(records, colors, arms),
        })
