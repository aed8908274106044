"""Memory tricks, said: the bytes checkpointing saves, the accumulated gradients' errors, and a
resumed run against the uninterrupted one — its losses step by step, and its state (weights,
Adam's moments) after the last update, which no loss shows: a loss is taken before its step's
update. Every number is re-read from the records when checked."""
import math
from collections.abc import Callable

import numpy as np

from scenarios.claims import Computed
from scenarios.explanation import Sentence, say
from scenarios.memory_tricks.figures import (ACCUMULATION, PARTS, UNINTERRUPTED, VARIANTS, none_value, resumed_at,
                                             sweep)
from scenarios.records import Records
from scenarios.words import byte_sizes, count, counted

Compute = Callable[[Records], float | None]
STATE = {"state/weights": ("the weights", "are", "differ"),
         "state/optimizer": ("Adam's state (moments, step counts, next lr)", "is", "differs")}


def loss_gap(arm: str) -> Compute:
    """records -> max |loss(arm) − loss(uninterrupted)| over the steps both recorded (None: none)."""
    def compute(records: Records) -> float | None:
        a, b = records.series(arm, "loss"), records.series(UNINTERRUPTED, "loss")
        common = a.index.intersection(b.index)
        return float((a[common] - b[common]).abs().max()) if len(common) else None
    return compute


def compared_steps(arm: str) -> Compute:
    def compute(records: Records) -> float | None:
        common = records.series(arm, "loss").index.intersection(records.series(UNINTERRUPTED, "loss").index)
        return float(len(common)) if len(common) else None
    return compute


def state_gap(arm: str, metric: str) -> Compute:
    """records -> |fingerprint(arm) − fingerprint(uninterrupted)| of the state after the last
    update (engines.distributed.resume.state_fingerprints), when both recorded it at one step."""
    def compute(records: Records) -> float | None:
        step = records.last_step(arm, metric)
        if step is None or records.last_step(UNINTERRUPTED, metric) != step:
            return None
        return abs(records.at(arm, metric, step) - records.at(UNINTERRUPTED, metric, step))
    return compute


def state_claims(records: Records, arm: str) -> list[Computed]:
    """For each part of the state: 'the weights equal' or 'differ (fingerprints 3.1 apart)'."""
    claims = []
    for metric, (name, equal, differ) in STATE.items():
        gap = state_gap(arm, metric)(records)
        if gap is not None:
            words = f"{name} {equal} bitwise equal" if gap == 0 else f"{name} {differ}"
            words += " (fingerprints {} apart)"
            claims.append(Computed(words, gap, state_gap(arm, metric), rel=0.0 if gap == 0 else 1e-9))
    return claims


def resume_sentence(records: Records, arm: str) -> Sentence | None:
    """'resumed from the checkpoint: over its 100 steps the loss is bitwise equal to the
    uninterrupted loss (largest |Δ| 0); after the last update (step 200) the weights bitwise equal …'."""
    gap, steps = loss_gap(arm)(records), compared_steps(arm)(records)
    if gap is None:
        return None
    words = "is bitwise equal to the uninterrupted loss (largest |Δ| {})" if gap == 0 else \
        "differs from the uninterrupted loss by up to {}"
    text = "{}: over {} the loss " + words
    claims = [Computed(counted(steps, "step"), steps, compared_steps(arm), shown=f"{steps:.0f}"),
              Computed("{}", gap, loss_gap(arm), rel=0.0 if gap == 0 else 1e-9)]
    state = state_claims(records, arm)
    if state:
        step = records.last_step(arm, next(iter(STATE)))
        text += f"; after the last update (state at step {step}): " + ", ".join(["{}"] * len(state))
    return say(text, arm, *claims, *state)


def best_k(records: Records) -> float | None:
    k, peaks = sweep(records, "saved_peak_bytes")
    return float(k[np.argmin(peaks)]) if len(k) else None


def lowest_peak(records: Records) -> float | None:
    peaks = sweep(records, "saved_peak_bytes")[1]
    return float(peaks.min()) if len(peaks) else None


def peak_sentence(records: Records, layers: int) -> Sentence | None:
    full, low, best = none_value(records, "saved_peak_bytes"), lowest_peak(records), best_k(records)
    if None in (full, low, best):
        return None
    full_text, low_text = byte_sizes(full, low)  # two different sizes never print the same
    return say(f"Peak bytes saved for backward, {count(layers, 'layer')}: {{}} without checkpointing, {{}} ({{}}; "
               f"√n = {math.sqrt(layers):.3g})",
               Computed("{}", full, lambda r: none_value(r, "saved_peak_bytes"), shown=full_text),
               Computed("{}", low, lowest_peak, shown=low_text),
               Computed("smallest at k = {}", best, best_k, shown=f"{best:.0f}"))


def accumulation_sentence(records: Records) -> Sentence | None:
    k = records.values(ACCUMULATION, "micro_batches")
    if len(k) < 2:
        return None
    parts = [Computed(f"{name}: {{}}", float(values.max()), lambda r, n=name: float(r.values(ACCUMULATION, f"rel_diff/{n}").max()))
             for name in VARIANTS if len(values := records.values(ACCUMULATION, f"rel_diff/{name}"))]
    return say(f"Accumulating up to K = {int(k.max())} micro-batches, the largest ‖g_K − g_full‖/‖g_full‖: "
               + "; ".join(["{}"] * len(parts)), *parts)


def contents_sentence(records: Records, arm: str) -> Sentence | None:
    step = resumed_at(records, arm)
    if step is None:
        return None
    names = [name for name in ("file", *PARTS) if records.at(arm, f"checkpoint_bytes/{name}", step) is not None]
    values = [records.at(arm, f"checkpoint_bytes/{name}", step) for name in names]
    parts = [Computed(f"{name} {{}}", value, lambda r, n=name: r.at(arm, f"checkpoint_bytes/{n}", step), shown=text)
             for name, value, text in zip(names, values, byte_sizes(*values))]
    return say(f"The checkpoint saved at step {step}: " + ", ".join(["{}"] * len(parts))
               + " (each part measured alone; Adam keeps two moments per weight)", *parts)


def lr_gap(arm: str) -> Compute:
    """records -> max |lr(arm) − lr(uninterrupted)| over the steps both recorded."""
    def compute(records: Records) -> float | None:
        a, b = records.series(arm, "lr"), records.series(UNINTERRUPTED, "lr")
        common = a.index.intersection(b.index)
        return float((a[common] - b[common]).abs().max()) if len(common) else None
    return compute


def lr_sentence(records: Records, arms: list[str]) -> Sentence | None:
    """How far each resumed run's learning rate strayed (it lives in the optimizer's param_groups and
    the scheduler's position)."""
    parts = [Computed(f"{{}} ({arm})", value, lr_gap(arm)) for arm in arms[1:] if (value := lr_gap(arm)(records)) is not None]
    return say("Largest learning-rate difference from the uninterrupted run after the resume: "
               + ", ".join(["{}"] * len(parts)), *parts) if parts else None
