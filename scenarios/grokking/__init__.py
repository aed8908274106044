"""Grokking: a network that fits its training set at once and generalizes only much later, and the
explicit algorithm it ends up with.

**The task** (Power et al. 2022): c = (a + b) mod p for a prime p, trained on a random share of
the p² pairs, the rest held out. A small network (a shared embedding, one hidden ReLU layer, p
logits) trains full batch with AdamW. Both arms start from the same weights on the same split;
one has weight decay λ, the other none (plain Adam).

**What to look at.** Training accuracy reaches 100% within tens of steps in both arms: the
network has memorized. With weight decay, held-out accuracy sits near chance (often below it)
for hundreds of steps and then climbs to ≈ 100%: it *groks*. Without weight decay it stays
where it was. The page says at which steps, read from the run.

**What the network knows** (Nanda et al. 2023). The generalizing network adds residues with
trigonometry: cos(w(a + b)) = cos(wa)cos(wb) − sin(wa)sin(wb), w = 2πk/p, for a few key
frequencies k. It shows in the embedding: read along the residues, its Fourier spectrum is
sparse, a few frequencies carrying most of its squared norm (the spectrum charts). Project the
embedding onto only those frequencies and the network still adds: that projection is what
the network knows, in explicit form — the seed's *analytic distillation*. Projecting onto the
same number of other frequencies destroys it (the control). Over training, the *restricted*
loss (only the key frequencies kept) falls before the full held-out loss does, and the
*excluded* loss (the key frequencies removed, on the training pairs) rises: the memorizing
solution is being replaced by the circuit. The key frequencies at each logged step are that
step's k largest (Nanda et al. fix them from the final model; this page draws them live).
"""
from pydantic import Field, model_validator

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, shown_by, together
from scenarios.cost import logs
from scenarios.explanation import Explanation, join
from scenarios.grokking import claims
from scenarios.grokking import figures as look
from scenarios.grokking.figures import ARMS, DECAY, NO_DECAY
from scenarios.plotting import Figures, arm_colors
from scenarios.records import Records

POINTS = 60  # logged points per arm: each log runs the network four times and the FFT


def is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))


class Config(ScenarioConfig):
    p: int = Field(47, title="modulus p", ge=23, le=59, description="The modulus, a prime: the task is (a + b) mod p over all p² pairs, "
                                                 "and the embedding has (p − 1)/2 frequencies.")
    train_fraction: float = Field(0.4, ge=0.2, le=0.8, description="Share of the p² pairs trained on; the rest are "
                                                                   "held out. Less data: later grokking, or none.")
    weight_decay: float = Field(1.0, ge=0.05, le=5.0, json_schema_extra={"scale": "log"},
                                description="λ of AdamW in the decay arm (p ← p(1 − lr·λ) each step); the other arm has 0.")
    lr: float = Field(0.02, ge=1e-3, le=0.05, json_schema_extra={"scale": "log"},
                      description="AdamW learning rate (β = 0.9, 0.98), both arms.")
    embed_dim: int = Field(32, ge=8, le=64, description="d: the embedding's width, shared by a and b.")
    hidden: int = Field(128, ge=32, le=256, description="Hidden ReLU units on [E_a; E_b].")
    steps: int = Field(1500, ge=100, le=5000, description="Full-batch AdamW steps of each arm.")
    key_frequencies: int = Field(6, ge=1, le=11, description="k: the key frequencies kept in the restricted network "
                                                             "(the k largest in the embedding at each logged step).")

    @model_validator(mode="after")
    def _prime_and_room(self) -> "Config":
        if not is_prime(self.p):
            raise ValueError(f"p={self.p} is not prime: pick one of 23, 29, 31, 37, 41, 43, 47, 53, 59")
        if 2 * self.key_frequencies > (self.p - 1) // 2:
            raise ValueError(f"key_frequencies={self.key_frequencies} leaves no room for the control (the next "
                             f"{self.key_frequencies}) among the {(self.p - 1) // 2} frequencies of p={self.p}: "
                             f"use at most {(self.p - 1) // 4}")
        return self


class Grokking(Scenario):
    id = "grokking"
    title = "Grokking, and what the network knows"
    order = 17
    topic = "Generalization"
    picture = "accuracy"
    question = "Why does held-out accuracy jump long after training accuracy hit 100%, and what has the network learned by then?"
    arms_note = ("The two arms train side by side as separate models from the same initial weights on the same split; "
                 "they differ only in AdamW's weight decay.")
    terms = {
        "Weight decay / L2 regularization": shown_by("accuracy", "test_acc", "weight_norm", arm=DECAY,
                                                     how="with decay the held-out accuracy jumps; without it, it does not"),
        "AdamW": shown_by("norm", "weight_norm", arm=DECAY, how="decoupled decay p ← p(1 − lr·λ) beside the Adam step"),
        "Overfitting": shown_by("loss", "loss", "test_loss", arm=NO_DECAY,
                                how="training loss near 0 while the held-out loss stays far above chance's"),
        "Embedding": shown_by("spectrum", "spectrum/", "key_share", arm=DECAY,
                              how="the embedding's Fourier spectrum over the residues: a few key frequencies"),
        "Cross-entropy": shown_by("loss", "loss", "test_loss", how="training and held-out cross-entropy over p classes"),
    }
    methods = {"Analytic distillation": shown_by("distilled", "restricted_acc", "restricted_loss", "control_acc",
                                                 "excluded_loss", "key_share", arm=DECAY,
                                                 how="the embedding projected onto its few key Fourier frequencies "
                                                     "keeps the accuracy; as many other frequencies do not")}
    formula = (r"\begin{aligned}c &= (a + b) \bmod p,\qquad \text{logits} = W_o\,\mathrm{ReLU}(W_h [E_a; E_b] + b_h)\\"
               r"\hat E_k &= \sum_{x=0}^{p-1} E_x\, e^{-2\pi i k x / p},\qquad \text{share}_k = "
               r"\frac{2\|\hat E_k\|^2}{\sum_{j\ge1} 2\|\hat E_j\|^2}\\"
               r"\cos(w(a+b)) &= \cos(wa)\cos(wb) - \sin(wa)\sin(wb),\quad w = 2\pi k/p\\"
               r"\text{AdamW: } \theta &\leftarrow \theta(1-\eta\lambda) - \eta\,\hat m/(\sqrt{\hat v}+\epsilon)\end{aligned}")
    Config = Config
    tiny = {"p": 23, "steps": 100, "hidden": 32, "embed_dim": 8, "key_frequencies": 2}
    tiny_space = {"steps": [100, 150], "hidden": [32, 64]}
    presets = {
        "less data (30% of the pairs)": {"train_fraction": 0.3},
        "more data (60%): grokking comes sooner": {"train_fraction": 0.6},
        "weak weight decay (λ = 0.1)": {"weight_decay": 0.1},
        "a smaller prime (p = 31)": {"p": 31, "key_frequencies": 4},
        "a larger prime (p = 59)": {"p": 59},
    }

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-05, rates_reference beside them):
    rates = {"macs": 3.05e-11, "run": 0.0724, "steps": 0.000745}
    rates_reference = 0.1467  # the reference workload's CPU s beside the fit
    timed = ({"steps": 200}, {"steps": 300, "p": 31, "key_frequencies": 4}, {"steps": 200, "hidden": 256, "p": 59})

    def phases(self, config: Config) -> list[list[Arm]]:
        from engines.loop.training import log_every_for
        from engines.supervised.grokking import train_arm
        setup = dict(p=config.p, train_fraction=config.train_fraction, embed_dim=config.embed_dim, hidden=config.hidden,
                     lr=config.lr, steps=config.steps, key_count=config.key_frequencies, seed=config.seed,
                     log_every=log_every_for(config.steps, POINTS))
        return together(Arm(DECAY, train_arm(weight_decay=config.weight_decay, **setup), config.steps),
                        Arm(NO_DECAY, train_arm(weight_decay=0.0, **setup), config.steps))

    def arm_universe(self) -> list[str]:
        return list(ARMS)

    def work(self, config: Config) -> Work:
        """Two arms of full-batch steps on the training pairs; every log scores the held-out pairs three times
        and the training pairs once more."""
        pairs = config.p ** 2
        example_macs = 2 * config.embed_dim * config.hidden + config.hidden * config.p
        macs = 2 * (3 * config.steps * config.train_fraction * pairs + logs(config.steps, POINTS) * 4 * pairs) * example_macs
        return Work({"steps": 2 * config.steps, "logs": 2 * logs(config.steps, POINTS), "macs": macs},
                    floats=2 * (pairs * (config.p + config.hidden) * 3 + 4 * example_macs))

    def summarize(self, frame, config: Config) -> dict:
        records = Records(frame)
        steps = {arm: {"train_100": claims.first_step(records, arm, "train_acc", at_least=1.0),
                       "test_95": claims.first_step(records, arm, "test_acc", at_least=claims.GROKKED)} for arm in ARMS}
        return {"headline": {f"held-out accuracy, {DECAY}": records.last(DECAY, "test_acc"),
                             f"held-out accuracy, {NO_DECAY}": records.last(NO_DECAY, "test_acc"),
                             f"step held-out ≥ 95%, {DECAY}": steps[DECAY]["test_95"],
                             f"key-frequency accuracy, {DECAY}": records.last(DECAY, "restricted_acc")},
                "steps": steps,
                "test_acc": {arm: records.last(arm, "test_acc") for arm in ARMS},
                "key_share": {arm: records.last(arm, "key_share") for arm in ARMS},
                "restricted_acc": {arm: records.last(arm, "restricted_acc") for arm in ARMS},
                "control_acc": {arm: records.last(arm, "control_acc") for arm in ARMS},
                "excluded_acc": {arm: records.last(arm, "excluded_acc") for arm in ARMS},
                "weight_norm": {arm: records.last(arm, "weight_norm") for arm in ARMS}}

    def explain(self, frame, config: Config) -> Explanation:
        records = Records(frame)
        heads = [s for arm in ARMS if (s := claims.grokking_sentence(records, arm, config.p)) is not None]
        if not heads:
            return Explanation(waiting="Run to train modular addition with and without weight decay.")
        k = config.key_frequencies
        details = [claims.spectrum_sentence(records, DECAY, k, config.p), claims.distilled_sentence(records, DECAY, k),
                   claims.spectrum_sentence(records, NO_DECAY, k, config.p), claims.distilled_sentence(records, NO_DECAY, k),
                   claims.progress_sentence(records, DECAY), claims.progress_sentence(records, NO_DECAY),
                   claims.norm_sentence(records, ARMS)]
        return Explanation(join(*heads), tuple(s for s in details if s is not None))

    def figures(self, frame, config: Config) -> Figures:
        records = Records(frame)
        colors = arm_colors(ARMS, ARMS)
        return Figures({
            "accuracy": lambda: look.accuracy_figure(records, colors, config.p),
            "loss": lambda: look.loss_figure(records, colors),
            "restricted": lambda: look.restricted_figure(records, colors, config.key_frequencies),
            "norm": lambda: look.norm_figure(records, colors),
            "spectrum": lambda: look.spectrum_figure(records, colors),
            "distilled": lambda: look.distilled_figure(records, colors, config.key_frequencies),
            "spectrum_over_time": lambda: look.spectrum_over_time_figure(records),
        })
