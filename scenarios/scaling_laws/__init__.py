"""Scaling laws: how does the loss fall with parameters N and tokens D, and how should a compute budget be split?

A grid of tiny language models (`engines.sequence.scaling`: the tiny LM at widths d_model 8, 16, 24, …,
2 layers) each trained from scratch on a budget of D tokens of a synthetic order-2 Markov source over
16 words, whose entropy rate H is known exactly: the floor no model's held-out loss goes below. Every
point has its own warmup and cosine decay to its own last step. The grid is one run; each point's
held-out loss appears as it finishes, and each point is kept in the run store's point cache, so a rerun
with one more size or budget trains only the new points.

The law L(N, D) = E + A/N^α + B/D^β is fitted to the points (Chinchilla's Approach 3: Huber loss on
log L, Adam from 243 starts at once, then L-BFGS; `engines.sequence.scaling_fit`), twice: with N
counting the non-embedding parameters (as Kaplan et al. did) and with the embeddings (token and
position tables, read-out). The exponents move with the count (Pearce & Song 2024).

**IsoFLOP curves** are drawn from the fitted law, L(N, C/6N) at compute budgets inside the grid's
range, and the compute-optimal N and D come from the law in closed form (N_opt ∝ C^a, a = β/(α+β)):
not from parabolas through the measured points (Approach 2), which are biased when the grid is not
centred on each budget's minimum (our grid is a rectangle in N × D, so no budget's points are). Stars
outside the shaded band of measured sizes are extrapolations. The form is an assumption: these models
learn in stages (word frequencies, then the last word, then the order-2 state, which needs attention to
the word before), and a model that has not reached the last stage sits far above H, so the fitted E
says little about the floor at this scale (the page gives both). Look at: the smallest-D row, which
flattens (more parameters do not help a model that has seen too little data), and the fitted
exponents beside Chinchilla's 0.5 and Kaplan's 0.73: at this toy scale they need not agree.
"""
from typing import Literal

from pydantic import Field

from scenarios.base import Arm, Run, Scenario, ScenarioConfig, Work, shown_by, view_field
from scenarios.explanation import Explanation
from scenarios.plotting import Figures
from scenarios.records import Records
from scenarios.scaling_laws import claims, figures as look
from scenarios.scaling_laws.grid import COUNTS, FIT, GRID, SOURCE, fit_arm, grid_arm

WIDTHS = (8, 16, 24, 32, 48, 64, 96, 128)  # engines.sequence.scaling.WIDTHS (the size ladder, d_model)
STEPS = (25, 50, 100, 200, 400, 800)       # engines.sequence.scaling.STEPS (the budget ladder, 512 tokens a step)


class Config(ScenarioConfig):
    sizes: int = Field(5, ge=3, le=8, description="Model sizes: the first this many widths of d_model 8, 16, 24, 32, "
                                                   "48, 64, 96, 128 (5: 1.9k to 57k non-embedding parameters, 30×).")
    budgets: int = Field(4, ge=2, le=6, description="Token budgets: the first this many of 25, 50, 100, 200, 400, 800 "
                                                     "steps of 512 tokens (D = 12,800 to 409,600 tokens).")
    compute_budgets: int = Field(4, ge=3, le=4, description="IsoFLOP curves drawn: compute budgets evenly spaced (log) "
                                                             "inside the grid's range of 6·N·D.")
    lr: float = Field(2e-2, ge=1e-3, le=5e-2, json_schema_extra={"scale": "log"},
                      description="AdamW peak learning rate of every point (10% warmup, cosine decay to 0).")
    count: Literal["non-embedding", "with embeddings"] = view_field(
        "non-embedding", title="parameters counted", description="Which parameter count N the charts and the takeaway use (both are fitted).")


class ScalingLaws(Scenario):
    id = "scaling-laws"
    title = "Scaling laws and compute-optimal training"
    order = 45
    topic = "Language models"
    picture = "grid"
    counted = ()  # its arms are indexed by grid point and budget: many short trainings, no one count of steps
    question = "How does a language model's loss fall with its parameters and its tokens, and how should a compute budget be split?"
    terms = {
        "Entropy rate": shown_by("grid", "entropy_rate", arm=SOURCE, how="the dotted floor under every point's held-out loss"),
        "Embedding": shown_by("exponents", "total_params", "body_params", arm=GRID,
                              how="N counted with and without the embedding tables moves the fitted exponents"),
    }
    methods = {"Scaling laws": shown_by("isoflop", "E", "alpha", "beta", "a", "b", arm="fit, N non-embedding",
                                        how="a grid of tiny LMs over N and D, the fitted L(N, D) = E + A/N^α + B/D^β, "
                                            "isoFLOP curves and the compute-optimal exponents beside Chinchilla's and Kaplan's")}
    formula = (r"\begin{aligned}L(N, D) &= E + \frac{A}{N^{\alpha}} + \frac{B}{D^{\beta}},\qquad C \approx 6ND\\"
               r"N_{\text{opt}}(C) &= G\left(\tfrac{C}{6}\right)^{a},\quad D_{\text{opt}}(C) = G^{-1}\left(\tfrac{C}{6}\right)^{b},"
               r"\quad a = \tfrac{\beta}{\alpha+\beta},\; b = \tfrac{\alpha}{\alpha+\beta},\; "
               r"G = \left(\tfrac{\alpha A}{\beta B}\right)^{\frac{1}{\alpha+\beta}}\end{aligned}")
    Config = Config
    tiny = {"sizes": 3, "budgets": 2, "compute_budgets": 3}
    tiny_space = {"sizes": [3, 4], "budgets": [2]}  # random tiny configs stay near a second of training
    presets = {
        "a larger grid (7 sizes × 5 budgets)": {"sizes": 7, "budgets": 5},
        "one more size (6 × 4: the first 20 points come from the point cache)": {"sizes": 6},
        "a lower learning rate (5e-3)": {"lr": 5e-3},
    }
    # s per unit on the 2-core machine (measured 2026-12-05 by hand from the default run's points):
    rates = {"run": 0.3, "steps": 2.8e-3, "width_steps": 1.6e-6, "fits": 0.5}
    rates_reference = 0.1409
    timed = ({"sizes": 3, "budgets": 2}, {"sizes": 3, "budgets": 3}, {"sizes": 4, "budgets": 2})
    arms_note = ("Every grid point is its own model, trained from scratch to its own budget (its own warmup and "
                 "cosine decay), one after another; the same seed gives every point the same data stream.")

    def specs(self, config: Config) -> list:
        from engines.sequence.scaling import PointSpec
        return [PointSpec(width, steps, config.lr, config.seed, config.seed)
                for width in WIDTHS[:config.sizes] for steps in STEPS[:config.budgets]]

    def execute(self, config: Config, run: Run) -> None:
        from engines.sequence.scaling import Data
        data: list = []

        def data_of():
            if not data:
                data.append(Data(config.seed))
            return data[0]
        floor = data_of()
        run.add(SOURCE, 0, {"entropy_rate": floor.entropy_rate, "sample_floor": floor.sample_floor})
        grid = grid_arm(self.id, self.code_version(), self.specs(config), data_of, run)
        run.drive([[grid], [fit_arm(count, run, config.compute_budgets) for count in COUNTS]])

    def arm_universe(self) -> list[str]:
        return [GRID, SOURCE, *FIT.values()]

    def work(self, config: Config) -> Work:
        """Every point's training steps (a step's time grows with width²), and the two fits."""
        steps = sum(STEPS[:config.budgets]) * config.sizes
        width_steps = sum(STEPS[:config.budgets]) * sum(w * w for w in WIDTHS[:config.sizes])
        widest = WIDTHS[config.sizes - 1]
        return Work({"steps": steps, "width_steps": width_steps, "fits": 2},
                    floats=4 * 24 * widest ** 2 + 32 * 16 * widest * 20 + 200_000)

    def summarize(self, frame, config: Config) -> dict:
        records = Records(frame)
        fits = {count: {name: records.first(FIT[count], name) for name in ("E", "A", "B", "alpha", "beta", "a", "b")}
                for count in COUNTS if records.has("alpha", FIT[count])}
        table = claims.grid_table(records)
        headline = {"points": float(len(table)), "best held-out loss": float(table["heldout_loss"].min()) if len(table) else None,
                    "entropy rate H": records.first(SOURCE, "entropy_rate")}
        for count, fit in fits.items():
            headline[f"a (N_opt ∝ C^a), N {count}"] = fit["a"]
        return {"headline": headline, "fits": fits}

    def explain(self, frame, config: Config) -> Explanation:
        records = Records(frame)
        count = config.count
        other = next(c for c in COUNTS if c != count)
        takeaway = claims.law_sentence(records, count)
        details = [claims.data_limited_sentence(records), claims.floor_sentence(records, count),
                   claims.other_count_sentence(records, count, other), claims.fit_quality_sentence(records, count)]
        details = [d for d in details if d is not None]
        if takeaway is None:
            if not details:
                return Explanation(waiting="Run to train the grid of models; the law is fitted once every point is in.")
            takeaway, details = details[0], details[1:]
        return Explanation(takeaway, tuple(details))

    def figures(self, frame, config: Config) -> Figures:
        records = Records(frame)
        return Figures({
            "grid": lambda: look.grid_figure(records, config.count),
            "isoflop": lambda: look.isoflop_figure(records, config.count),
            "optimal": lambda: look.optimal_figure(records, config.count),
            "exponents": lambda: look.exponents_figure(records),
        })
