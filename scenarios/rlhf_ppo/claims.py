"""RLHF beside DPO, said: where each policy ended against π*, how good the reward model is, reward
over-optimization where a run shows it, and what PPO's clip did. Every number is re-read from
the records when checked, so each sentence holds for any config and any partial frame."""
from collections.abc import Callable

from scenarios.claims import GAVE_BACK, Computed, DivergedAt, Final, Peak
from scenarios.explanation import Explanation, Sentence, join, say
from scenarios.records import Records

Compute = Callable[[Records], float | None]
POLICIES = ("PPO", "DPO")
OPTIMIZES_RM = ("PPO",)  # DPO trains on the pairs: over-optimizing the reward model cannot be its cause
RM = "reward model"
CHANCE_ACCURACY = 0.5    # a reward model that orders held-out pairs no better than a coin
MIN_RISE = 0.1           # a "peak": the true reward rose at least this share of the way to π*'s


def last_of(arm: str, metric: str) -> Compute:
    return lambda records: records.last(arm, metric)


def first_of(arm: str, metric: str) -> Compute:
    return lambda records: records.first(arm, metric)


def number(records: Records, compute: Compute, text: str = "{}", shown: Callable[[float], str] | None = None):
    value = compute(records)
    return None if value is None else Computed(text, value, compute, shown=shown(value) if shown else "")


def percent(value: float) -> str:
    return f"{value:.1%}" if abs(value) < 0.1 else f"{value:.0%}"


def headline(records: Records) -> dict[str, float | None]:
    return {"PPO true reward (end)": records.last("PPO", "true_reward"), "PPO KL (end)": records.last("PPO", "kl"),
            "DPO true reward (end)": records.last("DPO", "true_reward"),
            "reward model held-out accuracy": records.last(RM, "heldout/accuracy")}


def ended(records: Records, arm: str) -> Sentence | None:
    """'PPO: E[r] 0.48 at KL 6.3 nats (step 239)'."""
    step = records.last_step(arm, "kl")
    reward, kl = number(records, last_of(arm, "true_reward")), number(records, last_of(arm, "kl"))
    if step is None or reward is None or kl is None:
        return None
    return say(f"{arm} E[r] {{}} at KL {{}} nats (step {step})", reward, kl)


def takeaway(records: Records, beta: float) -> Sentence | None:
    parts = [s for s in (ended(records, arm) for arm in POLICIES) if s is not None]
    if not parts:
        return None
    optimum = [number(records, first_of("π*", m)) for m in ("optimum/true_reward", "optimum/kl")]
    joined = join(*parts)
    if None in optimum:
        return Sentence(f"β={beta:g}: {joined.text}", joined.claims)
    tail = say("π* ∝ π_ref·exp(r/β): E[r] {} at KL {}", *optimum)
    return Sentence(f"β={beta:g}: {joined.text} — {tail.text}", joined.claims + tail.claims)


def reward_model(records: Records) -> Sentence | None:
    step = records.last_step(RM, "heldout/accuracy")
    loss = number(records, last_of(RM, "loss"))
    accuracy = number(records, last_of(RM, "heldout/accuracy"), shown=percent)
    ece = number(records, last_of(RM, "heldout/ece"))
    if step is None or None in (loss, accuracy, ece):
        return None
    text = (f"Reward model (step {step}; Bradley–Terry NLL {{}} on its pairs): it orders {{}} of held-out pairs as the "
            "true reward does" + (" — no better than chance (50%)" if accuracy.value <= CHANCE_ACCURACY else "")
            + ", with calibration error {}")
    if accuracy.value <= CHANCE_ACCURACY:  # re-checked: the words "no better than chance" hold only there
        accuracy = Computed("{}", accuracy.value, at_most_chance, shown=accuracy.shown)
    claims = [loss, accuracy, ece]
    aims = [number(records, first_of("π*", m)) for m in ("rm_optimum/true_reward", "rm_optimum/kl")]
    if None not in aims:
        text += "; the optimum of the objective PPO maximises with it, π_ref·exp(r_φ/β), earns E[r] {} at KL {}"
        claims += aims
    return say(text + ".", *claims)


def at_most_chance(records: Records) -> float | None:
    """records -> the reward model's held-out accuracy while it is at or below chance, else None."""
    accuracy = records.last(RM, "heldout/accuracy")
    return accuracy if accuracy is not None and accuracy <= CHANCE_ACCURACY else None


def gain_lost(arm: str, peak_step: int) -> Compute:
    """records -> the share of the true reward's rise (first logged to peak) lost by the last step."""
    def compute(records: Records) -> float | None:
        first, peak, last = (records.first(arm, "true_reward"), records.at(arm, "true_reward", peak_step),
                             records.last(arm, "true_reward"))
        return None if None in (first, peak, last) or peak <= first else (peak - last) / (peak - first)
    return compute


def rise_share(arm: str, peak_step: int) -> Compute:
    """records -> the true reward's rise to the peak as a share of π*'s gain (E_π*[r] − the first
    logged value), while it is at least MIN_RISE: a rise worth calling a peak, not a blip."""
    def compute(records: Records) -> float | None:
        first, peak = records.first(arm, "true_reward"), records.at(arm, "true_reward", peak_step)
        optimum = records.first("π*", "optimum/true_reward")
        if None in (first, peak, optimum) or optimum <= first:
            return None
        share = (peak - first) / (optimum - first)
        return share if share >= MIN_RISE else None
    return compute


def rm_change(arm: str, peak_step: int) -> Compute:
    def compute(records: Records) -> float | None:
        at_peak, last = records.at(arm, "rm_reward", peak_step), records.last(arm, "rm_reward")
        return None if at_peak is None or last is None else last - at_peak
    return compute


def over_optimization(records: Records, arm: str) -> Sentence | None:
    """Only for an arm that optimizes the reward model (PPO; DPO never sees it), and only where the
    run shows it: the true reward rose at least MIN_RISE of the way to π*'s, peaked before the end,
    gave back at least GAVE_BACK of its rise, while the reward model's reward went up."""
    true = records.series(arm, "true_reward")
    if arm not in OPTIMIZES_RM or len(true) < 3:
        return None
    first_step, peak_step, last_step = int(true.index[0]), int(true.idxmax()), int(true.index[-1])
    lost, rose = gain_lost(arm, peak_step)(records), rm_change(arm, peak_step)(records)
    share = rise_share(arm, peak_step)(records)
    if peak_step == last_step or share is None or lost is None or lost < GAVE_BACK or rose is None or rose <= 0:
        return None
    losing = "losing {} of its gain" if lost <= 1 else "losing all its gain and more ({} of it)"
    return say(f"{arm}: from step {first_step} the true reward rose {{}} of the way to π*'s, {{}}, then {{}}, {losing}, "
               f"while the reward model's reward rose {{}} from step {peak_step} — reward over-optimization "
               "(Gao et al. 2022).",
               Computed("{}", share, rise_share(arm, peak_step), shown=percent(share)),
               Peak(arm, "true_reward", peak_step, float(true.max())),
               Final(arm, "true_reward", last_step, float(true.iloc[-1])),
               Computed("{}", lost, gain_lost(arm, peak_step), shown=percent(lost)),
               Computed("{}", rose, rm_change(arm, peak_step)))


def proxy_and_true(records: Records, arm: str) -> Sentence | None:
    """Otherwise: where the true and the reward model's reward ended."""
    step = records.last_step(arm, "rm_reward")
    true, proxy = number(records, last_of(arm, "true_reward")), number(records, last_of(arm, "rm_reward"))
    if step is None or true is None or proxy is None:
        return None
    return say(f"{arm} at step {step}: true reward {{}}, the reward model's {{}}.", true, proxy)


def mean_of(arm: str, metric: str) -> Compute:
    def compute(records: Records) -> float | None:
        values = records.values(arm, metric)
        return float(values.mean()) if len(values) else None
    return compute


def clipping(records: Records, clip: float) -> Sentence | None:
    share = number(records, mean_of("PPO", "ppo/clipfrac"), shown=percent)
    peak = number(records, lambda r: float(r.values("PPO", "ppo/clipfrac").max())
                  if len(r.values("PPO", "ppo/clipfrac")) else None, shown=percent)
    if share is None or peak is None:
        return None
    return say(f"PPO (group baseline: each sample's reward minus the mean of its prompt's others) clipped {{}} of "
               f"its samples on average, at most {{}} in a log window, at ε={clip:g}.", share, peak)


def optimum_distance(records: Records) -> Sentence | None:
    parts = [say(f"{arm} {{}}", c) for arm in POLICIES
             if (c := number(records, last_of(arm, "tv_to_rm_optimum"))) is not None]
    if not parts:
        return None
    joined = join(*parts, sep=", ")
    return Sentence(f"Total variation to the reward model's optimum π_ref·exp(r_φ/β) at the last step: {joined.text}.",
                    joined.claims)


def explanation(records: Records, beta: float, clip: float) -> Explanation:
    diverged = [say("{} {}.", arm, DivergedAt(arm, step)) for arm in (RM, *POLICIES)
                if (step := records.diverged_at(arm)) is not None]
    first = takeaway(records, beta) or reward_model(records) or (diverged.pop(0) if diverged else None)
    if first is None:
        return Explanation(waiting="Fitting the reward model: its first records arrive in a moment.")
    rewards = [over_optimization(records, arm) or proxy_and_true(records, arm) for arm in POLICIES]
    details = diverged + [s for s in (reward_model(records) if first.text.startswith("β=") else None, *rewards,
                                      clipping(records, clip), optimum_distance(records)) if s is not None]
    return Explanation(first, tuple(details[:5]))
