"""RLVR with GRPO: a tiny LM learns a task whose answers a program checks, with no reward model and no critic.

The task: a prompt of `bits` binary digits and "="; the answer is their digit sum (how many ones,
a digit 0…bits). A response is any tokens and then EOS; the token just before EOS is the answer,
and filler "." before it is allowed, so the policy can make a response longer or shorter. The
reward is a program's verdict: 1 for the right digit, 0 otherwise. A quarter of each answer's
prompts are held out and never trained on (never an answer's only prompt, so every answer is trained).

**Warm start.** The project's tiny LM (engines.sequence.lm) is first trained by teacher forcing,
briefly and gently, on well-formed responses with a *random* answer ("."×k, a digit of 0…bits, EOS, k = 0…fill, 3 by default):
it writes the format and the range of answers but answers at chance, 1/(bits + 1). That model is also the KL reference π_ref.

**GRPO** (Shao et al. 2024): for each prompt, G responses from π_old; each one's advantage is its
reward standardised within the group, A_i = (r_i − mean r)/std r; every token of response i adds
the clipped surrogate min(ρA_i, clip(ρ, 1 − ε, 1 + ε)A_i), ρ = π/π_old, minus β·KL(π‖π_ref) (the
k3 estimate), averaged over the response's |o_i| tokens. No critic: the group is the baseline.
A group whose G rewards are all equal has A = 0: it contributes no policy gradient at all.

**Dr. GRPO** (Liu et al. 2025) drops both the 1/|o| and the std. The std multiplies a prompt's
gradient by 1/√(p(1 − p)) for its group's success rate p, so nearly-solved and nearly-hopeless
prompts weigh most; the 1/|o| pushes a wrong answer's tokens down less the longer it is, and a
right answer's up more the shorter it is, so wrong answers may drift longer than right ones. Look at held-out accuracy first, then the length of wrong
answers in each arm, the per-prompt weight against the formula, and the share of groups that
carried no signal.

**Where the answers sit.** A response's length is its answer's place + 2 (the answer, then EOS), so
a change of length is a move of the answers. Each evaluation records after how many tokens the
sampled answers come, and how accurate the policy's likeliest digit is at each place: a policy
that counts better a few tokens in moves its answers there, right and wrong alike, whatever the
normalisation.
"""
from pydantic import Field, model_validator

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, in_turn, shown_by, together
from scenarios.explanation import Explanation
from scenarios.plotting import Figures, arm_colors
from scenarios.records import Records
from scenarios.rlvr_grpo import claims
from scenarios.rlvr_grpo import figures as look
from scenarios.rlvr_grpo.figures import DR, GRPO, POLICIES, WARM

HELDOUT_SHARE = 0.25
WARM_LR, WARM_BATCH = 3e-3, 64  # gentle: a harder warm start leaves a policy slow to learn
POINTS = 30      # logs per GRPO arm
WEIGHT_LOGS = 6  # logs at which every group's gradient is measured
LM = {"d_model": 32, "layers": 1, "heads": 2}  # the policy's TinyLM: one block learns to count faster


class Config(ScenarioConfig):
    bits: int = Field(8, ge=5, le=9, description="Binary digits per prompt (2^bits prompts, a quarter held out); "
                                                 "the answer, their sum, is one digit 0…bits.")
    group: int = Field(8, ge=2, le=32, description="G: responses sampled per prompt. The advantage is standardised "
                                                   "within these G.")
    prompts: int = Field(16, ge=2, le=64, description="Prompts per rollout (each sampled G times).")
    steps: int = Field(600, ge=4, le=3000, description="Policy updates per arm.")
    epochs: int = Field(2, ge=1, le=4, description="Updates per rollout: after the first, π ≠ π_old and the clip can act.")
    lr: float = Field(3e-3, ge=1e-4, le=3e-2, description="Adam learning rate of both arms.",
                      json_schema_extra={"scale": "log"})
    beta: float = Field(0.04, ge=0.0, le=1.0, description="β: weight of the KL(π‖π_ref) term per token "
                                                          "(DeepSeekMath: 0.04).")
    clip: float = Field(0.2, ge=0.05, le=1.0, description="ε: ρ = π/π_old is clipped to [1 − ε, 1 + ε].")
    max_len: int = Field(8, ge=5, le=12, description="Longest response (tokens, EOS included); one with no EOS "
                                                     "by then earns 0. The warm start writes 2…fill + 2.")
    fill: int = Field(3, title="warm start: most filler tokens", ge=0, le=5, description="The warm start writes 0…fill filler '.' tokens before its answer "
                                                 "(uniformly): how much the lengths GRPO starts from vary.")
    warm_steps: int = Field(30, ge=5, le=1000, description="Teacher-forcing steps of the warm start "
                                                           "(random answers: the format, not the task).")

    @model_validator(mode="after")
    def _room(self) -> "Config":
        if self.steps < self.epochs:
            raise ValueError(f"steps ({self.steps}) must be at least epochs ({self.epochs}): one rollout at least")
        if self.max_len < self.fill + 3:
            raise ValueError(f"max_len ({self.max_len}) must be at least fill + 3 ({self.fill + 3}): the warm start's "
                             "longest response and a token of room")
        return self


def log_every(config: Config) -> int:
    """A multiple of the epochs, so every log falls on a rollout's first update."""
    return config.epochs * max(1, -(-config.steps // (config.epochs * POINTS)))


def weights_at(config: Config) -> set[int]:
    logs = list(range(0, config.steps, log_every(config)))
    return {logs[round(k * (len(logs) - 1) / max(1, WEIGHT_LOGS - 1))] for k in range(min(WEIGHT_LOGS, len(logs)))}


class RlvrGrpo(Scenario):
    id = "rlvr-grpo"
    title = "RL with verifiable rewards: GRPO and Dr. GRPO"
    order = 77
    topic = "Alignment"
    picture = "accuracy"
    question = "Can a tiny LM learn a checkable task from its own samples, with a group baseline and no critic — and " \
               "what do GRPO's 1/|o| and std do?"
    arms_note = ("The warm start trains first; GRPO and Dr. GRPO then start from copies of it, side by side, on the "
                 "same prompt stream.")
    terms = {
        "KL divergence": shown_by("kl_clip", "kl", arm=GRPO, how="the k3 estimate of KL(π‖π_ref) per token over training"),
        "PPO": shown_by("kl_clip", "clipfrac", arm=GRPO, how="GRPO keeps PPO's clipped ratio: the share of tokens "
                                                            "the clip stopped, after a rollout's first update"),
    }
    methods = {"Reinforcement learning with verifiable rewards": shown_by(
        "accuracy", "heldout/accuracy", "reward", "zero_advantage_groups", arm=GRPO,
        how="a program checks each sampled answer; GRPO from the group's rewards: held-out accuracy from chance")}
    formula = (r"\begin{aligned}A_i &= \frac{r_i - \mathrm{mean}(r_{1..G})}{\mathrm{std}(r_{1..G})}\ \ "
               r"(\text{Dr. GRPO: } r_i - \mathrm{mean})\qquad"
               r"\mathrm{KL}_t = \tfrac{\pi_{\mathrm{ref}}}{\pi} - \log\tfrac{\pi_{\mathrm{ref}}}{\pi} - 1\\"
               r"\mathcal{J} &= \frac{1}{G}\sum_{i=1}^{G}\frac{1}{|o_i|}\sum_{t=1}^{|o_i|}\Big[\min\big(\rho_{i,t}A_i,\ "
               r"\mathrm{clip}(\rho_{i,t}, 1-\epsilon, 1+\epsilon)A_i\big) - \beta\,\mathrm{KL}_t\Big]\ \ "
               r"(\text{Dr. GRPO: } \tfrac{1}{|o_i|} \to \tfrac{1}{L_{\max}})\qquad"
               r"\frac{\|\nabla_{\mathrm{std}}\|}{\|\nabla_{\mathrm{Dr}}\|} = \frac{1}{\sqrt{p(1-p)}}\end{aligned}")
    Config = Config
    tiny = {"steps": 8, "warm_steps": 6, "prompts": 4, "group": 4}
    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-06, rates_reference beside them; sampling with a
    # key/value cache is too cheap beside the updates for the fit to give it a rate of its own):
    rates = {"logs": 0.0132, "run": 0.165, "updates": 0.000107, "warm_steps": 0.0508}
    rates_reference = 0.3137  # the reference workload's CPU s beside the fit
    timed = ({"steps": 24}, {"steps": 16, "prompts": 32, "group": 8}, {"steps": 40, "epochs": 1, "prompts": 8})
    presets = {
        "GRPO beside Dr. GRPO (defaults)": {},
        "G = 4: more groups with equal rewards": {"group": 4},
        "no KL term (β = 0)": {"beta": 0.0},
        "one update per rollout (the clip never acts)": {"epochs": 1},
    }

    def work(self, config: Config) -> Work:
        """Per arm: a rollout (prompts × G samples, up to max_len forward passes) every `epochs` updates, each
        update a forward and backward over prompts × G responses, and a held-out evaluation per log."""
        rollouts = -(-config.steps // config.epochs)
        samples = rollouts * config.prompts * config.group
        return Work({"warm_steps": config.warm_steps, "sample_tokens": 2 * samples * config.max_len,
                     "updates": 2 * config.steps * config.prompts * config.group,
                     "logs": 2 * -(-config.steps // log_every(config))},
                    floats=config.prompts * config.group * config.max_len * 64 * 13)

    def phases(self, config: Config) -> list[list[Arm]]:
        from engines.rl import digit_sum, grpo
        from engines.sequence.lm import LMSpec
        task = digit_sum.Task.make(config.bits, config.max_len, HELDOUT_SHARE, config.seed)
        spec = LMSpec(digit_sum.VOCAB, context=config.bits + 1 + config.max_len, seed=config.seed, **LM)
        built: dict = {}
        warm = grpo.warm_start(task, spec, config.warm_steps, WARM_LR, WARM_BATCH, config.seed,
                               max(1, config.warm_steps // 10), built, fill=config.fill)

        def arm(dr: bool):
            yield from grpo.grpo_arm(task, built["reference"], steps=config.steps, lr=config.lr, prompts=config.prompts,
                                     group=config.group, epochs=config.epochs, clip=config.clip, beta=config.beta,
                                     dr=dr, log_every=log_every(config), weights_at=weights_at(config),
                                     seed=config.seed + 1)
        return in_turn(Arm(WARM, warm, config.warm_steps + 1, cost=0.3, needed=True)) + together(
            Arm(GRPO, arm(False), config.steps), Arm(DR, arm(True), config.steps))

    def arm_universe(self) -> list[str]:
        return [GRPO, DR, WARM]

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame, config: Config) -> dict:
        records = Records(frame)
        arms = {arm: {name: records.last(arm, name) for name in ("heldout/accuracy", "heldout/greedy_accuracy",
                                                                  "reward", "kl", "samples")}
                for arm in POLICIES if records.has("heldout/accuracy", arm)}
        for arm in arms:
            arms[arm]["wrong_length_change"] = claims.wrong_length_change(arm)(records)
        return {"headline": claims.headline(records), "arms": arms,
                "warm_start_heldout_accuracy": records.last(WARM, "heldout/accuracy"),
                "chance": look.chance(config.bits), "weight_error": claims.weight_error(records),
                "equal_groups_max_grad_norm": claims.equal_groups_norm(records)}

    def explain(self, frame, config: Config) -> Explanation:
        return claims.explanation(Records(frame), config)

    def figures(self, frame, config: Config) -> Figures:
        records = Records(frame)
        colors = arm_colors(self.arm_universe(), self.arm_universe())
        return Figures({
            "accuracy": lambda: look.accuracy_figure(records, colors, config.bits),
            "length": lambda: look.length_figure(records, colors),
            "answer_place": lambda: look.place_figure(records, colors, config.bits),
            "prompt_weight": lambda: look.weight_figure(records, colors),
            "zero_signal": lambda: look.signal_figure(records, colors, config.group),
            "kl_clip": lambda: look.kl_figure(records, colors, config.clip),
            "warm_start": lambda: look.warm_figure(records, colors),
        })
