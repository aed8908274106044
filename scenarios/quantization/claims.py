"""Quantization error, said: the claims of 'what to look for' and the summary's numbers, read from Records.

In a PTQ or QAT arm a test metric's step is the bit width. "Within 1 point of float" is
stated with its threshold (`WITHIN`), so the words carry the number they are checked by.
"""
import math
from collections.abc import Callable

import numpy as np

from scenarios.claims import Computed
from scenarios.explanation import Explanation, Sentence, say, trajectory
from scenarios.quantization.figures import per_tensor_half_step
from scenarios.records import Records

WITHIN = 0.01  # "within 1 point of float": test accuracy at most this far below the float model's
ACC = "test/accuracy"
FLOAT_ACTIVATIONS = " · float activations"  # a PTQ arm's scheme again at its widest bits, inputs left in float
Compute = Callable[[Records], float | None]


def pct(value: float) -> str:
    return f"{value:.1%}"


def float_accuracy(records: Records) -> float | None:
    return records.last("float", ACC)


def fewest_bits(arm: str) -> Compute:
    """records -> the fewest bits from which every recorded width is within 1 point of float (0: none is)."""
    def compute(records: Records) -> float | None:
        reference, accuracy = float_accuracy(records), records.by_step(arm, ACC)
        if reference is None or not accuracy:
            return None
        within = [b for b in accuracy if all(accuracy[k] >= reference - WITHIN for k in accuracy if k >= b)]
        return float(min(within, default=0))
    return compute


def accuracy_at(arm: str, bits: int) -> Compute:
    return lambda records: records.at(arm, ACC, bits)


def channel_span(records: Records) -> float | None:
    absmax = records.values("float", "channel_absmax/layer_01")
    return float(absmax.max() / absmax.min()) if len(absmax) and absmax.min() > 0 else None


def channel_count(records: Records) -> float | None:
    return float(len(records.values("float", "channel_absmax/layer_01"))) or None


def zeroed(bits: int) -> Compute:
    """records -> layer 1's channels whose max|w| is below the symmetric per-tensor Δ/2 at `bits` (they round to 0)."""
    def compute(records: Records) -> float | None:
        absmax = records.values("float", "channel_absmax/layer_01")
        return float((absmax < per_tensor_half_step(absmax, bits)).sum()) if len(absmax) else None
    return compute


def sqnr_bits(records: Records, arm: str) -> dict[int, float]:
    """Layer 2's weight SQNR at the widths ≥ 4 bits, where most weights span many bins."""
    return {b: v for b, v in records.by_step(arm, "weight_sqnr_db/layer_02").items() if b >= 4}


def sqnr_slope(arm: str, theory: bool = False) -> Compute:
    """records -> the fitted dB per bit of layer 2's SQNR over bits ≥ 4, or Δ²/12's on the same bits:
    Δ ∝ 1/(2^b − 1), so SQNR = 20·log10(2^b − 1) + c, slope → 6.02 dB/bit."""
    def compute(records: Records) -> float | None:
        sqnr = sqnr_bits(records, arm)
        if len(sqnr) < 2:
            return None
        bits = np.array(list(sqnr), dtype=float)
        values = 20 * np.log10(2 ** bits - 1) if theory else list(sqnr.values())
        return float(np.polyfit(bits, values, 1)[0])
    return compute


def mse_over_theory(arm: str, bits: int = 8) -> Compute:
    def compute(records: Records) -> float | None:
        mse, theory = (records.at(arm, f"{m}/layer_02", bits) for m in ("weight_mse", "weight_mse_theory"))
        return mse / theory if mse is not None and theory else None
    return compute


def recovered(qat_arm: str, ptq_arm: str, bits: int) -> Compute:
    """records -> the share of PTQ's accuracy loss that QAT wins back at `bits` (None: PTQ lost < 0.5 point)."""
    def compute(records: Records) -> float | None:
        reference, qat, ptq = float_accuracy(records), records.at(qat_arm, ACC, bits), records.at(ptq_arm, ACC, bits)
        if None in (reference, qat, ptq) or reference - ptq <= 0.005:
            return None
        return (qat - ptq) / (reference - ptq)
    return compute


def ste_extreme(arm: str, kind: str, pick) -> Compute:
    """records -> the min or max of every recorded `kind/…` (ste_pass, ste_gap) of the QAT arm."""
    def compute(records: Records) -> float | None:
        values = [v for m in records.metrics(arm) if m.startswith(kind + "/") for v in records.values(arm, m)]
        return float(pick(values)) if values else None
    return compute


def claim(text: str, compute: Compute, records: Records, shown: Callable[[float], str] | None = None) -> Computed | None:
    value = compute(records)
    return None if value is None else Computed(text, value, compute, shown=shown(value) if shown else "")


def sentence(template: str, parts: list) -> Sentence | None:
    """`template` with its {} filled by the parts that exist (joined by ', '); None when none does."""
    parts = [part for part in parts if part is not None]
    return say(template.format(", ".join(["{}"] * len(parts))), *parts) if parts else None


# --- the explanation ------------------------------------------------------------------------
def explanation(records: Records, ptq: list[str], qat: str | None, qat_ptq: str, qat_bits: list[int],
                inspect_bits: int, n_classes: int, weights_only: str | None = None,
                activation_bits: str = "float") -> Explanation:
    reference = claim("{}", float_accuracy, records, pct)
    if reference is None:
        if not records.has("loss", "float"):
            return Explanation(waiting="Run to train the float model and quantize it at each bit width.")
        return Explanation(say("The float model's training loss {}", trajectory(
            records, "float", chance=math.log(n_classes), chance_name=f"ln {n_classes}")))
    arms = [arm for arm in ptq + ([qat] if qat else []) if records.has(ACC, arm)]
    fewest = [c for arm in arms if (c := claim(f"{arm} {{}}", fewest_bits(arm), records,
                                               lambda b: f"{int(b)} bits" if b else "— none of the widths run")) is not None]
    if fewest:
        takeaway = say("Fewest weight bits within 1 point of the float model's {} test accuracy: "
                       + ", ".join(["{}"] * len(fewest)), reference, *fewest)
    else:
        takeaway = say(f"The float model reaches {{}} test accuracy (chance {1 / n_classes:.0%})", reference)
    recorded = sorted({b for arm in ptq for b in records.by_step(arm, ACC)})
    bits = inspect_bits if inspect_bits in recorded else (recorded[0] if recorded else None)
    details = [
        sentence(f"At {bits} weight bits test accuracy: {{}} (chance {1 / n_classes:.0%})",
                 [claim(f"{arm} {{}}", accuracy_at(arm, bits), records, pct) for arm in ptq]) if bits else None,
        activations(records, weights_only, activation_bits) if weights_only else None,
        channels(records, inspect_bits),
        sqnr(records, ptq),
        qat_sentence(records, qat, qat_ptq, qat_bits) if qat else None,
        straight_through(records, qat) if qat else None,
    ]
    return Explanation(takeaway, tuple(d for d in details if d is not None))


def activation_cost(arm: str, bits: int) -> Compute:
    """records -> accuracy with float activations minus with quantized ones, same weights and bits,
    while it is at least WITHIN (then the quantized activations cost a point or more)."""
    def compute(records: Records) -> float | None:
        alone, both = records.at(arm + FLOAT_ACTIVATIONS, ACC, bits), records.at(arm, ACC, bits)
        return None if None in (alone, both) or alone - both < WITHIN else alone - both
    return compute


def activations(records: Records, arm: str, activation_bits: str) -> Sentence | None:
    """At the widest bits: the PTQ arm with its inputs quantized per tensor, and the same weights with
    float inputs; where that costs a point or more, said as the activations' cost."""
    series = records.series(arm + FLOAT_ACTIVATIONS, ACC)
    if series.empty:
        return None
    bits = int(series.index[-1])
    act_bits = bits if activation_bits == "same as weights" else int(activation_bits)
    both, alone = claim("{}", accuracy_at(arm, bits), records, pct), claim("{}", accuracy_at(arm + FLOAT_ACTIVATIONS, bits),
                                                                          records, pct)
    cost = claim("{}", activation_cost(arm, bits), records, lambda v: f"{100 * v:.1f}")
    if both is None or alone is None:
        return None
    text = (f"At {bits} weight bits, {arm} scores {{}} with each layer's input quantized per tensor at {act_bits} bits "
            "and {} with float inputs")
    if cost is None:
        return say(text + ".", both, alone)
    return say(text + ": the per-tensor activations, not the weights, cost {} points (activation_bits = float "
               "shows the weights alone).", both, alone, cost)


def channels(records: Records, bits: int) -> Sentence | None:
    span, count, zero = (claim(text, compute, records, shown) for text, compute, shown in (
        ("Layer 1's per-channel max|w| spans {}×", channel_span, lambda v: f"{v:.0f}"),
        ("{}", channel_count, lambda v: str(int(v))), ("{}", zeroed(bits), lambda v: str(int(v)))))
    if span is None or zero is None:
        return None
    then = ": those round to 0 entirely" if zero.value > 0 else ""
    return say(f"{{}}; at {bits} bits the symmetric per-tensor Δ/2 exceeds the largest weight of {{}} of its {{}} "
               f"channels{then}", span, zero, count)


def sqnr(records: Records, ptq: list[str]) -> Sentence | None:
    arm = "PTQ sym · per-channel" if "PTQ sym · per-channel" in ptq else (ptq[0] if ptq else None)
    measured = claim("{}", sqnr_slope(arm), records, lambda v: f"{v:.2f}") if arm else None
    if measured is None:
        return None
    theory = claim("{}", sqnr_slope(arm, theory=True), records, lambda v: f"{v:.2f}")
    ratio = claim("; at 8 bits its MSE is {}× Δ²/12", mse_over_theory(arm), records, lambda v: f"{v:.2f}")
    verb = "rises" if measured.value > 0 else "changes by"
    return say(f"Weight SQNR of layer 2 ({arm}) {verb} {{}} dB per bit over the widths ≥ 4 bits, where Δ²/12 predicts "
               "{}" + ("{}" if ratio else ""), measured, theory, *([ratio] if ratio else []))


def qat_sentence(records: Records, qat: str, ptq: str, qat_bits: list[int]) -> Sentence | None:
    """Per QAT width: its accuracy against PTQ's of the same scheme and the share of PTQ's loss it wins
    back — or that it diverged (its `diverged` row sits at step = bits)."""
    words, parts = [], []
    for bits in qat_bits:
        accuracy = claim("{}", accuracy_at(qat, bits), records, pct)
        if accuracy is not None:
            against = claim(" vs PTQ {}", accuracy_at(ptq, bits), records, pct)
            share = claim(", recovering {} of what PTQ lost", recovered(qat, ptq, bits), records, lambda v: f"{v:.0%}")
            extra = [c for c in (against, share) if c is not None]
            words.append(f"at {bits} bits {{}}" + "{}" * len(extra))
            parts += [accuracy, *extra]
        elif bits in records.series(qat, "diverged").index:
            words.append(f"at {bits} bits {{}}")
            parts.append(Computed("diverged", bits, lambda r, b=bits: float(b) if b in r.series(qat, "diverged").index
                                  else None))
    return say(f"{qat}: " + "; ".join(words), *parts) if parts else None


def straight_through(records: Records, qat: str) -> Sentence | None:
    passed = claim("{}", ste_extreme(qat, "ste_pass", min), records, pct)
    gap = claim("{}", ste_extreme(qat, "ste_gap", max), records)
    if passed is None or gap is None:
        return None
    same = ("∂L/∂w equals mask·∂L/∂ŵ exactly (largest difference {})" if gap.value == 0 else  # held by the gap claim
            "∂L/∂w differs from mask·∂L/∂ŵ by at most {}")
    return say("QAT's straight-through gradient: the clamp mask passed at least {} of every layer's weights at every "
               "logged step, and " + same, passed, gap)


# --- the summary ----------------------------------------------------------------------------
def summary(records: Records, arms: list[str], ptq: list[str], qat: str, qat_ptq: str, n_classes: int) -> dict:
    """What the runs table and summary.json carry (no key depends on a view field)."""
    absmax = records.values("float", "channel_absmax/layer_01")
    arm_info = {arm: {"accuracy": {str(k): v for k, v in records.by_step(arm, ACC).items()},
                      "fewest_bits_within_1pt": int(b) if (b := fewest_bits(arm)(records)) else None} for arm in arms}
    qat_info = {str(b): {"qat": acc, "ptq": records.at(qat_ptq, ACC, b), "recovered": recovered(qat, qat_ptq, b)(records)}
                for b, acc in records.by_step(qat, ACC).items()}
    loss = records.series("float", "loss")
    sqnr_arm = "PTQ sym · per-channel" if "PTQ sym · per-channel" in ptq else ptq[0]
    headline = {"float accuracy": float_accuracy(records),
                "accuracy at 4 bits (sym · per-tensor)": records.at("PTQ sym · per-tensor", ACC, 4),
                "accuracy at 4 bits (sym · per-channel)": records.at("PTQ sym · per-channel", ACC, 4),
                "QAT accuracy at 2 bits": records.at(qat, ACC, 2)}
    return {"headline": headline, "float_accuracy": float_accuracy(records), "chance_accuracy": 1 / n_classes,
            "arms": arm_info, "qat": qat_info,
            "float_train_step": int(loss.index[-1]) if len(loss) else None,
            "float_train_loss": float(loss.iloc[-1]) if len(loss) else None,
            "layer1_channel_span": channel_span(records), "layer1_channels": len(absmax),
            "layer1_zeroed_per_tensor": {str(b): int(n) for b in range(2, 9) if (n := zeroed(b)(records)) is not None},
            "sqnr_arm": sqnr_arm, "sqnr_db_per_bit": sqnr_slope(sqnr_arm)(records),
            "sqnr_theory_db_per_bit": sqnr_slope(sqnr_arm, theory=True)(records),
            "mse_over_theory_8bit": mse_over_theory(sqnr_arm)(records)}
