"""Dead ReLU, said: claims about dead units, the zero gradient and born-dead nets, each
re-derived from the records when checked; and the per-arm summary the tests read."""
from collections.abc import Callable

import numpy as np

from scenarios.claims import Claim, Computed
from scenarios.dead_relu.figures import born_dead, total_grad_norm
from scenarios.explanation import Sentence, say
from scenarios.records import Records

Compute = Callable[[Records], float | None]


def percent(p: float) -> str:
    return "<1%" if 0 < p < 0.01 else f"{p:.0%}"


def layer_at(arm: str, prefix: str, layer: int, step: int) -> Compute:
    """records -> `prefix/layer_XX` of `arm` at `step`."""
    return lambda records: records.at(arm, f"{prefix}/layer_{layer:02d}", step)


def worst_at(arm: str, prefix: str, step: int) -> Compute:
    """records -> the largest per-layer value of `prefix` at `step`."""
    def compute(records: Records) -> float | None:
        table = records.layers(arm, prefix)
        return float(table.loc[step].max()) if step in table.index else None
    return compute


def first_above(arm: str, prefix: str, layer: int, threshold: float) -> Compute:
    """records -> the first logged step where `prefix/layer_XX` is above `threshold`."""
    def compute(records: Records) -> float | None:
        series = records.series(arm, f"{prefix}/layer_{layer:02d}")
        hits = series[series > threshold]
        return float(hits.index[0]) if len(hits) else None
    return compute


def zero_from(arm: str) -> Compute:
    """records -> the step from which every hidden layer's weight gradient is exactly 0 through
    the last logged step (None when the last one is not 0)."""
    def compute(records: Records) -> float | None:
        total = total_grad_norm(records, arm)
        if total.empty or total.iloc[-1] != 0:
            return None
        nonzero = total[total != 0]
        return float(total.index[0] if nonzero.empty else total.index[total.index > nonzero.index[-1]][0])
    return compute


def dead_claim(records: Records, arm: str, prefix: str = "frac_dead", words: str = "dead") -> Computed | None:
    """At the arm's last census: the share of its worst layer's units that are dead (or, when
    none is, that no layer has any)."""
    table = records.layers(arm, prefix)
    if table.empty:
        return None
    step = int(table.index[-1])
    row = table.loc[step]
    worst, value = int(row.idxmax()), float(row.max())
    if value > 0:
        return Computed(f"{{}} of layer {worst}'s units {words} at step {step}", value,
                        layer_at(arm, prefix, worst, step), shown=percent(value))
    return Computed(f"{{}} of any layer's units {words} at step {step}", value, worst_at(arm, prefix, step), shown="0%")


def dead_details(records: Records, arm: str) -> list[Claim]:
    """Every layer with dead units at the last census, when the worst first passed half, the
    dead share at step 0, and the step from which no hidden weight gets any gradient."""
    table = records.layers(arm, "frac_dead")
    if table.empty:
        return []
    first, step = int(table.index[0]), int(table.index[-1])
    row = table.loc[step]
    dead = [(int(layer), float(v)) for layer, v in row.items() if v > 0]
    if not dead:
        return []
    claims: list[Claim] = [Computed(f"{{}} of layer {layer}'s" + ("" if i else f" units dead at step {step}"), v,
                                    layer_at(arm, "frac_dead", layer, step), shown=percent(v))
                           for i, (layer, v) in enumerate(dead)]
    worst = int(row.idxmax())
    half = first_above(arm, "frac_dead", worst, 0.5)(records)
    if half is not None and half > first:
        claims.append(Computed(f"layer {worst} more than half dead first at step {{}}", half,
                               first_above(arm, "frac_dead", worst, 0.5), shown=str(int(half))))
    at_start = float(table.loc[first].max())
    if at_start > 0:
        claims.append(Computed(f"up to {{}} of a layer dead at step {first}", at_start,
                               worst_at(arm, "frac_dead", first), shown=percent(at_start)))
    zero = zero_from(arm)(records)
    if zero is not None:
        claims.append(Computed("every hidden layer's weight gradient exactly 0 from step {} to the end", zero,
                               zero_from(arm), shown=str(int(zero))))
    return claims


def arm_details(records: Records, arm: str) -> Sentence | None:
    """The dead units' story (`dead_details`); for an arm without any, the share of its worst
    layer never above 0 on any input, when there is one."""
    never = dead_claim(records, arm, "frac_never_positive", "never above 0 on any input")
    claims = dead_details(records, arm) or ([never] if never is not None and never.value > 0 else [])
    if not claims:
        return None
    dead = dead_claim(records, arm)
    if claims == [never] and arm != "ReLU" and dead is not None and dead.value == 0:
        # units that never fire, yet not dead: below 0 a LeakyReLU's or GELU's slope is not 0
        return say("{}: {} — yet {}: below 0 its slope is not 0, so those units still get a gradient",
                   arm, never, dead)
    layers = sum(claim.text.startswith("{} of layer") for claim in claims)  # one list: "97% of layer 2's, ..."
    slots = [", ".join(["{}"] * layers)] * bool(layers) + ["{}"] * (len(claims) - layers)
    return say("{}: " + "; ".join(slots), arm, *claims)


def half_dead_from(arm: str, width: int) -> Compute:
    """records -> the shallowest depth from which at least half of the width's nets are born
    dead at every sampled depth (None when the deepest is below half)."""
    def compute(records: Records) -> float | None:
        p = born_dead(records, arm).get(width)
        if p is None or p.empty or p.iloc[-1] < 0.5:
            return None
        below = p[p < 0.5]
        return float(p.index[0] if below.empty else p.index[p.index > below.index[-1]][0])
    return compute


def born_sentence(records: Records, arm: str, setting: str) -> Sentence | None:
    """Per width: the depth from which half the nets are born dead or, for widths that never get
    there, P(born dead) at the deepest depth sampled."""
    half: list[Claim] = []
    deep: list[Claim] = []
    said_depth = None  # "12% dead at depth 50 at width 8, 3% at width 12": the depth said once
    for width, p in born_dead(records, arm).items():
        depth = half_dead_from(arm, width)(records)
        if depth is not None:
            words = "from depth {}" if half else "half or more dead from depth {}"
            half.append(Computed(f"{words} at width {width}", depth, half_dead_from(arm, width), shown=str(int(depth))))
        elif len(p):
            deepest, metric = int(p.index[-1]), f"born_dead/width_{width:02d}"
            words = "{}" if deepest == said_depth else f"{{}} dead at depth {deepest}"
            said_depth = deepest
            deep.append(Computed(f"{words} at width {width}", float(p.iloc[-1]),
                                 lambda r, m=metric, d=deepest: r.at(arm, m, d), shown=percent(float(p.iloc[-1]))))
    groups = [group for group in (half, deep) if group]
    if not groups:
        return None
    return say(setting + "; ".join(", ".join(["{}"] * len(group)) for group in groups), *half, *deep)


def arm_summary(records: Records, arm: str, depth: int) -> dict | None:
    """What the tests and summary.json read about one trained arm."""
    dead, never = records.layers(arm, "frac_dead"), records.layers(arm, "frac_never_positive")
    total = total_grad_norm(records, arm)
    if dead.empty or never.empty or total.empty:
        return None
    worst = int(dead.iloc[-1].idxmax())
    half = first_above(arm, "frac_dead", worst, 0.5)(records)
    zero = zero_from(arm)(records)
    return {"final_loss": records.last(arm, "loss"), "last_step": records.last_step(arm, "loss"),
            "diverged_at": records.diverged_at(arm),
            "dead_by_layer": [float(v) for v in dead.iloc[-1]], "worst_layer": worst,
            "worst_dead": float(dead.iloc[-1].max()), "last_layer_dead": float(dead.iloc[-1].get(depth, np.nan)),
            "half_dead_by": None if half is None else int(half),
            "start_dead": float(dead.iloc[0].max()),  # dead on the inputs already at init
            "newly_dead": float((dead.iloc[-1] - dead.iloc[0]).max()),  # died in training, most in one layer
            "never_positive": float(never.iloc[-1].max()), "never_positive_layer": int(never.iloc[-1].idxmax()),
            "grad_norm": float(total.iloc[-1]), "grad_zero_from": None if zero is None else int(zero)}
