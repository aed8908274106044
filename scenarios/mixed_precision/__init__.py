"""Mixed precision and master weights: what do 16-bit floats lose, and what wins it back?

fp16 holds nothing below 2⁻²⁴: a gradient entry smaller than half of that becomes 0. And
w + δ rounds back to w when |δ| is under half the spacing of the format's numbers at w:
between |w|·2⁻¹² and |w|·2⁻¹¹ in fp16 (exactly |w|·2⁻¹¹ at powers of two, so 1 + 1e-4 = 1),
between |w|·2⁻⁹ and |w|·2⁻⁸ in bf16. Mixed precision (Micikevicius et al. 2018) answers both:
loss scaling (`torch.amp.GradScaler`) multiplies the loss by S before backward so small
gradients land inside fp16's range, and an fp32 master copy of the weights receives the
updates, so tiny steps accumulate instead of rounding away.

The same tanh MLP, seed and batches train with Adam in fp32, under `torch.autocast("cpu")` in
bf16 and in fp16 (without and with GradScaler), and with its weights stored in 16 bits (no
master copy; emulated: after every Adam step each weight is rounded to 16 bits, Adam's
moments stay fp32). `loss_weight` multiplies the loss, as a term of a larger objective or a
mean over many tokens does: Adam is invariant to it, fp16's range is not.

Look at the share of gradient entries that are exactly 0, the updates rounded away (dashed:
what the master-weight arms would lose without their fp32 copy), GradScaler's scale (doubling
every `growth_interval` clean steps, halving when a scaled gradient overflows), and the three
sweeps of the formats themselves.
"""
from typing import Literal

import pandas as pd
from pydantic import Field

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, in_turn, shown_by, together
from scenarios.cost import logs
from scenarios.explanation import Explanation, join, say, trajectory
from scenarios.mixed_precision import figures as look
from scenarios.mixed_precision.figures import ROUNDING, SUM, UNDERFLOW, share_claim
from scenarios.plotting import Figures, arm_colors, curves_figure
from scenarios.records import Records

FP32, BF16, FP16, SCALED = "fp32", "bf16 autocast", "fp16 autocast, no loss scaling", "fp16 autocast + GradScaler"
INITIAL_SCALE = 2.0 ** 16  # GradScaler's default init_scale
Dtype = Literal["bf16", "fp16"]


def pure_arm(dtype: str) -> str:
    return f"pure {dtype} weights (no master copy)"


class Config(ScenarioConfig):
    lr: float = Field(1e-4, ge=1e-6, le=1e-2, json_schema_extra={"scale": "log"},
                      description="Adam's learning rate: each step moves a weight by about this much. Below |w|·2⁻¹¹ "
                                  "(fp16) or |w|·2⁻⁸ (bf16) the step is lost when the weight is stored in 16 bits.")
    loss_weight: float = Field(1e-5, ge=1e-8, le=1.0, json_schema_extra={"scale": "log"},
                               description="Multiplies the loss (and every gradient). Adam is invariant to it; fp16 "
                                           "flushes gradients below 2⁻²⁴ to 0 unless the loss is scaled up.")
    pure_dtype: Dtype = Field("bf16", description="The format the no-master-copy arm stores its weights in "
                                                  "(fp16 with GradScaler, bf16 without: it has fp32's range).")
    growth_interval: int = Field(10, ge=1, le=2000, description="GradScaler doubles S after this many steps without "
                                 "inf/NaN (torch's default is 2000, for runs of many thousands of steps).")
    steps: int = Field(250, ge=10, le=3000, description="Adam steps, a fresh batch of 64 each; all arms see the same.")


def training_arms(config: Config):
    from engines.numerics.mixed_precision import Precision
    return {FP32: Precision(None), BF16: Precision("bf16"), FP16: Precision("fp16"), SCALED: Precision("fp16", True),
            pure_arm(config.pure_dtype): Precision(config.pure_dtype, config.pure_dtype == "fp16", master=False)}


def arm_names(config: Config) -> list[str]:
    return [FP32, BF16, FP16, SCALED, pure_arm(config.pure_dtype)]


class MixedPrecision(Scenario):
    id = "mixed-precision"
    title = "Mixed precision and master weights"
    order = 85
    arms_note = ("The arms train side by side as separate models, not as one batched model: their precisions are "
                 "different code paths (autocast, loss scaling, 16-bit weights).")
    topic = "Distributed"
    question = "What do 16-bit floats lose in training, and how do loss scaling and fp32 master weights win it back?"
    terms = {
        "Mixed precision": shown_by("loss", "test_loss", "grad_zero_frac", arm="autocast",
                                    how="matmuls in bf16/fp16 under autocast, weights and their updates in fp32"),
        "Master weights": shown_by("lost_updates", "lost_updates", "lost_if_fp16", "lost_if_bf16",
                                   how="the fp32 copy keeps the updates (dashed) that 16-bit weights round away (solid)"),
    }
    formula = (r"\begin{aligned}\mathrm{fl}_{16}(x) &= 0 \ \text{ for } |x| \le 2^{-25}\ \text{(fp16)},\qquad"
               r"\mathrm{fl}(w + \delta) = w \ \text{ for } |\delta| < \tfrac12\,\mathrm{ulp}(w)"
               r"\in \big(|w|\,2^{-p-2},\ |w|\,2^{-p-1}\big]\\"
               r"g &= \tfrac1S\,\nabla_w\big(S\cdot L\big),\quad S \leftarrow 2S \text{ after } N \text{ clean steps},"
               r"\ S \leftarrow S/2 \text{ on inf/NaN};\qquad w_{32} \leftarrow w_{32} - \eta\,\hat m/(\sqrt{\hat v}+\epsilon)"
               r"\end{aligned}")
    Config = Config
    tiny = {"steps": 20}
    presets = {
        "the failure and the fix: fp16 without and with GradScaler": {"loss_weight": 1e-5, "lr": 1e-4},
        "pure fp16 weights at a late-training lr (1e-5)": {"lr": 1e-5, "pure_dtype": "fp16", "steps": 1000},
        "gradients fp16 can hold (loss_weight 1)": {"loss_weight": 1.0},
        "Micikevicius et al. 2018 (GradScaler's defaults)": {"growth_interval": 2000, "pure_dtype": "fp16"},
    }

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"logs": 0.000586, "run": 0.0891, "steps": 0.00108}
    rates_reference = 0.1473  # the reference workload's CPU s beside the fit
    timed = ({"steps": 200}, {"steps": 100}, {"steps": 150, "pure_dtype": "fp16"})

    def work(self, config: Config) -> Work:
        """Five precision arms of one small MLP side by side (autocast, scaler, casts), then the format probes."""
        arms = len(arm_names(config))
        return Work({"steps": arms * config.steps, "logs": arms * logs(config.steps, 60)}, floats=arms * 4 * 30_000)

    def phases(self, config: Config):
        from engines.loop.training import log_every_for
        from engines.numerics import number_formats
        from engines.numerics.mixed_precision import train_arm
        common = dict(lr=config.lr, loss_weight=config.loss_weight, steps=config.steps, seed=config.seed,
                      growth_interval=config.growth_interval, log_every=log_every_for(config.steps, 60))
        formats = in_turn(Arm(UNDERFLOW, number_formats.underflow_sweep(config.seed), len(number_formats.UNDERFLOW_EXPONENTS), cost=0.5),
                          Arm(ROUNDING, number_formats.rounding_sweep(config.seed), len(number_formats.RATIO_EXPONENTS)),
                          Arm(SUM, number_formats.accumulate(10_000, 1e-4), 101, cost=2))
        training = together(*(Arm(name, train_arm(precision, histogram=name == FP32, **common), config.steps)
                              for name, precision in training_arms(config).items()))
        return training + formats  # the charts at the top (training) fill in first; the format probes' below

    def arm_universe(self) -> list[str]:
        return [FP32, BF16, FP16, SCALED, pure_arm("bf16"), pure_arm("fp16"), UNDERFLOW, ROUNDING, SUM]

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records, pure = Records(frame), pure_arm(config.pure_dtype)
        share = {arm: {metric: look.mean_share(arm, metric)(records) for metric in
                       ("grad_zero_frac", "lost_updates", "lost_if_fp16", "lost_if_bf16")} for arm in arm_names(config)}
        final = {arm: records.last(arm, "test_loss") for arm in arm_names(config)}
        headline = {"final test loss (fp32)": final[FP32], "final test loss (pure 16-bit weights)": final[pure],
                    "gradient entries at 0 (fp16, no scaling)": share[FP16]["grad_zero_frac"],
                    "updates lost (pure 16-bit weights)": share[pure]["lost_updates"]}
        return {"headline": headline, "final_test_loss": final, "mean_shares": share,
                "loss_scale_final": records.last(SCALED, "loss_scale"), "skipped_steps": records.last(SCALED, "skipped_steps"),
                "after_10k_updates": {name: records.last(SUM, f"weight/{name}") for name in look.FORMATS}}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records, pure = Records(frame), pure_arm(config.pure_dtype)
        sweeps = [say("Number formats: " + "; ".join(["{}"] * len(claims)) + ".", *claims)
                  for claims in look.format_claims(records)[:2] if claims]
        sums = look.format_claims(records)[2]
        if sums:
            done = look.claim("{}", lambda r: r.last(SUM, "updates"), records, lambda v: f"{v:,.0f}")
            sweeps.append(say("After {} updates of +1e-4 to a weight of 1.0: " + ", ".join(["{}"] * len(sums)) + ".",
                              done, *sums))
        shown = [arm for arm in arm_names(config) if records.series(arm, "test_loss").size]
        if not shown:
            return Explanation(sweeps[0], tuple(sweeps[1:])) if sweeps else Explanation(
                waiting="Run to sweep the formats, then train the same model in each precision.")
        what = {FP16: share_claim(records, FP16, "grad_zero_frac", "{} of its gradient entries were 0"),
                SCALED: share_claim(records, SCALED, "grad_zero_frac", "{} of its gradient entries were 0"),
                pure: share_claim(records, pure, "lost_updates", "{} of its updates were rounded away")}
        parts = [say("{}: {}, held-out loss {}", arm, what[arm], trajectory(records, arm, "test_loss")) if what.get(arm)
                 else say("{}: held-out loss {}", arm, trajectory(records, arm, "test_loss"))
                 for arm in (FP16, SCALED, pure, FP32) if arm in shown]
        details = [look.master_sentence(records, {SCALED: "fp16", BF16: "bf16"}), look.scale_sentence(records, SCALED), *sweeps]
        return Explanation(join(*parts), tuple(d for d in details if d is not None)[:5])

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records, arms = Records(frame), arm_names(config)
        colors = arm_colors(arms, self.arm_universe())
        curves = dict(arms=arms, log_y=False)
        scaled = [SCALED] + ([arms[-1]] if config.pure_dtype == "fp16" else [])
        return Figures({
            "loss": lambda: look.nested(curves_figure(records, colors, "test_loss", title="Held-out loss (512 fixed examples)",
                                                      y_title="cross-entropy (nats)", **curves), arms),
            "grad_underflow": lambda: look.as_share(curves_figure(records, colors, "grad_zero_frac", **curves,
                                                                  title="Weight-gradient entries that are exactly 0",
                                                                  y_title="share of entries")),
            "lost_updates": lambda: look.lost_figure(records, colors, arms, {SCALED: "fp16", BF16: "bf16"}),
            "loss_scale": lambda: curves_figure(records, colors, "loss_scale", arms=scaled, log_y=True,
                                                title="GradScaler's scale S: ×2 when clean, ×½ on inf",
                                                y_title="S"),
            "grad_histogram": lambda: look.histogram_figure(records, FP32, INITIAL_SCALE),
            "underflow": lambda: look.underflow_figure(records),
            "rounding": lambda: look.rounding_figure(records),
            "accumulation": lambda: look.sum_figure(records),
        })
