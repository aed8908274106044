"""QLoRA, said: the loss of the three arms and its gap, memory per parameter, the constants' bits with and
without double quantization, and NF4's error against int4's; every number re-read from the records."""
from scenarios.claims import Computed, fmt
from scenarios.explanation import Sentence, say
from scenarios.plotting import UNIFORM_BYTE_BPB
from scenarios.qlora.figures import ARMS, CATEGORIES, FULL, LORA, PRE, QLORA
from scenarios.recorded import recorded
from scenarios.records import Records


def loss_sentence(records: Records) -> Sentence | None:
    """Each arm's held-out bits per byte on the target text at its last logged step, and QLoRA − LoRA."""
    finals = [recorded(records, arm, "domain_bpb", text=f"{arm} {{}}") for arm in ARMS]
    if any(claim is None for claim in finals):
        return None
    step = records.last_step(QLORA, "domain_bpb")
    if records.at(LORA, "domain_bpb", step) is None:  # LoRA diverged before QLoRA's last step
        return say("Held-out loss on the target text after fine-tuning (bits per byte): {}, {}, {}.", *finals)
    gap = records.at(QLORA, "domain_bpb", step) - records.at(LORA, "domain_bpb", step)
    gap_claim = Computed("{}", gap, lambda r: r.at(QLORA, "domain_bpb", step) - r.at(LORA, "domain_bpb", step),
                         shown=f"{gap:+.4f}")
    return say(f"Held-out loss on the target text after fine-tuning (bits per byte): {{}}, {{}}, {{}}; QLoRA − LoRA "
               f"= {{}} bits per byte at step {step}.", *finals, gap_claim)


def start_sentence(records: Records) -> Sentence | None:
    """Step 0 logs before any update, and LoRA's B starts at zero: each adapter arm's step-0 loss is its base's."""
    claims = [recorded(records, arm, metric, 0) for arm in (LORA, QLORA) for metric in ("prose_bpb", "domain_bpb")]
    if any(claim is None for claim in claims):
        return None
    return say("Before fine-tuning (step 0: LoRA's B matrix starts at zero, so the adapters add nothing) the float "
               "base scores {} bits per byte on the prose and {} on the target text; the same base rounded to NF4 "
               "scores {} and {}.", *claims)


def pretrain_sentence(records: Records) -> Sentence | None:
    series = records.series(PRE, "prose_bpb")
    if len(series) < 2:
        return None
    first, last = int(series.index[0]), int(series.index[-1])
    return say("Pretraining took the prose's held-out loss from {} to {} bits per byte.",
               recorded(records, PRE, "prose_bpb", first), recorded(records, PRE, "prose_bpb", last))


def forgetting_sentence(records: Records) -> Sentence | None:
    """What each fine-tune kept of the prose: its held-out bits per byte at its first and last logged
    steps, and the arms that end above a uniform guess over the 256 byte values."""
    pairs = []
    for arm in ARMS:
        series = records.series(arm, "prose_bpb")
        if len(series) < 2:
            return None
        pairs.append((arm, recorded(records, arm, "prose_bpb", int(series.index[0])),
                      recorded(records, arm, "prose_bpb", int(series.index[-1]))))
    above = [arm for arm, _, end in pairs if end.value > UNIFORM_BYTE_BPB]
    tail = (f" — {' and '.join(above)} end{'s' if len(above) == 1 else ''} above a uniform guess over the 256 byte "
            f"values ({UNIFORM_BYTE_BPB:g} bits): worse on the prose than a guess that knows nothing of it") if above else ""
    return say("Fine-tuning on the target text moved the prose's held-out loss (bits per byte, first → last logged "
               "step): " + "; ".join(f"{arm} {{}} → {{}}" for arm, _, _ in pairs) + tail + ".",
               *[claim for _, first, last in pairs for claim in (first, last)])


def memory_sentence(records: Records) -> Sentence | None:
    """Bits per base parameter, summed over the categories, per arm."""
    def summed(r: Records, arm: str) -> float | None:
        values = [r.last(arm, f"mem_bits/{c}") for c in CATEGORIES]
        return None if any(v is None for v in values) else sum(values)
    if any(summed(records, arm) is None for arm in ARMS):
        return None
    claims = [Computed(f"{arm} {{}}", summed(records, arm), lambda r, a=arm: summed(r, a),
                       shown=f"{summed(records, arm):.1f}") for arm in ARMS]
    codes = recorded(records, QLORA, "mem_bits/linear_weights", shown=lambda v: f"{v:.2f}")
    floats = recorded(records, LORA, "mem_bits/linear_weights", shown=lambda v: f"{v:.2f}")
    return say("Memory per base parameter, everything counted (weights, constants, adapters, gradients, AdamW state): "
               "{}, {}, {} bits. The block Linears take {} bits per base parameter as 4-bit codes against {} in "
               "float32.", *claims, codes, floats)


def constants_sentence(records: Records, block: int, second_block: int) -> Sentence | None:
    """The constants per quantized weight, measured, with and without double quantization, beside the formulas."""
    if not records.has("quantized_params", QLORA) or not records.has("mem_bits/constants", QLORA):
        return None

    def per_weight(r: Records, metric: str) -> float | None:
        value, base, quantized = (r.last(QLORA, m) for m in (metric, "base_params", "quantized_params"))
        return None if None in (value, base, quantized) else value * base / quantized
    plain, nested = per_weight(records, "mem_bits/constants_no_dq"), per_weight(records, "mem_bits/constants")
    formula_plain, formula_nested = 32 / block, 8 / block + 32 / (block * second_block)
    return say(f"Quantization constants per quantized weight: {{}} bits as float32 absmax (32/{block} = "
               f"{fmt(formula_plain)}), {{}} with double quantization (the formula 8/{block} + 32/({block}·{second_block}) "
               f"= {fmt(formula_nested)}; the measured count adds each layer's 32-bit mean and any padded block): "
               f"a saving of {{}} bits per weight (formula {fmt(formula_plain - formula_nested)}).",
               Computed("{}", plain, lambda r: per_weight(r, "mem_bits/constants_no_dq"), shown=f"{plain:.4f}"),
               Computed("{}", nested, lambda r: per_weight(r, "mem_bits/constants"), shown=f"{nested:.4f}"),
               Computed("{}", plain - nested, lambda r: per_weight(r, "mem_bits/constants_no_dq") - per_weight(r, "mem_bits/constants"),
                        shown=f"{plain - nested:.4f}"))


def error_sentence(records: Records, source: str, words: str, block: int) -> Sentence | None:
    """NF4's and int4 absmax's relative error on one source at the run's block size, and their ratio."""
    nf4_claim = recorded(records, QLORA, f"qerr/{source}/nf4/block_{block}")
    int4_claim = recorded(records, QLORA, f"qerr/{source}/int4/block_{block}")
    if nf4_claim is None or int4_claim is None:
        return None
    ratio = int4_claim.value / nf4_claim.value
    which = "NF4's is lower" if ratio > 1 else "int4's is lower"
    return say(f"Relative rounding error ‖ŵ − w‖²/‖w‖² on {words}, blocks of {block}: NF4 {{}}, int4 absmax {{}}; "
               f"int4 ÷ NF4 = {{}} ({which}).", nf4_claim, int4_claim,
               Computed("{}", ratio, lambda r: r.last(QLORA, f"qerr/{source}/int4/block_{block}")
                        / r.last(QLORA, f"qerr/{source}/nf4/block_{block}"), shown=f"{ratio:.2f}"))
