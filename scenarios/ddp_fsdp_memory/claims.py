"""DDP vs FSDP memory, said: the explanation's sentences, each number a claim the records re-derive.

Every number below is a `Computed` whose `compute` reads it again from `Records` through
`_memory_summary.summary` (the same arithmetic the figures draw from), so a sentence holds
for whatever config produced the frame: world sizes of 1, a single strategy, no timeline,
a result folder from torchrun, a partial frame mid-run.
"""
from collections.abc import Callable

from scenarios.claims import Computed
from scenarios.ddp_fsdp_memory.summary import summary, within
from scenarios.explanation import Explanation, Sentence, join, say, trajectory
from scenarios.records import Records
from scenarios.words import byte_size, byte_sizes, counted

Compute = Callable[[Records], float | None]


def of_arm(arm: str, key: str, scale: float = 1.0) -> Compute:
    """records -> `summary(records)["arms"][arm][key]`, scaled (None when not measured)."""
    def compute(records: Records) -> float | None:
        value = summary(records)["arms"].get(arm, {}).get(key)
        return None if value is None else value * scale
    return compute


def of_run(key: str, world: int | None = None) -> Compute:
    """records -> a run-wide number of the summary (at `world` for the per-world loss gaps)."""
    def compute(records: Records) -> float | None:
        value = summary(records).get(key)
        return value.get(world) if isinstance(value, dict) else value
    return compute


def ratio(a: Compute, b: Compute) -> Compute:
    def compute(records: Records) -> float | None:
        x, y = a(records), b(records)
        return x / y if x is not None and y else None
    return compute


def collective(arm: str, kind: str) -> Compute:
    return lambda records: records.last(arm, f"rank_0/collectives/{kind}")


def measured(text: str, compute: Compute, records: Records, shown=None) -> Computed | None:
    """A claim of the number `compute` reads now, or None when the records lack it."""
    value = compute(records)
    if value is None:
        return None
    return Computed(text, value, compute, shown=shown(value) if shown else "")


def explanation(records: Records, kinds: tuple[str, ...]) -> Explanation:
    arms = summary(records)["arms"]
    if not arms:
        losses = [say("{}: its loss {}", arm, trajectory(records, arm)) for arm in records.arms_with("loss")]
        if losses:  # the measurements (after step 1) are still to come, or a result folder has none
            return Explanation(join(*losses))
        return Explanation(waiting="Starting the rank processes: the first measurements arrive after step 1.")
    top = max(a["world_size"] for a in arms.values())
    shown = [arm for arm, a in arms.items() if a["world_size"] == top]
    ddp = next((arm for arm in shown if arms[arm]["strategy"] == "ddp"), None)
    state = {arm: of_arm(arm, "measured_state_bytes") for arm in shown}
    sizes = dict(zip(shown, byte_sizes(*(state[arm](records) for arm in shown))))  # different sizes print apart
    parts = []
    for arm in shown:
        share = measured("(×{} DDP's)", ratio(state[arm], state[ddp]), records) if ddp not in (None, arm) else None
        parts.append(say(f"{arm} {{}}" + (" {}" if share else ""), measured("{}", state[arm], records, shown=lambda _, a=arm: sizes[a]),
                         *([share] if share else [])))
    joined = join(*parts, sep=", ")
    takeaway = Sentence(f"Rank 0's model state (parameters, gradients, Adam) at N={top}: {joined.text}", joined.claims)
    details = [d for d in (_model_error(records), _losses(records, top), _collectives(records, shown, kinds),
                           _gathered(records, shown, arms), _activations(records, shown, arms)) if d is not None]
    return Explanation(takeaway, tuple(details))


def _model_error(records: Records) -> Sentence | None:
    claim = measured("The ZeRO model (fp32 Adam: 16 bytes per parameter, FSDP's divided by N) against the measured "
                     "model state of every arm: {}", of_run("max_state_error"), records, shown=within)
    return say("{}.", claim) if claim else None


def _losses(records: Records, top: int) -> Sentence | None:
    gap, bf16_gap = of_run("loss_gap", top)(records), of_run("bf16_loss_gap", top)(records)
    claims = [measured(f"at N={top} the fp32 strategies' losses are equal at every step" if gap == 0 else
                       f"at N={top} the fp32 strategies' losses differ by at most {{}} at any step",
                       of_run("loss_gap", top), records),
              measured("bf16 compute leaves the loss unchanged at every step" if bf16_gap == 0 else
                       "bf16 compute moves the loss by at most {}", of_run("bf16_loss_gap", top), records)]
    claims = [c for c in claims if c is not None]
    return say("Loss: " + "; ".join(["{}"] * len(claims)) + ".", *claims) if claims else None


def _collectives(records: Records, shown: list[str], kinds: tuple[str, ...]) -> Sentence | None:
    parts = []
    for arm in shown:
        counts = [c for kind in kinds if (c := _count(records, arm, kind)) is not None and c.value]
        if counts:
            parts.append(say(f"{arm}: " + ", ".join(["{}"] * len(counts)), *counts))
    return _listed("Collectives rank 0 issued in one training step (an extra step after the arm's last, counted by "
                   "CommDebugMode): ", parts)


def _count(records: Records, arm: str, kind: str) -> Computed | None:
    value = collective(arm, kind)(records)
    if value is None:
        return None
    return Computed(counted(value, kind), value, collective(arm, kind), shown=f"{value:.0f}")


def _gathered(records: Records, shown: list[str], arms: dict) -> Sentence | None:
    parts = []
    for arm in shown:
        a = arms[arm]
        if a["strategy"].startswith("fsdp") and a["max_unsharded_bytes"] and a["unit_param_bytes"]:
            most = of_arm(arm, "max_unsharded_bytes")
            parts.append(say(f"{arm} at most {{}} ({{}}× one block's)", measured("{}", most, records, shown=byte_size),
                             measured("{}", ratio(most, of_arm(arm, "unit_param_bytes")), records)))
    return _listed("Gathered (unsharded) parameters held at once through the step: ", parts)


def _listed(head: str, parts: list[Sentence]) -> Sentence | None:
    if not parts:
        return None
    joined = join(*parts)
    return Sentence(f"{head}{joined.text}.", joined.claims)


def _activations(records: Records, shown: list[str], arms: dict) -> Sentence | None:
    arm = next((arm for arm in shown if arms[arm]["strategy"] in ("fsdp-zero3", "fsdp-zero2")
                and arms[arm]["measured_activation_bytes"] and arms[arm]["estimated_activation_bytes"]), None)
    if arm is None:
        return None
    values = [of_arm(arm, key) for key in ("measured_activation_bytes", "estimated_activation_bytes")]
    texts = byte_sizes(*(value(records) for value in values))
    claims = [measured("{} measured", values[0], records, shown=lambda _: texts[0]),
              measured("{} by this layer's bookkeeping (12 values per token and hidden unit per block)",
                       values[1], records, shown=lambda _: texts[1])]
    return say(f"Activations kept for backward at the end of forward ({arm}, rank 0): {{}}, {{}}.", *claims)

