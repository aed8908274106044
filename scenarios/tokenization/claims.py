"""What the tokenization page says, each number a claim its records prove."""
from scenarios.claims import Computed
from scenarios.explanation import Sentence, say
from scenarios.recorded import recorded
from scenarios.records import Records
from scenarios.tokenization.figures import BYTES, PRE, RAW, lm_arms, lm_size, merge_table, shown_text, spanning_examples


def at_size(records: Records, arm: str, size: int, text: str = "{}") -> Computed | None:
    """Bytes per token at a vocabulary size, two decimals: the listed values share a format (1.00, not 1, beside 3.65)."""
    return recorded(records, arm, "bytes_per_token", step=size, text=text, shown=lambda v: f"{v:.2f}")


def compression_sentence(records: Records) -> Sentence | None:
    """Bytes per held-out token at 256 and at the largest size, both tokenizers."""
    top = records.last_step(PRE, "bytes_per_token")
    if top is None:
        return None
    start, pre = at_size(records, PRE, BYTES), at_size(records, PRE, top)
    raw_top = records.last_step(RAW, "bytes_per_token")
    if raw_top is None:
        return say(f"Held-out prose, bytes per token: {{}} with the 256 bytes alone, {{}} with {top} tokens of BPE.",
                   start, pre)
    raw = at_size(records, RAW, raw_top)
    return say(f"Held-out prose, bytes per token: {{}} with the 256 bytes alone; {{}} with {top} tokens of BPE "
               f"(GPT-2 pre-split), {{}} with {raw_top} tokens (no pre-split).", start, pre, raw)


def pre_split_sentence(records: Records) -> Sentence | None:
    raw, pre = recorded(records, RAW, "spanning_tokens"), recorded(records, PRE, "spanning_tokens")
    merges = recorded(records, RAW, "merges")
    if raw is None or pre is None or merges is None:
        return None
    examples = ", ".join(f"“{shown_text(token)}”" for _, token, _ in spanning_examples(records, RAW)[:4])
    shown = f" (the first: {examples})" if examples else ""
    return say("Without the pre-split, {} of its {} merges make tokens that run across a word boundary" + shown +
               "; with GPT-2's pre-split, {}: merges stay inside a word and its leading space.", raw, merges, pre)


def first_merge_sentence(records: Records) -> Sentence | None:
    rows = merge_table(records, PRE)
    if not rows:
        return None
    rank, left, right, _ = rows[0]
    count = recorded(records, PRE, "merge/rank_00/count", text="{}")
    train = recorded(records, PRE, "train_bytes", shown=lambda v: f"{v:,.0f}")
    if count is None or train is None:
        return None
    return say(f"BPE learned from {{}} bytes of prose; its first merge joins “{shown_text(left)}” and "
               f"“{shown_text(right)}”, the most frequent adjacent pair ({{}} times), into token {BYTES + rank}.", train, count)


def compute_sentence(records: Records) -> Sentence | None:
    """Each LM's held-out bits per byte at the end of the same FLOP budget, its steps and embedding size."""
    arms = [a for a in lm_arms(records) if records.last(a, "heldout_bpb") is not None
            and records.first(a, "embedding_params") is not None]
    if not arms:
        return None
    parts = []
    for arm in arms:
        parts += [recorded(records, arm, "heldout_bpb"), recorded(records, arm, "planned_steps", step=0),
                  recorded(records, arm, "embedding_params", step=0, shown=lambda v: f"{v:,.0f}")]
    if None in parts:
        return None
    budget = recorded(records, arms[0], "flops")
    rows = "; ".join(f"{lm_size(arm)} tokens {{}} ({{}} steps, {{}} embedding parameters)" for arm in arms)
    return say("Held-out bits per byte after about the same training compute ({} FLOPs for the byte model): " + rows + ".",
               budget, *parts)


def prose_sentence(records: Records) -> Sentence | None:
    size = recorded(records, PRE, "prose_bytes", shown=lambda v: f"{v:,.0f}")
    digest = recorded(records, PRE, "prose_hash48", shown=lambda v: f"{int(v):012x}")
    if size is None or digest is None:
        return None
    return say("The prose: {} bytes of standard-library docstrings read from this interpreter (sha256 {}…), every "
               "10th paragraph held out.", size, digest)

