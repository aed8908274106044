"""Mixture of experts: does the router spread the tokens over the experts, or collapse?

A mixture-of-experts layer holds E expert MLPs and a router, one Linear that scores every
token; each token goes to its top-k experts, whose outputs are added to it weighted by the
router's probabilities (top-1: p_i, as in Switch; top-2: the two renormalized). So the
parameters grow with E while a token still uses k experts' worth. Here the layer sits on a
residual inside a small regression net; the inputs come from Gaussian clusters, each with its
own target, so experts can specialize.

**Collapse.** Nothing in the task loss asks the router to spread the load. A random router
starts uneven; an expert that gets more tokens gets larger SGD steps, improves faster, and the
router has no reason to send it fewer: the busiest expert's share f_i stays far above the
even 1/E (the page says by how much, at the start and the end). The load chart shows each expert's share
on held-out inputs over training, the next chart the busiest one in units of 1/E.

**The balancing loss** (Fedus et al. 2021) adds α·E·Σ f_i·P_i, with f_i the share of the
assignments sent to expert i and P_i its mean router probability. At perfect balance
f_i = P_i = 1/E and it is exactly α; it grows as load and probability pile onto the same
experts. The balance chart draws it divided by α. The router z-loss (Zoph et al. 2022),
mean (logsumexp of the logits)², keeps the logits small; it is trained on with its own weight.

**Capacity.** An expert takes at most ⌈capacity factor · T · k / E⌉ of a batch's T tokens;
assignments past that are dropped and the token passes on the residual alone. The bars give the
share each trained router would drop at factors 1, 1.25 and 2 (the arms train without a
limit). **Quality**: the held-out error against a dense MLP with the active parameters of one
expert (hidden h) and one with all the experts' parameters (hidden E·h).
"""
from pydantic import Field

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, shown_by, together
from scenarios.cost import logs
from scenarios.explanation import Explanation
from scenarios.moe import claims
from scenarios.moe import figures as look
from scenarios.moe.figures import AUX, DENSE_ACTIVE, DENSE_ARMS, DENSE_TOTAL, MOE_ARMS, NO_AUX, TOP2
from scenarios.plotting import Figures, arm_colors
from scenarios.records import Records

WIDTH, POINTS = 32, 4096  # the model width around the layer; training points (and as many held out)


class Config(ScenarioConfig):
    n_experts: int = Field(8, ge=2, le=16, description="E: experts in the layer. Even load is 1/E of the assignments each.")
    expert_hidden: int = Field(16, ge=4, le=64, description="h: hidden units of one expert (width 32 → h → 32). "
                                                            "The dense baselines have h and E·h.")
    clusters: int = Field(8, ge=2, le=16, description="Gaussian clusters of the inputs, each with its own target function.")
    alpha: float = Field(0.1, ge=1e-3, le=1.0, json_schema_extra={"scale": "log"},
                         description="α of the balancing loss α·E·Σ f_i·P_i (Switch used 0.01 beside a cross-entropy "
                                     "of a few nats; this task's squared error is smaller).")
    z_coef: float = Field(1e-3, title="router z-loss weight", ge=1e-4, le=0.1, json_schema_extra={"scale": "log"}, description="Weight of the router z-loss in the balanced arms "
                                                           "(ST-MoE: 1e-3). The arm without balancing has none.")
    lr: float = Field(0.1, ge=1e-3, le=0.2, json_schema_extra={"scale": "log"},
                      description="SGD learning rate (momentum 0.9), every arm.")
    batch_size: int = Field(256, ge=32, le=1024, description="T: tokens per batch; the capacity counts within a batch.")
    steps: int = Field(150, ge=20, le=2000, description="Training steps of every arm.")


class MixtureOfExperts(Scenario):
    id = "moe"
    title = "Mixture of experts"
    order = 39
    topic = "Architecture"
    picture = "top_share"
    question = "Without a balancing loss, does the router spread tokens over the experts or collapse onto a few?"
    arms_note = ("The five arms train side by side as separate models on the same data order and the same initial "
                 "stream; the MoE and dense arms differ in code, not numbers.")
    terms = {
        "Softmax": shown_by("z_loss", "z_loss", arm="top-1", how="the router's probabilities; the z-loss keeps their logits small"),
        "Residual (skip) connection": shown_by("dropped", "dropped/cf_1", arm="top-1",
                                               how="a token past its expert's capacity passes on the residual alone"),
        "Loss function": shown_by("balance", "aux_unit", arm="top-1",
                                  how="the balancing loss α·E·Σ f_i·P_i added to the squared error; exactly α at even load"),
    }
    methods = {"Mixture of experts": shown_by("load", "load/expert_00", "top_share", arm="top-1",
                                              how="per-expert load with and without the balancing loss, drops at "
                                                  "three capacity factors, and dense baselines of equal active "
                                                  "and equal total parameters")}
    formula = (r"\begin{aligned}y &= h + \sum_{i \in \mathrm{top}\text{-}k(p)} g_i\,E_i(h),\quad p = \mathrm{softmax}(W_r h)\\"
               r"L_{\text{aux}} &= \alpha\, E \sum_{i=1}^{E} f_i\, P_i \;(= \alpha \text{ when } f_i = P_i = 1/E),\quad "
               r"L_z = \tfrac{1}{T}\sum_t \big(\log\textstyle\sum_i e^{x_{t,i}}\big)^2\\"
               r"C &= \left\lceil \text{capacity factor}\cdot \frac{T\,k}{E} \right\rceil\end{aligned}")
    Config = Config
    tiny = {"steps": 20, "batch_size": 64, "n_experts": 4, "clusters": 4}
    presets = {
        "Switch's α = 0.01": {"alpha": 0.01},
        "a strong balancing loss (α = 1)": {"alpha": 1.0},
        "many experts (16)": {"n_experts": 16, "clusters": 16},
        "fewer clusters than experts": {"clusters": 3},
    }

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-05, rates_reference beside them):
    rates = {"logs": 0.00437, "macs": 4.58e-10}
    rates_reference = 0.1409  # the reference workload's CPU s beside the fit
    timed = ({"steps": 60}, {"steps": 40, "n_experts": 16, "expert_hidden": 32, "clusters": 16},
             {"steps": 100, "batch_size": 64})

    def phases(self, config: Config) -> list[list[Arm]]:
        from engines.loop.training import log_every_for
        from engines.supervised.moe import ArmSpec, train_arm
        h, e = config.expert_hidden, config.n_experts
        specs = {NO_AUX: ArmSpec(k=1), AUX: ArmSpec(k=1, alpha=config.alpha, z_coef=config.z_coef),
                 TOP2: ArmSpec(k=2, alpha=config.alpha, z_coef=config.z_coef),
                 DENSE_ACTIVE: ArmSpec(dense_hidden=h), DENSE_TOTAL: ArmSpec(dense_hidden=e * h)}
        setup = dict(clusters=config.clusters, points=POINTS, width=WIDTH, hidden=h, n_experts=e, capacity_factor=None,
                     batch_size=config.batch_size, lr=config.lr, steps=config.steps, seed=config.seed,
                     log_every=log_every_for(config.steps))
        return together(*(Arm(name, train_arm(spec, **setup), config.steps, cost=3.0 if spec.dense_hidden == 0 else 1.0)
                          for name, spec in specs.items()))

    def arm_universe(self) -> list[str]:
        return [*MOE_ARMS, *DENSE_ARMS]

    def work(self, config: Config) -> Work:
        """Three MoE arms (every expert runs on every token: E·h hidden units) and two dense ones (h, E·h);
        every log evaluates the held-out set and counts the drops."""
        t, e, h = config.batch_size, config.n_experts, config.expert_hidden
        macs = config.steps * t * WIDTH * (3 * e * h * 2 + (h + e * h) * 2) * 3  # forward + backward ≈ 3×
        return Work({"steps": 5 * config.steps, "macs": macs, "logs": 5 * logs(config.steps)},
                    floats=5 * (2 * WIDTH * e * h * 4 + t * e * h * 4) + 4 * POINTS * 10)

    def summarize(self, frame, config: Config) -> dict:
        records = Records(frame)
        top = {arm: records.last(arm, "top_share") for arm in MOE_ARMS}
        return {"headline": {f"busiest expert's share, {NO_AUX}": top[NO_AUX],
                             f"busiest expert's share, {AUX}": top[AUX],
                             f"dropped at capacity factor 1, {AUX}": records.last(AUX, "dropped/cf_1"),
                             **{f"held-out MSE, {arm}": records.last(arm, "test_mse") for arm in [AUX, *DENSE_ARMS]}},
                "top_share": top, "even_share": 1 / config.n_experts,
                "dropped": {arm: {f: records.last(arm, f"dropped/cf_{f}") for f in look.FACTORS} for arm in MOE_ARMS},
                "test_mse": {arm: records.last(arm, "test_mse") for arm in [*MOE_ARMS, *DENSE_ARMS]},
                "parameters": {arm: records.first(arm, "parameters") for arm in [*MOE_ARMS, *DENSE_ARMS]}}

    def explain(self, frame, config: Config) -> Explanation:
        records = Records(frame)
        shares = [s for arm in MOE_ARMS if (s := claims.share_sentence(records, arm, config.n_experts)) is not None]
        if not shares:
            return Explanation(waiting="Run to train the router with and without the balancing loss, and the dense baselines.")
        from scenarios.explanation import join
        details = [claims.balance_sentence(records, MOE_ARMS),
                   *(claims.dropped_sentence(records, arm) for arm in MOE_ARMS),
                   claims.z_sentence(records, MOE_ARMS), claims.quality_sentence(records, AUX, DENSE_ARMS),
                   claims.quality_sentence(records, TOP2, DENSE_ARMS)]
        return Explanation(join(*shares[:2]), tuple(s for s in [*shares[2:], *details] if s is not None))

    def figures(self, frame, config: Config) -> Figures:
        records = Records(frame)
        colors = arm_colors(self.arm_universe(), self.arm_universe())
        variance = next((records.first(arm, "target_var") for arm in DENSE_ARMS + MOE_ARMS if records.has("target_var", arm)), None)
        return Figures({
            "load": lambda: look.load_figure(records, MOE_ARMS, config.n_experts),
            "top_share": lambda: look.top_share_figure(records, colors, MOE_ARMS, config.n_experts),
            "balance": lambda: look.balance_figure(records, colors, MOE_ARMS),
            "dropped": lambda: look.dropped_figure(records, colors, MOE_ARMS),
            "z_loss": lambda: look.z_loss_figure(records, colors, MOE_ARMS),
            "quality": lambda: look.quality_figure(records, colors, [*MOE_ARMS, *DENSE_ARMS], variance),
        })
