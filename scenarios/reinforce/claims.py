"""REINFORCE, said: where each corridor arm ended against the solved optimum, how many episodes it
took, what the baseline did to the gradient's variance, and how close the bandit's policies came
to their exact optimum. Every number is re-read from the records."""
import statistics

from scenarios.claims import Claim, Computed, Lower
from scenarios.explanation import Explanation, Sentence, join, say
from scenarios.records import Records
from scenarios.reinforce.figures import (BANDIT_ARMS, BANDIT_BASE, BANDIT_LINEAR, BANDIT_PLAIN, CORRIDOR_ARMS,
                                         CORRIDOR_BASE, CORRIDOR_FAST, EXACT, limits)

P_TOLERANCE = 0.1   # |mean P(right) − p*| over the last quarter, for "converged"
V_TOLERANCE = 0.75  # v* − mean v(S) over the last quarter (steps, ~6% of v*), for "converged"
REACH = 0.5         # v* − a log window's mean v(S), for "reached"


def last_quarter(records: Records, arm: str, metric: str, episodes: int) -> float | None:
    """Mean of the logged values of `metric` from episode 3/4·episodes on (window means: the policies that played)."""
    series = records.series(arm, metric)
    tail = series[series.index >= (3 * episodes) // 4]
    return float(tail.mean()) if len(tail) else None


def reached(records: Records, arm: str, v_star: float) -> int:
    """The first logged episode whose window's mean exact v(S) is within REACH of v*; −1: never."""
    series = records.series(arm, "window/v_start")
    hits = series[series >= v_star - REACH]
    return int(hits.index[0]) if len(hits) else -1


def variance_ratios(records: Records, arm: str) -> list[float]:
    plain, based = records.series(arm, "grad_var/plain"), records.series(arm, "grad_var/baseline")
    both = [(a, b) for a, b in zip(plain.to_numpy(), based.reindex(plain.index).to_numpy()) if b > 0]
    return [a / b for a, b in both]


def converged(records: Records, arm: str, episodes: int) -> Sentence | None:
    p_star, v_star = limits(records)
    p_end, v_end = last_quarter(records, arm, "window/p_right", episodes), last_quarter(records, arm, "window/v_start", episodes)
    if p_star is None or p_end is None or records.last_step(arm, "p_right") != episodes - 1:
        return None
    inside = abs(p_end - p_star) <= P_TOLERANCE and v_end >= v_star - V_TOLERANCE
    parts: list[Claim] = [
        Computed("mean P(right) {}", p_end, lambda r: last_quarter(r, arm, "window/p_right", episodes), shown=f"{p_end:.3f}"),
        Computed("mean v(S) {}", v_end, lambda r: last_quarter(r, arm, "window/v_start", episodes), shown=f"{v_end:.2f}")]
    verdict = "within" if inside else "outside"
    return say("{}: {} and {} over its last quarter, " + verdict + f" the tolerance (P(right) within {P_TOLERANCE} "
               f"of the optimum's, v(S) at most {V_TOLERANCE} below it)", arm, *parts)


def optimum_sentence(records: Records) -> Sentence | None:
    p_star, v_star = limits(records)
    if p_star is None:
        return None
    return say("Solved by the Bellman system: the best P(right) is {} and its v(S) {}", Computed(
        "{}", p_star, lambda r: limits(r)[0], shown=f"{p_star:.4f}"), Computed("{}", v_star, lambda r: limits(r)[1],
                                                                              shown=f"{v_star:.3f}"))


def reached_sentence(records: Records) -> Sentence | None:
    _, v_star = limits(records)
    if v_star is None:
        return None
    parts = []
    for arm in CORRIDOR_ARMS:
        if records.has("window/v_start", arm):
            step = reached(records, arm, v_star)
            parts.append(Computed(f"{{}} for {arm}", step, lambda r, a=arm: reached(r, a, limits(r)[1]),
                                  shown="never" if step < 0 else f"episode {step}"))
    if not parts:
        return None
    return say(f"First log window whose mean exact v(S) came within {REACH} of the optimum: " +
               ", ".join(["{}"] * len(parts)), *parts)


def matched_sentence(records: Records, episodes: int) -> Sentence | None:
    """The baseline arm against the arm without one at the same policy step size: whose last quarter sat closer to v*."""
    based, bare = (last_quarter(records, CORRIDOR_BASE, "window/v_start", episodes),
                   last_quarter(records, CORRIDOR_FAST, "window/v_start", episodes))
    if based is None or bare is None or based == bare:
        return None
    words = "closer to" if based > bare else "further from"
    return say("At the same policy step size, the learned baseline's last quarter sat " + words + " the optimum: mean v(S) {} with "
               "it, {} without", *(Computed("{}", v, lambda r, a=arm: last_quarter(r, a, "window/v_start", episodes),
                                             shown=f"{v:.2f}") for v, arm in ((based, CORRIDOR_BASE), (bare, CORRIDOR_FAST))))


def variance_sentence(records: Records, arm: str, points: str) -> Sentence | None:
    ratios = variance_ratios(records, arm)
    if not ratios:
        return None
    lower = sum(r > 1 for r in ratios)
    median = statistics.median(ratios)
    return say("At the {} arm's own parameters, the learned baseline gave the lower per-sample gradient variance at {} "
               "of {} " + points + " (median variance without ÷ with: {})", arm,
               Computed("{}", lower, lambda r: sum(x > 1 for x in variance_ratios(r, arm)), shown=str(lower)),
               Computed("{}", len(ratios), lambda r: len(variance_ratios(r, arm)), shown=str(len(ratios))),
               Computed("{}", median, lambda r: statistics.median(variance_ratios(r, arm)) if variance_ratios(r, arm) else None,
                        shown=f"{median:.2f}"))


def gap_closed(records: Records, arm: str) -> float | None:
    best, uniform, end = (records.first(EXACT, "bandit/optimum"), records.first(EXACT, "bandit/uniform"),
                          records.last(arm, "expected_reward"))
    return None if None in (best, uniform, end) or best == uniform else (end - uniform) / (best - uniform)


def bandit_sentence(records: Records, arm: str) -> Sentence | None:
    closed = gap_closed(records, arm)
    if closed is None:
        return None
    end = records.last(arm, "expected_reward")
    return say("{} ended at expected reward {}, {} of the way from the uniform policy to the optimum", arm,
               Computed("{}", end, lambda r: r.last(arm, "expected_reward"), shown=f"{end:.3f}"),
               Computed("{}", closed, lambda r: gap_closed(r, arm), shown=f"{100 * closed:.0f}%"))


def linear_sentence(records: Records) -> Sentence | None:
    if gap_closed(records, BANDIT_LINEAR) is None or gap_closed(records, BANDIT_BASE) is None:
        return None
    a, b = records.last(BANDIT_LINEAR, "expected_reward"), records.last(BANDIT_BASE, "expected_reward")
    if a == b:
        return None
    claim = (Lower(BANDIT_LINEAR, BANDIT_BASE, "expected_reward", words="below") if a < b else
             Lower(BANDIT_BASE, BANDIT_LINEAR, "expected_reward", words="above"))
    return say("The linear softmax ends {} the MLP with the same estimator and baseline", claim)


def explanation(records: Records, episodes: int) -> Explanation:
    ends = [s for arm in CORRIDOR_ARMS if (s := converged(records, arm, episodes)) is not None]
    head = optimum_sentence(records)
    if head is None or not ends:
        return Explanation(waiting="Run to solve the corridor exactly and train REINFORCE with and without a baseline.")
    details = [reached_sentence(records), matched_sentence(records, episodes), variance_sentence(records, CORRIDOR_BASE, "logged points"),
               *(bandit_sentence(records, arm) for arm in BANDIT_ARMS), linear_sentence(records),
               variance_sentence(records, BANDIT_BASE, "logged updates")]
    return Explanation(join(head, ends[0]), tuple(s for s in [*ends[1:], *details] if s is not None))


def summary(records: Records, episodes: int) -> dict:
    p_star, v_star = limits(records)
    end = {arm: {"p_right": last_quarter(records, arm, "window/p_right", episodes),
                 "v_start": last_quarter(records, arm, "window/v_start", episodes),
                 "reached": reached(records, arm, v_star) if v_star is not None else None} for arm in CORRIDOR_ARMS}
    ratios = {arm: statistics.median(r) if (r := variance_ratios(records, arm)) else None for arm in (CORRIDOR_BASE, BANDIT_BASE)}
    bandit = {arm: records.last(arm, "expected_reward") for arm in BANDIT_ARMS}
    return {"headline": {"optimal P(right)": p_star, "optimal v(S)": v_star,
                         **{f"last-quarter P(right), {arm}": end[arm]["p_right"] for arm in CORRIDOR_ARMS},
                         f"median variance ratio, {CORRIDOR_BASE}": ratios[CORRIDOR_BASE],
                         f"expected reward, {BANDIT_PLAIN}": bandit[BANDIT_PLAIN],
                         "bandit optimum": records.first(EXACT, "bandit/optimum")},
            "p_star": p_star, "v_star": v_star, "corridor": end, "variance_ratio": ratios, "bandit": bandit,
            "bandit_optimum": records.first(EXACT, "bandit/optimum"), "bandit_uniform": records.first(EXACT, "bandit/uniform")}
