"""Mixture of experts, said: the busiest expert's share, the balancing loss, the dropped share at
each capacity factor, the z-loss and the held-out error, each claim re-read from the records."""
from scenarios.claims import Claim, Computed, Lower
from scenarios.explanation import Sentence, say
from scenarios.moe.figures import FACTORS
from scenarios.records import Records


def percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def share_sentence(records: Records, arm: str, n_experts: int) -> Sentence | None:
    """`arm: the busiest expert took 39.0% of the assignments at step 199 (3.12× the even 12.5%), from 20.1% at step 0`."""
    series = records.series(arm, "top_share")
    if series.empty:
        return None
    first_step, last_step = int(series.index[0]), int(series.index[-1])
    top = float(series.iloc[-1])
    claims: list[Claim] = [
        Computed(f"the busiest expert took {{}} of the assignments at step {last_step}", top,
                 lambda r: r.at(arm, "top_share", last_step), shown=percent(top)),
        Computed(f"{{}}× the even {percent(1 / n_experts)}", top * n_experts,
                 lambda r: (r.at(arm, "top_share", last_step) or 0) * n_experts, shown=f"{top * n_experts:.2f}")]
    if last_step > first_step:
        start = float(series.iloc[0])
        claims.append(Computed(f"{{}} at step {first_step}", start, lambda r: r.at(arm, "top_share", first_step),
                               shown=percent(start)))
        return say("{}: {} ({}; it was {})", arm, *claims)
    return say("{}: {} ({})", arm, *claims)


def balance_sentence(records: Records, arms: list[str]) -> Sentence | None:
    """E·Σ f_i·P_i at the last step of each MoE arm: the balancing loss in units of α (1 = perfect balance)."""
    claims = [Computed(f"{{}} for {arm}", records.last(arm, "aux_unit"), lambda r, a=arm: r.last(a, "aux_unit"))
              for arm in arms if records.has("aux_unit", arm)]
    if not claims:
        return None
    return say("Balancing loss ÷ α = E·Σ f_i·P_i at the last step (exactly 1 at perfect balance): " +
               ", ".join(["{}"] * len(claims)), *claims)


def dropped_sentence(records: Records, arm: str) -> Sentence | None:
    claims = [Computed(f"{{}} at capacity factor {factor}", records.last(arm, f"dropped/cf_{factor}"),
                       lambda r, m=f"dropped/cf_{factor}": r.last(arm, m), shown=percent(records.last(arm, f"dropped/cf_{factor}")))
              for factor in FACTORS if records.has(f"dropped/cf_{factor}", arm)]
    if not claims:
        return None
    return say("{} drops " + ", ".join(["{}"] * len(claims)) + " of its assignments (held-out batches, last step)", arm, *claims)


def z_sentence(records: Records, arms: list[str]) -> Sentence | None:
    claims = [Computed(f"{{}} for {arm}", records.last(arm, "z_loss"), lambda r, a=arm: r.last(a, "z_loss"))
              for arm in arms if records.has("z_loss", arm)]
    if not claims:
        return None
    return say("Router z-loss at the last step: " + ", ".join(["{}"] * len(claims)), *claims)


def quality_sentence(records: Records, moe_arm: str, dense: list[str]) -> Sentence | None:
    """The MoE arm's held-out error against each dense baseline's, with the parameter counts, and
    which is lower (a `Lower` claim either way round)."""
    if not records.has("test_mse", moe_arm):
        return None
    mine = records.last(moe_arm, "test_mse")
    parts: list[Claim] = [Computed(f"{moe_arm} ends at held-out MSE {{}}", mine, lambda r: r.last(moe_arm, "test_mse"))]
    template = "{}"
    for arm in dense:
        theirs = records.last(arm, "test_mse")
        if theirs is None or mine == theirs:
            continue
        params = records.first(arm, "parameters")
        parts.append(Computed(f"{arm} ({{}} parameters in its MLP)", params, lambda r, a=arm: r.first(a, "parameters"),
                              shown=f"{params:,.0f}"))
        parts.append(Computed("{}", theirs, lambda r, a=arm: r.last(a, "test_mse")))
        lower = mine < theirs
        parts.append(Lower(moe_arm, arm, "test_mse", words="lower") if lower else
                     Lower(arm, moe_arm, "test_mse", words="higher"))
        template += "; {} at {} (the MoE's is {})"
    return say(template, *parts)
