"""Optimizers: what do momentum, Adam and AdamW change about a gradient step?

Plain gradient descent steps against the gradient: w ← w − lr·g. On the quadratic
½(x² + κy²) that multiplies y by (1 − lr·κ) every step, so it is stable only while
lr < 2/κ = 2/λ_max, and along x, where the curvature is 1, it then crawls at (1 − lr) per
step: the larger the condition number κ, the slower. Momentum keeps a running sum of past
gradients, v ← βv + g, and steps along it: the zigzag across the steep direction cancels,
the consistent push along the flat one adds up (Sutskever et al. 2013; Goh 2017). Nesterov
evaluates the push one step ahead; its stable range is narrower: on a quadratic heavy-ball
momentum is stable while lr·λ_max < 2(1 + β), Nesterov while lr·λ_max < 2(1 + β)/(1 + 2β)
(at β = 0.9 and κ = 100 Nesterov diverges from lr ≈ 0.0136, heavy ball not until 0.038). Adam divides a momentum term
by a running RMS of the gradient, so each coordinate gets its own step size; its first step
is −lr·g/(|g| + ε) ≈ −lr·sign(g), whatever the gradient's size (Kingma & Ba 2015).
AdamW decouples weight decay: p ← p·(1 − lr·λ) before the Adam step, where Adam + L2 adds λp
to the gradient and lets Adam normalize it away (Loshchilov & Hutter 2019).

Three views, all torch.optim's own optimizers: trajectories from one start on the contours
of a 2-D loss (the quadratic, or Rosenbrock's valley) with loss against step; the same
optimizers on a small ReLU MLP with each layer's update-to-weight ratio; and a weight the
task never touches, where AdamW follows (1 − lr·λ)^t exactly and Adam + L2 does not.
"""
import math
from typing import Literal

import pandas as pd
from pydantic import Field

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, shown_by, together
from scenarios.cost import logs
from scenarios.explanation import Explanation, join, say, trajectory
from scenarios.optimizers import figures as look
from scenarios.optimizers.figures import IDLE_ARMS, NET_ARMS, OPTIMIZERS, SURFACE_ARMS, optimizer_of
from scenarios.plotting import Figures, arm_colors, curves_figure
from scenarios.records import Records
from scenarios.seeded import named, seed_arm

LOG = {"scale": "log"}


class Config(ScenarioConfig):
    surface: Literal["quadratic", "rosenbrock"] = Field(
        "quadratic", description="½(x² + κy²), Hessian diag(1, κ); or Rosenbrock's valley (1 − x)² + 100(y − x²)².")
    kappa: float = Field(100.0, title="κ (condition number)", ge=1.0, le=1000.0, json_schema_extra=LOG,
                         description="Condition number κ = λ_max/λ_min of the quadratic. SGD is stable iff lr < 2/κ.")
    lr: float = Field(0.01, ge=1e-4, le=0.1, json_schema_extra=LOG,
                      description="SGD, momentum and Nesterov on the surface. Quadratic: stable below 2/κ (SGD), "
                                  "2(1 + μ)/κ (momentum), 2(1 + μ)/((1 + 2μ)κ) (Nesterov).")
    momentum: float = Field(0.9, ge=0.1, le=0.99, description="β of SGD + momentum and Nesterov (surface and MLP).")
    adam_lr: float = Field(0.1, ge=1e-3, le=1.0, json_schema_extra=LOG,
                           description="Adam and AdamW on the surface, and on the untouched weight: each step moves ≈ lr.")
    weight_decay: float = Field(0.1, ge=0.0, le=1.0,
                                description="λ of AdamW (decoupled, everywhere) and of Adam + L2 (untouched weight).")
    steps: int = Field(200, ge=10, le=2000, description="Steps on the surface and on the untouched weight.")
    net_lr: float = Field(0.05, title="MLP lr (SGD family)", ge=1e-3, le=1.0, json_schema_extra=LOG, description="SGD family's rate on the MLP.")
    net_adam_lr: float = Field(3e-3, title="MLP lr (Adam, AdamW)", ge=1e-4, le=0.1, json_schema_extra=LOG, description="Adam and AdamW on the MLP.")
    net_steps: int = Field(200, title="MLP steps", ge=10, le=2000, description="MLP steps (batches of 64 fresh samples, 4 classes).")


def each_seed(items, seeds: list[int]):
    """Records no seed changes, under every seed's arm names (the arms' own names for a single seed)."""
    for item in items:
        yield item if item is None or len(seeds) == 1 else [(seed_arm(name, s), record) for s in seeds for name, record in item]


class Optimizers(Scenario):
    id = "optimizers"
    title = "Optimizers: SGD, momentum, Adam, AdamW"
    order = 40
    arms_note = ("Each view's optimizers of one family train together as one batched model with per-arm settings (SGD, "
                 "momentum and Nesterov; Adam, AdamW and Adam + L2): each arm's records are those torch.optim gives it "
                 "alone, bit for bit.")
    topic = "Optimization"
    question = "What do momentum, Adam and AdamW change about a gradient step?"
    terms = {
        "Gradient descent": shown_by("trajectories", "x", "y", arm="SGD",
                                     how="full-gradient steps from one start: there is no batch on a surface"),
        "SGD": shown_by("trajectories", "x", "y", "lambda_max", arm="SGD",
                        how="w ← w − lr·g: it zigzags across the steep direction and crawls along the flat one"),
        "Momentum": shown_by("trajectories", "x", "y", arm="momentum",
                             how="the same lr with β: the zigzag cancels and the flat direction speeds up"),
        "Adam": shown_by("trajectories", "x", "y", arm="Adam", how="its first step is ≈ lr·sign(g) in each coordinate"),
        "AdamW": shown_by("weight_decay", "weight", "closed_form", arm="AdamW · untouched",
                          how="decoupled decay: the untouched weight follows (1 − lr·λ)^t exactly"),
        "Weight decay / L2 regularization": shown_by("weight_decay", "weight", arm="L2",
                                                     how="λp added to the gradient is normalized away by Adam"),
        "Learning rate": shown_by("surface_loss", "loss", "lr", "lambda_max", arm="SGD",
                                  how="lr·λ_max against 2: below it SGD converges, above it the loss grows"),
        "Loss function": shown_by("trajectories", "loss", "x", "y", how="the loss surface itself, as contours"),
        "Optimizer": shown_by("net_loss", "loss", "update_ratio/", arm="MLP",
                              how="five torch.optim optimizers on the same MLP, seed and batches"),
    }
    methods = {"Adam (optimizer)": shown_by("trajectories", "x", "y", arm="Adam",
                                            how="momentum over a running RMS: its first step is ≈ lr·sign(g)")}
    formula = (r"\begin{aligned}\text{SGD: } w &\leftarrow w - \eta g &\quad \text{momentum: } v &\leftarrow \beta v + g,"
               r"\ w \leftarrow w - \eta v\\ \text{Adam: } w &\leftarrow w - \eta\,\hat m/(\sqrt{\hat v}+\epsilon)"
               r"&\quad \text{AdamW: } w &\leftarrow w(1-\eta\lambda) - \eta\,\hat m/(\sqrt{\hat v}+\epsilon)\\"
               r"\text{quadratic: } y_{t+1} &= (1-\eta\kappa)\,y_t &\quad \text{stable} &\iff \eta\lambda_{\max} < 2,"
               r"\ 2(1+\beta)\ \text{(momentum)},\ \tfrac{2(1+\beta)}{1+2\beta}\ \text{(Nesterov)}"
               r"\end{aligned}")
    Config = Config
    tiny = {"steps": 10, "net_steps": 10}
    presets = {
        "the failure: SGD past the edge (lr 2.5/κ)": {"lr": 0.025},
        "the fix: momentum at lr 1/κ": {"lr": 0.01, "momentum": 0.9},
        "Rosenbrock's valley": {"surface": "rosenbrock", "lr": 1.5e-3, "adam_lr": 0.05, "steps": 1000},
        "κ = 1000: SGD barely moves along x": {"kappa": 1000.0, "lr": 1e-3},
        "Loshchilov & Hutter 2019: AdamW's decay, λ = 0.5": {"weight_decay": 0.5, "adam_lr": 0.01},
    }

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"net_logs": 0.00019, "net_steps": 0.000368, "run": 0.00813, "steps": 8.34e-05, "surface_logs": 3.56e-05}
    rates_reference = 0.1389  # the reference workload's CPU s beside the fit
    timed = ({"steps": 800, "net_steps": 10}, {"net_steps": 300, "steps": 10}, {"steps": 300, "net_steps": 150})

    def work(self, config: Config) -> Work:
        """The optimizers on the 2-D surface (every step logged up to 1000) and on an idle weight, side by
        side; then one small MLP per optimizer on the same batches, probed on logged steps."""
        steps, surfaces = config.steps, len(SURFACE_ARMS)
        logged = steps if steps <= 1000 else logs(steps, 1000)
        return Work({"steps": (surfaces + len(IDLE_ARMS)) * steps, "surface_logs": surfaces * logged,
                     "net_steps": len(NET_ARMS) * config.net_steps, "net_logs": len(NET_ARMS) * logs(config.net_steps)},
                    floats=len(NET_ARMS) * 4 * 5000 + (surfaces + len(IDLE_ARMS)) * 8)

    def phases(self, config: Config, batched: bool = True):
        """The surface and the untouched weight side by side, then the MLP. Each view's arms of one
        optimizer family (SGD's, Adam's) train as one batched model with per-arm settings; with
        `batched=False` (the reference the tests compare with) every arm trains alone."""
        from engines.loop.training import log_every_for
        from engines.supervised.optimizers import idle_weight_arm, mlp_arm, surface_arm
        log_every = 1 if config.steps <= 1000 else log_every_for(config.steps, 1000)
        if batched:
            return self.seed_phases(config, [config.seed])
        surface = [Arm(label, surface_arm(kind, config.surface, config.kappa, config.adam_lr if "adam" in kind else
                                          config.lr, config.momentum, config.weight_decay, config.steps, log_every),
                       config.steps, cost=0.3) for label, kind in SURFACE_ARMS.items()]
        idle = [Arm(label, idle_weight_arm(kind, config.adam_lr, config.weight_decay, config.steps,
                                           log_every_for(config.steps)),
                    config.steps, cost=0.2) for label, kind in IDLE_ARMS.items()]
        net = [Arm(label, mlp_arm(kind, config.net_adam_lr if "adam" in kind else config.net_lr, config.momentum,
                                  config.weight_decay, config.net_steps, config.seed), config.net_steps)
               for label, kind in NET_ARMS.items()]
        return together(*surface, *idle) + together(*net)

    batches_seeds = True  # repeat over seeds: every seed's MLP arms in the same batched models

    def seed_phases(self, config: Config, seeds: list[int]):
        """The batched phases for every seed at once. The surface and the untouched weight do not depend on
        the seed: trained once, reported for each seed. The MLP's arms of one family and every seed are one model."""
        from engines.loop.batched import arm_cost
        from engines.loop.training import log_every_for
        from engines.supervised.optimizers_arms import families, idle_weight_arms, mlp_arms, surface_arms
        log_every = 1 if config.steps <= 1000 else log_every_for(config.steps, 1000)

        def groups(arms: dict[str, str], make, steps: int, cost: float, per_seed: bool) -> list[Arm]:
            names, kinds = list(arms), list(arms.values())
            return [Arm(" / ".join(names[i] for i in group), make([names[i] for i in group], [kinds[i] for i in group]),
                        steps, cost * arm_cost(len(group) * (len(seeds) if per_seed else 1))) for group in families(kinds)]
        lr_of = lambda kinds: config.adam_lr if "adam" in kinds[0] else config.lr  # noqa: E731  (one family: one rate)
        surface = groups(SURFACE_ARMS, lambda names, kinds: each_seed(surface_arms(
            names, kinds, config.surface, config.kappa, lr_of(kinds), config.momentum, config.weight_decay, config.steps,
            log_every), seeds), config.steps, 0.3, False)
        idle = groups(IDLE_ARMS, lambda names, kinds: each_seed(idle_weight_arms(
            names, kinds, config.adam_lr, config.weight_decay, config.steps, log_every_for(config.steps)), seeds),
            config.steps, 0.2, False)
        net = groups(NET_ARMS, lambda names, kinds: mlp_arms(
            named(names, seeds), kinds * len(seeds), config.net_adam_lr if "adam" in kinds[0] else config.net_lr,
            config.momentum, config.weight_decay, config.net_steps, [s for s in seeds for _ in names]),
            config.net_steps, 1.0, True)
        return together(*surface, *idle) + together(*net)

    def arm_universe(self) -> list[str]:
        return [*SURFACE_ARMS, *NET_ARMS, *IDLE_ARMS]

    def colors(self, arms: list[str]) -> dict[str, str]:
        """Every view of one optimizer in its colour: the colour of its name's place in the universe."""
        by_optimizer = arm_colors(OPTIMIZERS, [*SURFACE_ARMS, "Adam + L2"])
        return {arm: by_optimizer.get(optimizer_of(arm), arm_colors([arm], self.arm_universe())[arm]) for arm in arms}

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records = Records(frame)
        last = {arm: records.last(arm, "loss") for arm in [*SURFACE_ARMS, *NET_ARMS]}
        adamw = next(iter(IDLE_ARMS))
        headline = {"final surface loss (SGD)": last["SGD"], "final surface loss (SGD + momentum)": last["SGD + momentum"],
                    "final MLP loss (Adam)": last["Adam" + look.NET],
                    "AdamW decay vs (1 − lr·λ)^t, relative error": look.relative_error(adamw)(records)}
        arms = {arm: {"final_loss": last[arm], "diverged_at": records.diverged_at(arm)} for arm in last}
        return {"headline": headline, "arms": arms, "lr_times_lambda_max": look.edge_product("SGD")(records),
                "adam_first_step_over_lr": [look.first_step("Adam", c)(records) for c in ("x", "y")]}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records = Records(frame)
        surface = [arm for arm in SURFACE_ARMS if records.series(arm, "loss").size]
        net = [arm for arm in NET_ARMS if records.series(arm, "loss").size]
        if not surface and not net:
            return Explanation(waiting="Run to send five optimizers from one start across the surface, then over an MLP.")
        where = f"the quadratic (κ = {config.kappa:g})" if config.surface == "quadratic" else "Rosenbrock's valley"
        takeaway = join(*(say("On {}, {}: loss {}" if i == 0 else "{}: loss {}", *([where] if i == 0 else []), arm,
                              look.fate(records, arm)) for i, arm in enumerate(surface))) if surface else None
        details = [look.stability_sentence(records, config.surface, config.momentum), look.adam_sentence(records), look.decay_sentence(records)]
        if net:
            details.append(join(*(say("On the MLP, {}'s loss {}" if i == 0 else "{}'s {}", optimizer_of(arm),
                                      trajectory(records, arm)) for i, arm in enumerate(net))))
        details = [sentence for sentence in details if sentence is not None]
        if takeaway is None:
            takeaway, details = details[-1], details[:-1]
        return Explanation(takeaway, tuple(details))

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records = Records(frame)
        colors = self.colors(self.arm_universe())
        surface, net, idle = list(SURFACE_ARMS), list(NET_ARMS), list(IDLE_ARMS)
        return Figures({
            "trajectories": lambda: look.trajectories_figure(records, colors, surface, config.surface, config.kappa),
            "surface_loss": lambda: curves_figure(records, colors, "loss", arms=surface, log_y=True, title="Loss on the surface",
                                                  y_title="f(x, y)"),
            "weight_decay": lambda: look.decay_figure(records, colors, idle),
            "net_loss": lambda: curves_figure(records, colors, "loss", arms=net, title="MLP training loss (batch of 64)",
                                              y_title="cross-entropy (nats)", chance=math.log(4), chance_label="chance: ln 4"),
            "update_ratio": lambda: curves_figure(look.mean_over_layers(records, net), colors, "update_ratio", arms=net, log_y=True,
                                                  title="MLP: update-to-weight ratio per step (mean over layers)",
                                                  y_title="‖ΔW‖/‖W‖"),
            "update_profile": lambda: look.update_profile_figure(records, colors, net),
        })
