"""RLVR with GRPO, said: held-out accuracy from the warm start on, the groups with equal rewards and
their (zero) gradient, the std's per-prompt weight against 1/√(p(1 − p)), the length of wrong answers
in each arm, and the comparison with the rlhf-ppo and dpo-beta pages. Every number is re-read from
the records when checked, so each sentence holds for any config and any partial frame."""
import math
from collections.abc import Callable

from scenarios.claims import Computed
from scenarios.explanation import Explanation, Sentence, join, say
from scenarios.records import Records
from scenarios.rlvr_grpo.figures import DR, GRPO, POLICIES, WARM, chance, places, weights, where

Compute = Callable[[Records], float | None]


def percent(value: float) -> str:
    return f"{value:.1%}" if abs(value) < 0.1 else f"{value:.0%}"


def number(records: Records, compute: Compute, text: str = "{}", shown: Callable[[float], str] | None = None):
    value = compute(records)
    return None if value is None else Computed(text, value, compute, shown=shown(value) if shown else "")


def headline(records: Records) -> dict[str, float | None]:
    return {**{f"{arm} held-out accuracy (end)": records.last(arm, "heldout/accuracy") for arm in POLICIES},
            **{f"{arm} wrong-answer length change": wrong_length_change(arm)(records) for arm in POLICIES},
            "warm start held-out accuracy": records.last(WARM, "heldout/accuracy")}


# --- accuracy -------------------------------------------------------------------------------------
def accuracy(records: Records, bits: int) -> Sentence | None:
    """'Held-out accuracy of one sampled answer (chance 14%): warm start 14%; GRPO 94% at step 399 (greedy 94%); …'."""
    parts = []
    for arm in POLICIES:
        step = records.last_step(arm, "heldout/accuracy")
        sampled = number(records, lambda r, a=arm: r.last(a, "heldout/accuracy"), shown=percent)
        greedy = number(records, lambda r, a=arm: r.last(a, "heldout/greedy_accuracy"), shown=percent)
        if step is not None and sampled is not None and greedy is not None:
            parts.append(say(f"{arm} {{}} at step {step} (greedy {{}})", sampled, greedy))
    if not parts:
        return None
    warm = number(records, lambda r: r.last(WARM, "heldout/accuracy"), shown=percent)
    start = say("warm start {}", warm) if warm is not None else None
    joined = join(*([start] if start else []), *parts, sep="; ")
    return Sentence(f"Held-out accuracy of one sampled answer (chance {chance(bits):.0%}): {joined.text}.", joined.claims)


# --- the groups with equal rewards ----------------------------------------------------------------------
def equal_groups_count(records: Records) -> float | None:
    values = records.values(GRPO, "equal_groups/count")
    return float(values.sum()) if len(values) else None


def equal_groups_norm(records: Records) -> float | None:
    values = records.values(GRPO, "equal_groups/max_grad_norm")
    return float(values.max()) if len(values) else None


def zero_gradient(records: Records) -> Sentence | None:
    count, norm = number(records, equal_groups_count, shown=lambda v: f"{v:.0f}"), number(records, equal_groups_norm)
    if count is None or norm is None or count.value == 0:
        return None
    exact = "exactly zero: A = 0 for every response" if norm.value == 0 else "not zero"
    return say(f"GRPO: {{}} of the groups measured had all G rewards equal; the largest gradient norm of their "
               f"policy-gradient term was {{}} — {exact}, so such a group contributes no gradient (the KL term aside).",
               count, norm)


def saturated(records: Records) -> Sentence | None:
    parts = []
    for arm in POLICIES:
        step = records.last_step(arm, "zero_advantage_groups")
        share = number(records, lambda r, a=arm: r.last(a, "zero_advantage_groups"), shown=percent)
        wrong = number(records, lambda r, a=arm: r.last(a, "all_wrong_groups"), shown=percent)
        if step is not None and share is not None and wrong is not None:
            parts.append(say(f"{arm} {{}} at step {step} ({{}} all wrong)", share, wrong))
    if not parts:
        return None
    joined = join(*parts, sep="; ")
    return Sentence(f"Groups whose G rewards were all equal, so no signal: {joined.text}.", joined.claims)


# --- the std's weight -----------------------------------------------------------------------------------
def weight_error(records: Records) -> float | None:
    """The largest |measured ratio · √(p(1 − p)) − 1| over the measured groups."""
    points = weights(records)
    if not points:
        return None
    return max(abs(std / plain * math.sqrt(p * (1 - p)) - 1) for _, p, std, plain in points)


def weight(records: Records) -> Sentence | None:
    error = number(records, weight_error)
    if error is None:
        return None
    n = number(records, lambda r: float(len(weights(r))), shown=lambda v: f"{v:.0f}")
    low = number(records, lambda r: min(p for _, p, _, _ in weights(r)), shown=lambda v: f"{v:.3g}")
    high = number(records, lambda r: max(p for _, p, _, _ in weights(r)), shown=lambda v: f"{v:.3g}")
    fits = "matches" if error.value < 1e-5 else "misses"
    return say(f"The std's weight on a prompt, measured as the ratio of its group's gradient norms with and without "
               f"it over {{}} groups (success rates p from {{}} to {{}}), {fits} 1/√(p(1 − p)) to a largest relative "
               "error of {}: it is smallest (2) at p = ½ and grows without bound toward p = 0 or 1.",
               n, low, high, error)


# --- the length of wrong answers ------------------------------------------------------------------------
def late_mean(arm: str, metric: str) -> Compute:
    """The mean of `metric` over the last third of its logged windows (at least one)."""
    def compute(records: Records) -> float | None:
        values = records.values(arm, metric)
        return float(values[-max(1, len(values) // 3):].mean()) if len(values) else None
    return compute


def wrong_length_change(arm: str) -> Compute:
    def compute(records: Records) -> float | None:
        first, late = records.first(arm, "length_wrong"), late_mean(arm, "length_wrong")(records)
        return None if first is None or late is None or len(records.values(arm, "length_wrong")) < 2 else late - first
    return compute


def length(records: Records, arm: str, note: str) -> Sentence | None:
    change = number(records, wrong_length_change(arm), shown=lambda v: f"{v:+.2f}")
    if change is None:
        return None
    first = number(records, lambda r: r.first(arm, "length_wrong"), shown=lambda v: f"{v:.2f}")
    late = number(records, late_mean(arm, "length_wrong"), shown=lambda v: f"{v:.2f}")
    right = number(records, late_mean(arm, "length_right"), shown=lambda v: f"{v:.2f}")
    grew = "longer" if change.value > 0 else "shorter" if change.value < 0 else "no longer"
    tail = say(", right ones {} there", right) if right is not None else Sentence("")
    return say(f"{arm} ({note}): wrong answers were {{}} tokens in the first window and {{}} over the last third "
               f"of training ({{}}: {grew}){tail.text}.", first, late, change, *tail.claims)


def wrong_minus_right(arm: str) -> Compute:
    def compute(records: Records) -> float | None:
        wrong, right = late_mean(arm, "length_wrong")(records), late_mean(arm, "length_right")(records)
        return None if wrong is None or right is None else wrong - right
    return compute


def length_verdict(grew_more: bool, gap_wider: bool) -> tuple[str, str]:
    """Each measure's own verdict on the 1/|o| bias (under GRPO a wrong answer's tokens are each
    pushed down less the longer it is, so wrong answers may lengthen): the gap between wrong and right
    lengths at the end (wider under GRPO), and the growth of wrong answers (more under GRPO)."""
    return ("wider under GRPO, as the bias predicts" if gap_wider else "not wider under GRPO: no sign of the bias",
            "as the bias predicts" if grew_more else "not as the bias predicts")


def length_contrast(records: Records) -> Sentence | None:
    """The 1/|o| bias in two measures, each with its verdict: over the last third, wrong minus right length
    in each arm, and how much more the wrong answers grew under GRPO than under Dr. GRPO (both arms share
    whatever else moves length)."""
    grpo, dr = number(records, wrong_length_change(GRPO)), number(records, wrong_length_change(DR))
    gaps = [number(records, wrong_minus_right(arm), shown=lambda v: f"{v:+.2f}") for arm in (GRPO, DR)]
    if grpo is None or dr is None or None in gaps:
        return None
    more = number(records, lambda r: wrong_length_change(GRPO)(r) - wrong_length_change(DR)(r),
                  shown=lambda v: f"{abs(v):.2f}")
    grew = ("{} tokens more under GRPO than under Dr. GRPO" if more.value > 0 else
            "{} tokens less under GRPO than under Dr. GRPO" if more.value < 0 else "alike ({} tokens) in both arms")
    grew_more, gap_wider = more.value > 0, gaps[0].value > gaps[1].value
    gap, growth = length_verdict(grew_more, gap_wider)
    overall = ("neither measure shows the bias in this run", "one measure of two shows the bias",
               "both measures show the bias")[grew_more + gap_wider]
    return say("The 1/|o| bias, measured twice. Wrong minus right length over the last third: {} tokens under "
               f"GRPO, {{}} under Dr. GRPO — {gap}. Growth of wrong answers: {grew} — {growth}. So {overall}.",
               *gaps, more)


# --- where the answers sit --------------------------------------------------------------------------------
def modal_place(arm: str) -> Compute:
    """The k after which the arm wrote most of its sampled held-out answers at its last evaluation."""
    def compute(records: Records) -> float | None:
        ks, shares, _ = where(records, arm)
        return None if not ks or None in shares else float(ks[max(range(len(ks)), key=lambda i: shares[i])])
    return compute


def share_at_modal(arm: str) -> Compute:
    def compute(records: Records) -> float | None:
        k = modal_place(arm)(records)
        return None if k is None else records.last(arm, f"answer_at/{k:.0f}")
    return compute


def forced_at_modal(arm: str) -> Compute:
    def compute(records: Records) -> float | None:
        k = modal_place(arm)(records)
        return None if k is None else records.last(arm, f"forced_at/{k:.0f}")
    return compute


def mean_place(arm: str, last: bool) -> Compute:
    """Σ k·share / Σ share over the answered held-out samples, at the arm's first or last evaluation."""
    def compute(records: Records) -> float | None:
        ks = places(records, arm)
        if not ks:
            return None
        pick = records.last if last else records.first
        shares = [pick(arm, f"answer_at/{k}") for k in ks]
        if None in shares or sum(shares) == 0:
            return None
        return sum(k * v for k, v in zip(ks, shares)) / sum(shares)
    return compute


def answer_places(records: Records) -> Sentence | None:
    """Each arm's commonest answer place with its share and its greedy accuracy there, the accuracy right after
    '=', and the mean place at the first and last evaluation: the length sentences' lengths are these places + 2."""
    parts, right_after, moves = [], [], []
    for arm in POLICIES:
        k = number(records, modal_place(arm), shown=lambda v: f"{v:.0f}")
        share = number(records, share_at_modal(arm), shown=percent)
        there = number(records, forced_at_modal(arm), shown=percent)
        at_equals = number(records, lambda r, a=arm: r.last(a, "forced_at/0"), shown=percent)
        start, end = (number(records, mean_place(arm, last), shown=lambda v: f"{v:.2f}") for last in (False, True))
        if None in (k, share, there, at_equals, start, end):
            continue
        tokens = "token" if k.value == 1 else "tokens"
        parts.append(say(f"{arm} wrote {{}} of its sampled answers after {{}} {tokens} (greedy accuracy there {{}})",
                         share, k, there))
        right_after.append(say(f"{{}} under {arm}", at_equals))
        moves.append(say(f"{arm} {{}} → {{}}", start, end))
    if not parts:
        return None
    warm = number(records, lambda r: r.last(WARM, "forced_at/0"), shown=percent)
    warm_part = say(" (warm start {})", warm) if warm is not None else Sentence("")
    body = join(*parts, sep="; ")
    at_equals = join(*right_after, sep=" and ")
    moved = join(*moves, sep=", ")
    return Sentence(f"Where the answers sit, at each arm's last evaluation of held-out prompts: {body.text}. Made to "
                    f"answer right after '=', greedy accuracy is {at_equals.text}{warm_part.text}. Mean tokens before "
                    f"an answer, first evaluation → last: {moved.text}. An answered response's length is that place "
                    "+ 2 (the answer, then EOS), so the lengths above move as the answers do.",
                    body.claims + at_equals.claims + warm_part.claims + moved.claims)


# --- beside rlhf-ppo and dpo-beta ------------------------------------------------------------------------
def beside_ppo(records: Records) -> Sentence | None:
    reward = number(records, late_mean(GRPO, "reward"), shown=percent)
    share = number(records, late_mean(GRPO, "zero_advantage_groups"), shown=percent)
    if reward is None or share is None:
        return None
    return say("Beside rlhf-ppo's PPO (a reward model fitted to preference pairs, then PPO against it): GRPO's reward "
               "is the checker's verdict, so the {} it earned over the last third is true accuracy on its samples, "
               "not a proxy that can be over-optimized; its baseline is the group's mean, with no critic, and {} of "
               "those groups had no spread to learn from.", reward, share)


def beside_dpo(records: Records) -> Sentence | None:
    samples = number(records, lambda r: r.last(DR, "samples"), shown=lambda v: f"{v:,.0f}")
    kl = number(records, lambda r: r.last(DR, "kl"))
    if samples is None or kl is None:
        return None
    return say("Beside dpo-beta's DPO (fixed preference pairs, no sampling): Dr. GRPO learned only from its own {} "
               "sampled responses and the checker, ending {} nats per token from π_ref.", samples, kl)


def explanation(records: Records, config) -> Explanation:
    first = accuracy(records, config.bits)
    if first is None:
        return Explanation(waiting="Warm start: teaching the format with random answers; GRPO's first records follow.")
    details = [length(records, GRPO, "each answer's loss ÷ its length |o|, advantages ÷ the group's std"),
               length(records, DR, "neither division"), length_contrast(records), answer_places(records),
               zero_gradient(records), weight(records), saturated(records), beside_ppo(records), beside_dpo(records)]
    return Explanation(first, tuple(s for s in details if s is not None))
