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
run's summary carries the peft snippet that builds them. The scale s depends on the alpha
rule: a fixed α makes s = α/r shrink as r grows, so the sweep changes the step size along
with the rank (under plain SGD with A near its init ΔW's step scales as s²·r: at fixed α
rank 64 moves 16× slower than rank 4; Adam hides much of that). α = 2r keeps s equal at
every rank, rsLoRA's α/√r keeps s²·r equal. The scale figure shows peft's s per arm.
"""
from typing import Literal

import pandas as pd
from pydantic import Field

from engines.loop import arms_memory
from engines.supervised.lora_rules import AlphaRule, FULL, WIDTH, arm_name, comparison_ranks, peft_snippet
from scenarios.base import Arm, Machine, Scenario, ScenarioConfig, Work, in_turn, shown_by
from scenarios.explanation import Explanation, join, say, trajectory
from scenarios.lora_rank.figures import (LEFT, alpha, anywhere, cliff, energy, final_loss_figure, left_claim,
                                          loss_figure, params_figure, per_arm, scale_figure, singular_value_figure,
                                          steps_to_tenth, subspace, subspace_figure, under)
from scenarios.plotting import Figures, arm_colors
from scenarios.records import Records

RankSweep = Literal["1,2,4,8,16,32,64", "1,2,4,8", "2,4,8,16", "1,4,16,64", "8,16,32,64"]
ALL_RANKS = (1, 2, 4, 8, 16, 32, 64)


class Config(ScenarioConfig):
    k: int = Field(4, title="task rank k", ge=1, le=32, description="Intrinsic rank of the task: each layer's ideal update ΔW* has "
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
    arms_note = ("The LoRA arms train together as one batched model, every rank padded to the largest with a mask: "
                 "each arm's records equal peft's arm trained alone to float32 rounding (the padding adds zeros to its "
                 "sums). The full fine-tune trains first, alone: its shape differs.")
    topic = "Fine-tuning & compression"
    question = "How much LoRA rank does a fine-tune need, and what does extra rank buy?"
    terms = {
        "LoRA": shown_by("trainable_params", "trainable_params", arm="r=",
                         how="a frozen base plus s·B A: r·(d_in + d_out) trainable parameters per layer, not d²"),
        "Rank (r)": shown_by("final_loss_vs_rank", LEFT, "rank", arm="r=",
                             how="the loss left falls steeply up to r = k and is flat beyond"),
        "Low-rank hypothesis": shown_by("final_loss_vs_rank", LEFT, "rank", arm="r=",
                                        how="the task's ideal update has rank k: rank k captures it, more rank "
                                            "buys nothing"),
        "Alpha scaling": shown_by("alpha_scale", "scale", arm="r=", how="peft's s = α/r (or α/√r) read from each arm"),
        "Fine-tuning": shown_by("loss", "loss", LEFT, how="every arm starts from the same frozen base and fits the task"),
        "Adam": shown_by("loss", "loss", "lr", how="Adam at one learning rate for every arm"),
    }
    methods = {"Supervised fine-tuning": shown_by("loss", "loss", partial=True,
                                                  how="a pretrained base fitted to a new task (a regression, not prompt–response text)")}
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

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"rank_steps": 2.36e-06, "run": 0.0151, "steps": 0.000158, "target_steps": 0.000104}
    rates_reference = 0.1360  # the reference workload's CPU s beside the fit
    timed = ({"steps": 300, "ranks": "1,2,4,8"}, {"ranks": "8,16,32,64", "target_layers": "fc1", "steps": 250}, {"steps": 100})

    def work(self, config: Config) -> Work:
        """The full fine-tune, then one peft-wrapped arm per rank, in turn: batches of 128 through the 64-wide
        base, each adapted layer adding A and B."""
        arms, targets = 1 + len(ranks_of(config)), len(targets_of(config))
        steps = arms * config.steps
        return Work({"arms": arms, "steps": steps, "target_steps": steps * targets,
                     "rank_steps": config.steps * targets * sum(ranks_of(config))},
                    floats=2 * 64 * 64 * 4 + 2048 * 64 * 3 + 128 * 64 * 6)

    def phases(self, config: Config, batched: bool = True):
        """The full fine-tune first (its own shape: it trains W itself), then the LoRA arms: every rank
        padded to the largest and trained as one batched model (engines/supervised/lora_arms.py), or
        (`batched=False`, the reference the tests compare with) one peft model after another."""
        from engines.loop.batched import arm_cost
        from engines.loop.training import log_every_for
        from engines.supervised.lora import Sweep
        from engines.supervised.lora_arms import rank_arms
        sweep = Sweep(config.k, ranks_of(config), config.seed)  # built by the first arm; shared by all
        targets, log_every, ranks = targets_of(config), log_every_for(config.steps), ranks_of(config)
        if batched:
            full = Arm(FULL, sweep.arm(None, config.alpha_rule, targets, config.steps, config.lr, log_every),
                       sweep.items(None, config.steps))
            return in_turn(full, Arm("LoRA ranks", rank_arms(sweep, ranks, config.alpha_rule, targets, config.steps,
                                                            config.lr, log_every), config.steps + 2,
                                     arm_cost(len(ranks))))
        return in_turn(*(Arm(arm_name(rank), sweep.arm(rank, config.alpha_rule, targets, config.steps, config.lr, log_every),
                             sweep.items(rank, config.steps))
                         for rank in (None, *ranks_of(config))))  # the full fine-tune first: no peft import before it

    def batched_bytes(self, config: Config) -> float:
        """The LoRA arms as one batched model, each padded to the largest rank R: A (R × 64) and B (64 × R)
        per adapted layer (Adam), and the held-out pass (2048 inputs: per layer its output and A x)."""
        top, layers = max(ranks_of(config)), len(targets_of(config))
        return arms_memory.batched_bytes(len(ranks_of(config)), layers * 2 * top * WIDTH, 2, 2048 * 2 * (WIDTH + top))

    def refusal(self, config: Config, machine: Machine) -> str | None:
        return arms_memory.refusal(f"ranks={config.ranks}", len(ranks_of(config)), self.batched_bytes(config),
                                   machine.memory_limit_bytes,
                                   machine.memory_basis(arms_memory.FILL))

    def arm_universe(self) -> list[str]:
        return [FULL] + [arm_name(r) for r in ALL_RANKS]

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records, k = Records(frame), config.k
        arms = {arm: {"rank": int(records.last(arm, "rank")) if records.has("rank", arm) else None,
                      "relative_loss": records.last(arm, LEFT),
                      "trainable_params": int(records.last(arm, "trainable_params"))
                      if records.has("trainable_params", arm) else None,
                      "steps_to_10pct": int(step) if (step := steps_to_tenth(arm)(records)) is not None else None,
                      "diverged_at": records.diverged_at(arm)}
                for arm in arm_names(config) if arm in records.arms()}
        left = {info["rank"]: info["relative_loss"] for arm, info in arms.items()
                if arm != FULL and info["relative_loss"] is not None}
        pair = comparison_ranks(ranks_of(config), k)
        phi = {target: value for target in targets_of(config)
               if (value := anywhere(f"subspace_top_k/{target}")(records)) is not None}
        headline = {"loss left: full fine-tune": records.last(FULL, LEFT),
                    "loss left: best rank below k": min((v for r, v in left.items() if r < k), default=None),
                    "loss left: worst rank from k on": max((v for r, v in left.items() if r >= k), default=None)}
        return {"headline": headline, "k": k, "arms": arms,
                "full_top_k_energy": under(records, "top_k_energy/", FULL) if FULL in records.arms() else {},
                "subspace": {"pair": list(pair), "top": min(k, pair[0]), "phi": phi} if pair and phi else None,
                "peft_snippet": peft_snippet(ranks_of(config), config.alpha_rule, targets_of(config))}

    def snippet(self, config: Config) -> str:
        return peft_snippet(ranks_of(config), config.alpha_rule, targets_of(config))

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records, k, targets = Records(frame), config.k, targets_of(config)
        names = [arm for arm in arm_names(config) if records.has("loss", arm)]
        if not names:
            return Explanation(waiting="Run to train the full fine-tune, then one LoRA arm per rank.")
        takeaway = cliff(records, names, k) or join(*(say("{}: its loss {}", arm, trajectory(records, arm))
                                                      for arm in names))
        details = [per_arm(records, names), energy(records, targets, k),
                   subspace(records, ranks_of(config), targets, k), alpha(records, names, config.alpha_rule)]
        if len(targets) == 1 and records.has(LEFT, FULL):
            details.append(say(f"Only {targets[0]} is adapted, and the task shifts both layers: the full fine-tune "
                               f"of {targets[0]} alone ends at {{}} of the base loss", left_claim(records, FULL)))
        return Explanation(takeaway, tuple(d for d in details if d is not None))

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records, ranks, targets = Records(frame), ranks_of(config), targets_of(config)
        colors = arm_colors(arm_names(config), self.arm_universe())
        return Figures({"loss": lambda: loss_figure(records, colors),
                        "final_loss_vs_rank": lambda: final_loss_figure(records, ranks, config.k, colors),
                        "trainable_params": lambda: params_figure(records, ranks, targets, config.k, colors),
                        "alpha_scale": lambda: scale_figure(records, ranks, config.k, config.alpha_rule, colors),
                        "full_delta_sv": lambda: singular_value_figure(records, targets, config.k, colors),
                        "subspace_similarity": lambda: subspace_figure(records, ranks, targets, config.k)})
