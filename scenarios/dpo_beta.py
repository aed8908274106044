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
from typing import Literal

import pandas as pd
import plotly.graph_objects as go
from pydantic import Field

from engines import dpo
from engines.training import Diverged, log_every_for
from scenarios._dpo_beta_figures import (LOG2, frontier_figure, logps_figure, loss_figure, margins_figure,
                                        policy_figure)
from scenarios.base import Event, Run, Scenario, ScenarioConfig
from scenarios.plotting import arm_colors, metric_series

FRONTIER_BETAS = [10 ** (k / 10) for k in range(-25, 21)]  # 0.003 … 100: the exact curve
SEQUENCE_COST = 4  # one LM step costs about four tabular steps (weights the progress bar)


class Config(ScenarioConfig):
    level: Literal["both", "tabular", "sequence"] = Field(
        "both", description="Which level runs: the tabular policy over K responses, the tiny LM, or both.")
    betas: Literal["0.05,0.1,0.5,1,5", "0.01,0.1,1,10", "0.1,1", "0.02,0.05,0.1,0.2,0.5,1,2,5"] = Field(
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
    return ["tabular", "sequence"] if config.level == "both" else [config.level]


def level_of(config: Config, level: str) -> dpo.Level:
    common = dict(labels=config.labels, noise=config.label_noise, pairs=config.pairs, seed=config.seed)
    if level == "tabular":
        return dpo.tabular_level(config.responses, steps=config.tabular_steps, lr=config.tabular_lr,
                                 log_every=log_every_for(config.tabular_steps), **common)
    return dpo.sequence_level(steps=config.sequence_steps, lr=config.sequence_lr,  # each log enumerates every sequence
                              log_every=log_every_for(config.sequence_steps, max_points=25), **common)


class DpoBeta(Scenario):
    id = "dpo-beta"
    title = "DPO β"
    order = 70
    question = "How does β trade reward against drift from the reference policy in DPO?"
    terms = ("DPO", "Beta (β), in DPO", "Bradley-Terry model", "KL divergence", "RLHF", "Reward model")
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

    def execute(self, config: Config, run: Run) -> None:
        betas, levels = betas_of(config), levels_of(config)
        cost = {"tabular": 1, "sequence": SEQUENCE_COST}
        total = len(betas) * (cost["tabular"] * config.tabular_steps * ("tabular" in levels)
                              + cost["sequence"] * config.sequence_steps * ("sequence" in levels))
        done = 0
        for name in levels:
            level = level_of(config, name)
            _, ref_reward = dpo.policy_stats(level.ref_logps, level.ref_logps, level.rewards)
            task = {"reference/true_reward": ref_reward, "pairs/true_margin": level.true_margin}
            if level.ref_logps.dim() == 1:  # one prompt: the responses themselves, for the learned-vs-π* plot
                task.update({f"reference/response_{k:02d}": p for k, p in enumerate(level.ref_logps.exp().tolist())})
                task.update({f"true_reward/response_{k:02d}": r for k, r in enumerate(level.rewards.tolist())})
            run.add(f"{name} π*", 0, task)
            for index, (beta, kl, reward) in enumerate(dpo.frontier(level.ref_logps, level.rewards, FRONTIER_BETAS)):
                run.add(f"{name} π*", index, {"frontier/beta": beta, "frontier/kl": kl, "frontier/true_reward": reward})
            for beta in betas:  # one arm after another; each record is shown as soon as it exists
                arm, extra, generator = f"{name} β={beta:g}", level.optimum(beta), level.arm(beta)
                for record in generator:
                    if isinstance(record, Diverged):
                        run.event(Event(arm, record.step, "diverged", record.message))
                        break
                    metrics = record.metrics if record.step == level.steps - 1 else {  # the policy's dots: last step only
                        key: v for key, v in record.metrics.items() if not key.startswith("policy/")}
                    run.add(arm, record.step, {**metrics, **extra})
                    extra = {}
                    run.progress((done + cost[name] * (record.step + 1)) / total)
                    if run.should_stop():
                        generator.close()
                        return
                done += cost[name] * level.steps

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        arms: dict[str, dict] = {}
        for arm, rows in frame[frame["arm"].str.match(r"^\w+ β=[\d.e+-]+$")].groupby("arm", sort=False):
            last = rows[rows["step"] == rows["step"].max()].set_index("metric")["value"]
            first = rows[rows["step"] == rows["step"].min()].set_index("metric")["value"]
            value = lambda series, key: float(series[key]) if key in series else None  # noqa: E731
            losses = rows[rows["metric"] == "loss"]["value"]
            arms[arm] = {"level": arm.split(" ")[0], "beta": float(arm.split("=")[1]), "last_step": int(rows["step"].max()),
                         "max_loss": float(losses.max()) if len(losses) else None,
                         **{key: value(last, metric) for key, metric in [
                             ("kl", "kl"), ("true_reward", "true_reward"), ("tv_to_optimum", "tv_to_optimum"),
                             ("accuracy", "rewards/accuracies"), ("margin", "rewards/margins"), ("loss", "loss"),
                             ("chosen_logp", "dataset/logps_chosen"), ("rejected_logp", "dataset/logps_rejected"),
                             ("policy_mass", "dataset/policy_mass"), ("diverged", "diverged")]},
                         **{key: value(first, metric) for key, metric in [
                             ("first_loss", "loss"), ("optimum_kl", "optimum/kl"), ("optimum_true_reward", "optimum/true_reward"),
                             ("first_chosen_logp", "dataset/logps_chosen"), ("first_rejected_logp", "dataset/logps_rejected"),
                             ("first_policy_mass", "dataset/policy_mass")]}}
        levels = {}
        for level in levels_of(config):
            done = sorted((a for a in arms.values() if a["level"] == level and a["kl"] is not None), key=lambda a: a["beta"])
            task = frame[frame["arm"] == f"{level} π*"]
            ref, gap = (metric_series(task, m)["value"] for m in ("reference/true_reward", "pairs/true_margin"))
            levels[level] = {"reference_true_reward": float(ref.iloc[0]) if len(ref) else None,
                             "true_margin": float(gap.iloc[0]) if len(gap) else None,
                             "smaller_beta_more_reward_and_kl": len(done) > 1 and all(
                                 a["true_reward"] >= b["true_reward"] and a["kl"] >= b["kl"] for a, b in zip(done, done[1:]))}
        return {"arms": arms, "levels": levels, "labels": config.labels, "label_noise": config.label_noise}

    def explain(self, summary: dict, config: Config) -> str:
        lines = [explain_level(level, info, sorted((a for a in summary["arms"].values() if a["level"] == level
                                                    and a["kl"] is not None), key=lambda a: a["beta"]), summary)
                 for level, info in summary["levels"].items()]
        firsts = [a["first_loss"] for a in summary["arms"].values() if a["first_loss"] is not None]
        if firsts:
            lines.append(f"- Every arm started at loss {firsts[0]:.4f}"
                         + (" = log 2 exactly (π = π_ref)." if all(x == LOG2 for x in firsts) else "."))
        return "\n".join(line for line in lines if line) or "Run to see where each β lands between π_ref and π*."

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> dict[str, go.Figure]:
        colors = arm_colors([f"β={b:g}" for b in betas_of(config)])
        wide = {str(arm): rows.set_index(["step", "metric"])["value"].unstack().sort_index()  # step × metric
                for arm, rows in frame.groupby("arm", sort=False)}
        levels = levels_of(config)
        figures = {f"frontier_{level}": frontier_figure(wide, level, colors) for level in levels}
        if "tabular" in levels:
            figures["policy_vs_optimum"] = policy_figure(wide, colors)
        for level in levels:
            figures[f"logps_{level}"] = logps_figure(wide, level, colors)
            figures[f"margins_{level}"] = margins_figure(wide, level, colors)
        figures["loss"] = loss_figure(wide, levels, colors)
        return figures


def explain_level(level: str, info: dict, arms: list[dict], summary: dict) -> str:
    """One level's result: the sweep's ends against π*, then the margins, the loss and the log-probabilities."""
    if not arms:
        return ""
    ends = [arms[0]] + ([arms[-1]] if len(arms) > 1 else [])
    head = f"- **{level.capitalize()}**: " + "; ".join(
        f"β={a['beta']:g} reached E[r] {a['true_reward']:.3f} at KL {a['kl']:.3g} nats "
        f"(π*: {a['optimum_true_reward']:.3f} at {a['optimum_kl']:.3g})" for a in ends)
    head += f"; π_ref's E[r] is {info['reference_true_reward']:.3f}."
    optimum = ["Every smaller β bought more reward with more KL."] if info["smaller_beta_more_reward_and_kl"] else []
    tvs = [a["tv_to_optimum"] for a in arms if a["tv_to_optimum"] is not None]
    if tvs:
        optimum.append(f"The learned policy is within total variation {max(tvs):.1e} of π* ∝ π_ref·exp(r/β) at every β."
                       if max(tvs) < 1e-3 else f"Its total-variation distance to π* ranges {min(tvs):.2g}–{max(tvs):.2g}.")
    if summary["label_noise"] > 0:
        optimum.append(f"With {summary['label_noise']:.0%} of labels flipped the preferences look weaker, so π tilts less than π*.")
    if summary["labels"] == "hard" and arms[0]["true_reward"] < arms[0]["optimum_true_reward"] - 0.02:
        optimum.append("Hard labels are noisy here (a pair's true preference is at most σ(1) = 0.73), and DPO keeps "
                       "widening margins on them: the policy drifts without earning π*'s reward.")
    points = [" ".join(optimum)] if optimum else []
    margins = [a["margin"] for a in arms if a["margin"] is not None]
    if margins and info["true_margin"] is not None:
        gap = info["true_margin"]
        low, high = f"{min(margins):.3f}", f"{max(margins):.3f}"
        point = (f"The implicit-reward margin ended at {low if low == high else f'{low}–{high}'} across β; "
                 f"the pairs' true reward gap r_w − r_l is {gap:.3f}")
        if all(abs(m - gap) < 0.05 * abs(gap) for m in margins):
            point += ": β·log(π/π_ref) learned the reward gap itself, whatever β — β only sets how far π moves to express it."
        elif summary["label_noise"] > 0 and max(margins) < gap:
            point += ": flipped labels shrink the learned margin."
        elif summary["labels"] == "hard" and min(margins) > gap:
            point += ": hard labels push the margin past the true gap."
        points.append(point + ("" if point.endswith(".") else "."))
    spikes = [a for a in arms if a["max_loss"] is not None and a["max_loss"] > LOG2 + 0.05]
    if spikes:
        a = max(spikes, key=lambda a: a["max_loss"])
        points.append(f"At β={a['beta']:g} the loss first overshot to {a['max_loss']:.2f}: Adam moves each weight by about "
                      "the learning rate whatever β is, and β multiplies the change in log-ratio.")
    both = [a for a in arms if a["chosen_logp"] is not None and a["chosen_logp"] < a["first_chosen_logp"] - 0.05
            and a["rejected_logp"] < a["first_rejected_logp"] - 0.05]
    if both:
        a, betas = both[0], ", ".join(f"{b['beta']:g}" for b in both)
        points.append(f"Both go down at β={betas}: at β={a['beta']:g} the mean log π of chosen fell "
                      f"{a['first_chosen_logp']:.2f} → {a['chosen_logp']:.2f} nats and of rejected {a['first_rejected_logp']:.2f} → "
                      f"{a['rejected_logp']:.2f}. The margin grew; the mass went " + (
                          f"to completions no pair shows (π keeps {a['policy_mass']:.0%} of its mass on the dataset's "
                          f"completions, π_ref {a['first_policy_mass']:.0%})." if a["policy_mass"] is not None else
                          "to the best few responses: most chosen responses merely beat a worse partner."))
    return "\n".join([head] + [f"  - {point}" for point in points])
