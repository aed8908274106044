"""Masked against causal, and word2vec: what does reading both sides buy, and what do word vectors learn?

One Transformer shape, trained twice on the same topic lines (engines/sequence/topics.py: a topic word,
then a chain of that topic's words): as a *causal* LM (attention to the past, predict the next token, GPT)
and as a *masked* LM (attention both ways, Devlin et al. 2019: 15% of the tokens chosen, of those 80%
replaced by [MASK], 10% by a random token, 10% kept, and the loss on the chosen ones). Same parameters,
same steps, same tokens read per step. Then each fills one hidden middle word of held-out lines: the
masked model reads the words on both sides, the causal one only those before. Given its topic a line is
a first-order chain, so the best any model can do is exact: P(x_j | rest) ∝ P(x_j | x_{j−1}) P(x_{j+1} |
x_j). The page draws that ceiling from both sides and from the left. The masked model learns slower per
step (it is graded on 15% of the positions) but passes the left-only ceiling, which the causal model
cannot. Measured at the defaults (seed 0, 600 steps): masked 77% right, causal 48%; Bayes both sides 85%,
left 56%. At 400 steps seed 3's masked model was still below the left-only ceiling: it needs the steps.

Word2vec (Mikolov et al. 2013): skip-gram with negative sampling on sentences generated from a small
relational world (engines/sequence/relational.py: countries, their capitals and peoples, in regions),
so every analogy (france : paris :: japan : ?) has a known answer. Levy & Goldberg (2014): at its
optimum, w·c = PMI(w, c) − ln k, counted exactly from the corpus; the page scatters w·c against it
(defaults: r = 0.97 on 618 frequent pairs against the α = 0.75 target; analogies 100% with w + c, 40% with w).

Look at the fill accuracy against the two ceilings, the two losses, analogy accuracy over training,
w·c against the shifted PMI, the countries and capitals on their principal plane, and the neighbours.
"""
import pandas as pd
from pydantic import Field, model_validator

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, in_turn, shown_by, together
from scenarios.cost import logs
from scenarios.explanation import Explanation
from scenarios.masked_causal import claims, figures as look
from scenarios.masked_causal.figures import CAUSAL, EXACT, MASKED, SGNS, WORLD
from scenarios.plotting import Figures, arm_colors, curves_figure, full_width
from scenarios.records import Records

SENTENCES = 6000


class Config(ScenarioConfig):
    steps: int = Field(600, ge=20, le=3000, description="AdamW steps of each language model (16 windows a step).")
    mask_rate: float = Field(0.15, ge=0.05, le=0.5, description="Masked LM: the share of tokens chosen to predict "
                                                                "(of those 80% [MASK], 10% random, 10% kept).")
    line_length: int = Field(16, ge=4, le=32, description="Tokens per topic line (the topic word, then its words). "
                                                          "A line must fit in the model's context.")
    context: int = Field(32, ge=8, le=64, description="Tokens each model reads at once (its learned positions).")
    topics: int = Field(2, ge=1, le=4, description="Topics of the synthetic language.")
    branching: int = Field(3, ge=1, le=8, description="Next words each word allows within a topic (1: each line "
                                                      "determined by its first two tokens).")
    lr: float = Field(1e-2, ge=1e-4, le=3e-2, json_schema_extra={"scale": "log"}, description="AdamW learning rate of the LMs.")
    countries: int = Field(10, ge=4, le=16, description="Countries of the relational world (each with a capital and a people).")
    window: int = Field(4, ge=1, le=6, description="Skip-gram window: context words this many positions either side.")
    negatives: int = Field(5, ge=1, le=20, description="k: noise words drawn for every (word, context) pair.")
    noise_power: float = Field(0.75, ge=0.0, le=1.0, description="α: noise words drawn ∝ count^α (word2vec: 0.75; "
                                                                 "at 1 the optimum is exactly PMI − ln k).")
    dim: int = Field(32, ge=4, le=64, description="Dimension of the word and context vectors.")
    w2v_steps: int = Field(800, title="word2vec steps", ge=20, le=5000, description="Adam steps of SGNS, 512 pairs each, rate decayed linearly to 0.")
    w2v_lr: float = Field(0.02, title="word2vec lr", ge=1e-3, le=0.1, json_schema_extra={"scale": "log"}, description="SGNS's starting learning rate.")

    @model_validator(mode="after")
    def _lines_fit(self) -> "Config":
        if self.line_length > self.context:
            raise ValueError(f"line_length={self.line_length} is longer than the model's context (context={self.context}): "
                             "the models could not read a whole line; shorten the lines or widen the context")
        return self


def lm_spec(config: Config, causal: bool):
    from engines.sequence.lm import LMSpec
    vocab = config.topics + 16 + 1  # the source's tokens and [MASK], in both models: the same size
    return LMSpec(vocab, config.context, d_model=48, layers=1, heads=2, causal=causal, seed=config.seed)


def sgns_arm(config: Config):
    from engines.loop.training import log_every_for
    from engines.sequence.word2vec import SGNSArm
    return SGNSArm(config.countries, SENTENCES, config.window, config.negatives, config.dim, config.noise_power,
                   config.w2v_steps, config.w2v_lr, log_every=log_every_for(config.w2v_steps, 40), seed=config.seed)


class MaskedCausal(Scenario):
    id = "masked-vs-causal"
    title = "Masked vs causal, and word2vec"
    order = 41
    topic = "Language models"
    picture = "fill"
    question = "What does a model that reads both sides fill in that a causal one cannot, and what do word vectors learn?"
    terms = {
        "Embedding": shown_by("plane", "plane/", "analogy/accuracy", arm=SGNS,
                              how="word vectors whose offsets carry a relation: country → capital"),
        "Attention": shown_by("fill", "fill/accuracy", arm=MASKED, how="attention both ways fills a word from its right side too"),
        "Token": shown_by("loss", "heldout_masked_nats", arm=MASKED, how="15% of the tokens hidden, each predicted"),
        "Cross-entropy": shown_by("loss", "heldout_nats", "heldout_masked_nats", arm="LM",
                                  how="next-token and masked-token loss, in nats per predicted token"),
        "Entropy rate": shown_by("loss", "entropy_rate", arm=EXACT, how="the next-token loss's exact floor"),
        "Causal mask": shown_by("fill", "fill/accuracy", arm=CAUSAL, how="the same model masked to the past fills from the left only"),
        "Negative sampling": shown_by("identity", "identity/correlation", "pair/", arm=SGNS,
                                      how="k noise words per pair; w·c converges to PMI − ln k"),
        "Pointwise mutual information (PMI)": shown_by("identity", "target/", "pmi/", arm=WORLD,
                                                       how="counted exactly from the corpus: what w·c converges to"),
    }
    methods = {
        "Masked language modeling": shown_by("fill", "fill/accuracy", "heldout_masked_nats", arm=MASKED,
                                             how="15% chosen, 80/10/10; fills a hidden word from both sides"),
        "Word2vec": shown_by("identity", "identity/correlation", "pair/", "analogy/accuracy", arm=SGNS,
                             how="skip-gram with negative sampling: analogies, and w·c against PMI − ln k"),
        "Next-token prediction": shown_by("fill", "fill/accuracy", "heldout_nats", arm=CAUSAL,
                                          how="the same model causal: it fills from the left only"),
    }
    formula = (r"\begin{aligned}\text{masked: } L &= -\tfrac{1}{|M|}\sum_{j\in M}\ln p_\theta(x_j\mid \tilde x)\quad"
               r"\text{causal: } L = -\tfrac1T\sum_t \ln p_\theta(x_{t+1}\mid x_{\le t})\\"
               r"\text{SGNS: } &-\ln\sigma(w\cdot c)-\textstyle\sum_{i=1}^{k}\ln\sigma(-w\cdot n_i),\ n_i\sim P_n"
               r"\ \Rightarrow\ w\cdot c \to \mathrm{PMI}(w,c)-\ln k\end{aligned}")
    Config = Config
    tiny = {"steps": 20, "line_length": 8, "context": 16, "w2v_steps": 40}
    tiny_space = {"context": [8, 16], "line_length": [4, 8]}
    presets = {
        "masked LM, longer training": {"steps": 1500},
        "the exact identity: α = 1, dimension 64": {"noise_power": 1.0, "dim": 64, "w2v_steps": 1500},
        "a deterministic language": {"branching": 1},
        "mask 40% of the tokens": {"mask_rate": 0.4},
        "sixteen countries": {"countries": 16},
    }
    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"lm_logs": 0.00703, "lm_token_steps": 0.000125, "sgns_steps": 0.00146}
    rates_reference = 0.1372  # the reference workload's CPU s beside the fit
    timed = ({"steps": 100, "w2v_steps": 200}, {"steps": 60, "context": 64, "line_length": 32, "w2v_steps": 100},
             {"steps": 40, "w2v_steps": 1000, "countries": 16})

    def work(self, config: Config) -> Work:
        """Two LMs side by side (16 windows of `context` tokens a step, ~25 held-out fills each), then SGNS (512
        pairs a step, ~40 logs of analogies and the identity)."""
        return Work({"lm_token_steps": 2 * config.steps * config.context, "lm_logs": 2 * logs(config.steps, 25),
                     "sgns_steps": config.w2v_steps, "sgns_logs": logs(config.w2v_steps, 40)},
                    floats=2 * (48 * 48 * 12 + 2 * 21 * 48) + 16 * config.context * 48 * 20 + 512 * 6 * config.dim * 4)

    def phases(self, config: Config) -> list[list[Arm]]:
        from engines.loop.training import log_every_for
        from engines.sequence import masked_causal as engine
        from engines.sequence.word2vec import facts, sgns_records
        from engines.loop.records import StepRecord
        source = dict(topics=config.topics, branching=config.branching, line_length=config.line_length, seed=config.seed)
        log_every = log_every_for(config.steps, 25)
        lms = [Arm(name, engine.fill_records(engine.FillArm(lm_spec(config, causal), config.steps, config.lr, log_every,
                                                            config.mask_rate), **source), config.steps)
               for name, causal in ((CAUSAL, True), (MASKED, False))]
        arm = sgns_arm(config)
        w2v = Arm(SGNS, sgns_records(arm), config.w2v_steps, cost=0.3)
        known = in_turn(Arm(EXACT, engine.exact_records(**source), 1), Arm(WORLD, iter([StepRecord(0, facts(arm))]), 1))
        return known + together(*lms) + together(w2v)

    def arm_universe(self) -> list[str]:
        return [CAUSAL, MASKED, SGNS, EXACT, WORLD]

    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records = Records(frame)
        headline = {"fill accuracy, masked": records.last(MASKED, "fill/accuracy"),
                    "fill accuracy, causal": records.last(CAUSAL, "fill/accuracy"),
                    "analogy accuracy (w + c)": records.last(SGNS, "analogy/accuracy"),
                    "w·c vs shifted PMI, correlation": records.last(SGNS, "identity/correlation")}
        exact = {m: records.first(EXACT, m) for m in ("bayes/both_accuracy", "bayes/left_accuracy", "bayes/both_nats",
                                                      "bayes/left_nats", "entropy_rate")}
        return {"headline": headline, "exact": exact,
                "held_out": {"next_token_nats": records.last(CAUSAL, "heldout_nats"),
                             "masked_token_nats": records.last(MASKED, "heldout_masked_nats")}}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records = Records(frame)
        sentences = [s for s in (claims.fill_sentence(records), claims.loss_sentence(records, config.mask_rate),
                                 claims.analogy_sentence(records),
                                 claims.identity_sentence(records, config.negatives, config.noise_power),
                                 claims.neighbour_sentence(records, config.countries)) if s is not None]
        if not sentences:
            return Explanation(waiting="Run to train both language models and the word vectors.")
        return Explanation(sentences[0], tuple(sentences[1:]))

    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records = Records(frame)
        colors = arm_colors(self.arm_universe(), self.arm_universe())
        return Figures({
            "fill": lambda: look.fill_figure(records, colors),
            "loss": lambda: look.loss_figure(records, colors),
            "analogy": lambda: look.analogy_figure(records, colors),
            "plane": lambda: look.plane_figure(records, colors, config.countries),
            "identity": lambda: look.identity_figure(records, colors, config.countries),
            "identity_curve": lambda: curves_figure(records, colors, "identity/correlation", arms=[SGNS], log_y=False,
                                                    title="Correlation of w·c with the shifted PMI, over training",
                                                    y_title="Pearson r on the frequent pairs"),
            "neighbours": lambda: full_width(look.neighbours_figure(records, config.countries)),  # alone in its row
        })
