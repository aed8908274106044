"""LoRA rank sweep: how much rank does a fine-tune need?

LoRA freezes each weight W₀ and learns ΔW = s·B A with B (d × r) and A (r × d): r·2d
parameters instead of d². That can only work if the update fine-tuning needs is low-rank
(Hu et al., ICLR 2022: on GPT-3, rank 1 to 64 barely matters). Here the need is known by
construction: the task is a frozen two-layer MLP whose every Linear is shifted by a
rank-k update ΔW*, so below r = k the adapter cannot express it and the loss stalls, and
from r = k on extra rank buys nothing. A full fine-tune is the reference arm; the
singular values of its ΔW show the low-rank hypothesis directly, and Hu et al.'s Eq. 4
shows that a small and a large rank learn the same top directions.

The adapters are peft's (`LoraConfig`, `get_peft_model`) on our own torch modules; the
page shows the snippet. The scale s depends on the alpha rule, and the page says which
one ran: a fixed α makes s = α/r shrink as r grows, so a sweep would change rank and step
size at once.
"""
from typing import Literal

import pandas as pd
import plotly.graph_objects as go
from pydantic import Field

from engines.lora import (FULL, WIDTH, AlphaRule, SweepSpec, arm_name, comparison_ranks, lora_kwargs, lora_scale,
                          peft_snippet, sweep)
from engines.training import log_every_for
from scenarios._lora_rank_figures import (final_loss_figure, loss_figure, params_figure, singular_value_figure,
                                          subspace_figure)
from scenarios.base import Event, Run, Scenario, ScenarioConfig
from scenarios.plotting import arm_colors, metric_series

RankSweep = Literal["1,2,4,8,16,32,64", "1,2,4,8", "2,4,8,16", "1,4,16,64", "8,16,32,64"]


class Config(ScenarioConfig):
    k: int = Field(4, ge=1, le=32, description="Intrinsic rank of the task: each layer's ideal update ΔW* has "
                   "exactly k non-zero singular values.")
    ranks: RankSweep = Field("1,2,4,8,16,32,64", description="LoRA ranks to sweep; one arm each, run one after another "
                             "after the full fine-tune.")
    alpha_rule: AlphaRule = Field(
        "alpha = 2r", description="How lora_alpha follows r. All three give scale s = 2 at r = 4. 'alpha = 2r': s = 2 "
        "at every rank. 'alpha = 8 fixed': s = 8/r shrinks as r grows. rsLoRA: s = 4/√r (use_rslora=True).")
    target_layers: Literal["fc1, fc2", "fc1", "fc2"] = Field(
        "fc1, fc2", description="Linear layers LoRA adapts (peft target_modules); the full fine-tune trains the same "
        "weights. The task shifts both, so adapting one cannot fit it all.")
    steps: int = Field(200, ge=20, le=2000, description="Adam steps per arm (batch of 128 fresh inputs each).")
    lr: float = Field(5e-3, ge=1e-4, le=1e-1, description="Adam learning rate, the same for every arm.",
                      json_schema_extra={"scale": "log"})


def ranks_of(config: Config) -> tuple[int, ...]:
    return tuple(int(r) for r in config.ranks.split(","))


def targets_of(config: Config) -> tuple[str, ...]:
    return tuple(name.strip() for name in config.target_layers.split(","))


def arm_names(config: Config) -> list[str]:
    return [FULL] + [arm_name(r) for r in ranks_of(config)]


class LoraRankSweep(Scenario):
    id = "lora-rank"
    title = "LoRA rank sweep"
    order = 40
    question = "How much LoRA rank does a fine-tune need, and what does extra rank buy?"
    terms = ("LoRA", "Rank (r)", "Alpha scaling", "Low-rank hypothesis", "Fine-tuning", "Adam")
    formula = (r"\begin{aligned}h &= W_0 x + s\,B A x,\quad B_{d\times r}=0 \text{ at init},\quad"
               r" s = \alpha/r \ \ (\text{rsLoRA: } \alpha/\sqrt{r})\\"
               r"\phi(A_i, A_j) &= \lVert U_i^{\top} U_j \rVert_F^2 / \min(i, j),\quad"
               r" U = \text{right singular vectors of } A\end{aligned}")
    Config = Config
    tiny = {"ranks": "1,2,4,8", "steps": 20}
    presets = {
        "the sweep (α = 2r)": {"alpha_rule": "alpha = 2r"},
        "Hu et al.: fixed α": {"alpha_rule": "alpha = 8 fixed"},
        "rsLoRA (α/√r)": {"alpha_rule": "rsLoRA alpha = 4"},
        "the wrong layer: fc2 only": {"target_layers": "fc2"},
        "a harder task: k = 16": {"k": 16},
    }

    def execute(self, config: Config, run: Run) -> None:
        spec = SweepSpec(k=config.k, ranks=ranks_of(config), alpha_rule=config.alpha_rule, targets=targets_of(config),
                         steps=config.steps, lr=config.lr, seed=config.seed, log_every=log_every_for(config.steps))
        records = sweep(spec)
        try:
            for record in records:  # one arm after another; each row is added the moment it exists
                if run.should_stop():
                    return
                if record.diverged:
                    run.event(Event(record.arm, record.step, "diverged", record.diverged))
                if record.metrics:
                    run.add(record.arm, record.step, record.metrics)
                run.progress(record.done_fraction)
        finally:
            records.close()

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        arms = {}
        for arm in arm_names(config):
            rows = frame[frame["arm"] == arm]
            if rows.empty:
                continue
            value = dict(zip(rows["metric"], rows["value"]))
            losses = metric_series(rows, "loss")
            base_loss = value.get("final/base_loss")
            reached = losses[losses["value"] < 0.1 * base_loss] if base_loss else losses.iloc[:0]
            diverged = metric_series(rows, "diverged")
            arms[arm] = {
                "rank": int(value["rank"]) if "rank" in value else None,
                "relative_loss": value.get("final/relative_loss"),
                "trainable_params": int(value["trainable_params"]) if "trainable_params" in value else None,
                "steps_to_10pct": int(reached["step"].iloc[0]) if len(reached) else None,
                "diverged_at": int(diverged["step"].iloc[0]) if len(diverged) else None,
            }
        full = frame[(frame["arm"] == FULL) & frame["metric"].str.startswith("top_k_energy/")]
        energy = {metric.split("/")[1]: float(v) for metric, v in zip(full["metric"], full["value"])}
        return {"k": config.k, "arms": arms, "full_top_k_energy": energy, "subspace": subspace_summary(frame, config)}

    def explain(self, summary: dict, config: Config) -> str:
        k, arms = summary["k"], summary["arms"]
        swept = {info["rank"]: info for arm, info in arms.items()
                 if arm != FULL and info["relative_loss"] is not None}
        full = arms.get(FULL, {}).get("relative_loss")
        lines = []
        if swept:
            left = ", ".join(f"r={r}: {percent(info['relative_loss'])}" for r, info in swept.items())
            lines.append(f"- **Loss left** (held-out MSE as a share of the base model's): {left}"
                         + (f"; full fine-tune: {percent(full)}." if full is not None else "."))
        lines += cliff_text(swept, k)
        for target, share in summary["full_top_k_energy"].items():
            verdict = ("the update is low-rank, as the task built it" if share > 0.9 else
                       "this layer's update is not rank k: it also absorbs what the unadapted layer cannot learn")
            lines.append(f"- **The full fine-tune's ΔW** in {target} puts {share:.1%} of ‖ΔW‖²_F in its top {k} "
                         f"singular values: {verdict}.")
        sub = summary["subspace"]
        if sub:
            (small, large), p = sub["pair"], sub["top"]
            phis = ", ".join(f"{value:.2f} ({target})" for target, value in sub["phi"].items())
            lines.append(f"- **Same directions**: φ between the top {p} directions of A at r = {small} and "
                         f"r = {large} is {phis}; 1 is the same subspace, two random ones in ℝ^{WIDTH} give "
                         f"≈ {p / WIDTH:.2f}.")
        if len(targets_of(config)) == 1:
            lines.append(f"- **Only {config.target_layers} is adapted**, but the task shifts both layers: no rank "
                         "reaches the other layer's shift, so even the full fine-tune of this layer keeps a floor.")
        lines += alpha_rule_text(config, swept)
        snippet = peft_snippet(ranks_of(config), config.alpha_rule, targets_of(config))
        lines.append(f"\n**The peft code for this sweep:**\n\n```python\n{snippet}\n```")
        return "\n".join(lines)

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> dict[str, go.Figure]:
        colors = arm_colors(arm_names(config))
        ranks, targets = ranks_of(config), targets_of(config)
        return {"loss": loss_figure(frame, colors),
                "final_loss_vs_rank": final_loss_figure(frame, ranks, config.k, colors),
                "trainable_params": params_figure(frame, ranks, targets, config.k, colors),
                "full_delta_sv": singular_value_figure(frame, targets, config.k, colors),
                "subspace_similarity": subspace_figure(frame, ranks, targets, config.k)}


def subspace_summary(frame: pd.DataFrame, config: Config) -> dict | None:
    pair = comparison_ranks(ranks_of(config), config.k)
    rows = frame[frame["metric"].str.startswith("subspace_top_k/")]
    if pair is None or rows.empty:
        return None
    phi = {metric.split("/")[1]: float(value) for metric, value in zip(rows["metric"], rows["value"])}
    return {"pair": list(pair), "top": min(config.k, pair[0]), "phi": phi}


def percent(value: float) -> str:
    return f"{value:.0%}" if value >= 0.1 else f"{value * 100:.2g}%"


def cliff_text(swept: dict, k: int) -> list[str]:
    below = [r for r in swept if r < k]
    above = [r for r in swept if r >= k]
    if not below or not above:
        return []
    stalled = min(swept[r]["relative_loss"] for r in below)
    fitted = max(swept[r]["relative_loss"] for r in above)
    if fitted > 0.1 * stalled:
        return [f"- **No clean cliff at r = k = {k}**: ranks below k keep ≥ {percent(stalled)} of the loss, ranks "
                f"from k up still keep up to {percent(fitted)}."]
    lo, hi = swept[above[0]], swept[above[-1]]
    text = (f"- **The cliff at r = k = {k}**: below it the adapter cannot express a rank-{k} update and keeps "
            f"≥ {percent(stalled)} of the loss; from r = {above[0]} on every rank is at ≤ {percent(fitted)}.")
    if above[-1] != above[0]:
        text += (f" r = {above[-1]} trains {hi['trainable_params']:,} parameters, "
                 f"{hi['trainable_params'] // lo['trainable_params']}× r = {above[0]}'s, to end at "
                 f"{percent(hi['relative_loss'])} instead of {percent(lo['relative_loss'])}: "
                 "extra rank buys nothing that matters.")
    return [text]


def alpha_rule_text(config: Config, swept: dict) -> list[str]:
    ranks = ranks_of(config)
    alphas = [lora_kwargs(r, config.alpha_rule, ())["lora_alpha"] for r in (ranks[0], ranks[-1])]
    scales = [lora_scale(r, config.alpha_rule) for r in (ranks[0], ranks[-1])]
    speeds = ", ".join(f"r={r}: {info['steps_to_10pct']}" for r, info in swept.items()
                       if info["steps_to_10pct"] is not None)
    return [
        f"- **Alpha rule used: {config.alpha_rule}**: lora_alpha {alphas[0]} at r = {ranks[0]} and {alphas[1]} at "
        f"r = {ranks[-1]}, so the scale s in ΔW = s·B A goes from {scales[0]:.3g} to {scales[1]:.3g}."
        + (f" Steps to reach 10% of the base loss: {speeds}." if speeds else ""),
        "- **Why a fixed α confounds a sweep**: s multiplies every step ΔW takes, and with α fixed s = α/r shrinks "
        "as r grows, so the sweep changes the step size along with the rank. Under plain SGD with A near its init, "
        "ΔW's step scales as s²·r: at fixed α, rank 64 moves 16× slower than rank 4. Adam rescales each entry's "
        "step and hides much of that here; α = 2r keeps s equal at every rank, and rsLoRA's α/√r keeps s²·r equal.",
    ]
