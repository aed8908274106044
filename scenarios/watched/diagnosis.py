"""What to look for in your run: each sentence built from claims that the run's records prove.

The loss's course first; then, where the records show them: how the gradient changes across
depth, a forward signal that jumps between modules, units dead on every logged batch,
update-to-weight ratios a decade or more from the usual ~10⁻³, loss spikes and the step each
began, and the first NaN or infinity with the module it appeared in. A finding the records do not
show is not said; every threshold is a constant here, so a sentence's words follow from the numbers
it carries.
"""
import math

from scenarios.claims import Computed, fmt
from scenarios.explanation import Explanation, Sentence, say, trajectory
from scenarios.gradients import gradient_claims
from scenarios.records import Records
from scenarios.watched.claims import NonFiniteClaim, SpikeClaim, first_nonfinite, last_of, median_of, spikes

VANISH, EXPLODE = 1e-2, 1e2   # module 1's gradient against the last module's: two decades either way
JUMP = 10.0                   # a forward signal whose std changes more than this between neighbouring modules
DEAD_SHARE = 0.05             # a module is named when this share of its units was ≤ 0 on every logged batch…
DEAD_BATCHES = 3              # …over at least this many logged batches
TYPICAL_UPDATE, FAR = 1e-3, 10.0  # a median update/weight ratio outside [1e-4, 1e-2] is far from the usual
RELU = ("ReLU", "ReLU6")      # after these a unit ≤ 0 on every input passes no gradient: dead
NAMED = 3                     # at most this many modules (or spikes) named in one sentence


def percent(value: float) -> str:
    return "<1%" if 0 < value < 0.01 else f"{value:.0%}"


def diagnose(records: Records, arm: str, names: list[str], notes: list[str], after: list[str] = ()) -> Explanation:
    """`names`: the module paths, module 1 first; `after`: the class registered next to each ("" unknown)."""
    names = names or [f"module {i + 1}" for i in range(len(records.profile(arm, "grad_norm")))]
    after = list(after) or [""] * len(names)
    details = [s for s in (depth(records, arm, names), forward_jump(records, arm, names), dead(records, arm, names, after),
                           updates(records, arm, names), spiked(records, arm), nonfinite(records, arm, names))
               if s is not None] + [Sentence(f"Measured: {note}.") for note in notes]
    fate = trajectory(records, arm, "loss")
    if fate:
        return Explanation(say("{}: the loss {}", arm, fate), tuple(details))
    if details:
        return Explanation(details[0], tuple(details[1:]))
    return Explanation(waiting="Nothing measured yet: the first logged optimizer step writes the first records.")


def depth(records: Records, arm: str, names: list[str]) -> Sentence | None:
    """Module 1's gradient as a power of ten of the last module's, at the first logged step."""
    claims = gradient_claims(records, arm, f"module {len(names)} (`{names[-1]}`)")[:1]
    if not claims or len(names) < 2:
        return None
    ratio = claims[0].value
    verdict = ("it vanishes toward the input" if ratio < VANISH else "it grows toward the input (exploding)"
               if ratio > EXPLODE else "within two orders of magnitude across depth")
    return say("Across depth: {} (layer 1 is `{}`): " + verdict + ".", claims[0], names[0])


def forward_jump(records: Records, arm: str, names: list[str]) -> Sentence | None:
    """The largest change of the outputs' std between neighbouring modules at the first logged step."""
    def compute(r: Records) -> float | None:
        std = r.profile(arm, "act_std")
        if len(std) < 2 or (std[:-1] <= 0).any():
            return None
        ratios = std[1:] / std[:-1]
        return float(max(ratios.max(), 1 / ratios.min()))
    jump = compute(records)
    if jump is None or jump <= JUMP:
        return None
    std = records.profile(arm, "act_std")
    ratios = std[1:] / std[:-1]
    at = int(max(range(len(ratios)), key=lambda i: max(ratios[i], 1 / ratios[i])))
    word = "grows" if ratios[at] > 1 else "shrinks"
    step = int(records.layers(arm, "act_std").index.min())
    return say(f"Forward signal: at step {step} the outputs' std {word} ×{{}} (the largest change between neighbouring "
               f"modules) from `{names[at]}` ({fmt(std[at])}) to `{names[at + 1]}` ({fmt(std[at + 1])}).",
               Computed("{}", jump, compute, rel=1e-9))


def dead(records: Records, arm: str, names: list[str], after: list[str]) -> Sentence | None:
    """Modules with units ≤ 0 on every logged batch, where a ReLU follows them (or what follows is not
    known: a functional activation); the output module aside."""
    table = records.layers(arm, "frac_dead_always")
    if len(table) < DEAD_BATCHES:
        return None
    last = table.iloc[-1]
    worst = sorted(((float(v), int(layer)) for layer, v in last.items() if int(layer) < len(names)
                    and after[int(layer) - 1] in (*RELU, "") and v >= DEAD_SHARE), reverse=True)
    if not worst:
        return None
    count = Computed("{}", float(len(table)), lambda r: float(len(r.layers(arm, "frac_dead_always"))), shown=str(len(table)))
    shares = [Computed(f"`{names[layer - 1]}` {{}} " + ("(a ReLU follows)" if after[layer - 1] else "(if a ReLU follows)"),
                       share, last_of(arm, "frac_dead_always", layer), rel=1e-9, shown=percent(share))
              for share, layer in worst[:NAMED]]
    more = f" ({len(worst)} modules in all)" if len(worst) > NAMED else ""
    return say("Dead units, ≤ 0 on every one of the {} logged batches (steps " + f"{int(table.index[0])}–"
               f"{int(table.index[-1])}): " + ", ".join(["{}"] * len(shares)) + more + ".", count, *shares)


def updates(records: Records, arm: str, names: list[str]) -> Sentence | None:
    """Median update-to-weight ratios a decade or more from ~1e-3, or that every module is within one."""
    medians = {layer: median_of(arm, "update_ratio", layer)(records) for layer in range(1, len(names) + 1)}
    medians = {layer: value for layer, value in medians.items() if value is not None}
    if not medians:
        return None
    low, high = TYPICAL_UPDATE / FAR, TYPICAL_UPDATE * FAR
    far = sorted((layer for layer, value in medians.items() if not low <= value <= high),
                 key=lambda layer: -abs(_log10(medians[layer]) + 3))
    if not far:
        lowest, highest = min(medians, key=medians.get), max(medians, key=medians.get)
        return say("Update-to-weight ratios: every module's median is within a decade of the usual ~10⁻³, from {} to {}.",
                   *(Computed(f"{{}} (`{names[layer - 1]}`)", medians[layer], median_of(arm, "update_ratio", layer))
                     for layer in (lowest, highest)))
    claims = [Computed(f"`{names[layer - 1]}` {{}}", medians[layer], median_of(arm, "update_ratio", layer),
                       shown="0 (no weight changed in its dtype)" if medians[layer] == 0 else "")
              for layer in far[:NAMED]]
    above, below = sum(medians[f] > high for f in far), sum(medians[f] < low for f in far)
    counts = ", ".join(part for part in (f"{above} above 10⁻²" if above else "", f"{below} below 10⁻⁴" if below else "")
                       if part)
    return say("Update-to-weight ratios far from the usual ~10⁻³ (median over logged steps; " + f"{counts} of "
               f"{len(medians)} modules): " + ", ".join(["{}"] * len(claims)) + ".", *claims)


def spiked(records: Records, arm: str) -> Sentence | None:
    found = sorted(spikes(records, arm), key=lambda s: -s.peak / s.baseline)[:NAMED]
    if not found:
        return None
    claims = [SpikeClaim(arm, s) for s in sorted(found, key=lambda s: s.start)]
    return say("Loss spikes: " + "; ".join(["{}"] * len(claims)) + ".", *claims)


def nonfinite(records: Records, arm: str, names: list[str]) -> Sentence | None:
    found = first_nonfinite(records, arm)
    if found is None or (found.step is not None and found.layer > len(names)):
        return None
    return say("NaN/inf: {}.", NonFiniteClaim(arm, found, tuple(names)))


def _log10(value: float) -> float:
    return math.log10(value) if value > 0 else -30.0
