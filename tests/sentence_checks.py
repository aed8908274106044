"""Checks of a page's words that `Claim.holds()` cannot make: it re-reads the numbers, not the words
around them. Each check below is one way a sentence was once wrong (issue 33), written so that it
reads any scenario's explanation of any run; `problems` lists what a sentence says that the
records or the config contradict."""
import math
import re

from scenarios.records import Records

PLURAL_NOUNS = ("steps", "units", "layers", "ranks", "heads", "blocks", "pairs", "examples", "networks", "micro-batches",
                "all-reduces", "all-gathers", "reduce-scatters", "broadcasts", "results", "keys", "tokens", "channels")
ONE_PLURAL = re.compile(r"(?<![\d.,×])\b1 (" + "|".join(map(re.escape, PLURAL_NOUNS)) + r")\b")
EMPTY_PHRASES = ("(one more after the last)", "restored step ", "the stability edge of gradient descent on a quadratic is 2")
BYTES = re.compile(r"(\d[\d,]*(?:\.\d+)?) (B|KiB|MiB|GiB|TiB)\b")


def problems(scenario_id: str, config, records: Records, sentences: list[str]) -> list[str]:
    """Every contradiction found, as '<what>: <sentence>'."""
    found = []
    for text in sentences:
        found += [f"'1 {m[1]}': {text}" for m in ONE_PLURAL.finditer(text)]
        found += [f"{phrase!r}: {text}" for phrase in EMPTY_PHRASES if phrase in text]
    check = CHECKS.get(scenario_id)
    return found + (check(config, records, sentences) if check else [])


def _rlhf(config, records: Records, sentences: list[str]) -> list[str]:
    found = [f"over-optimization not said of PPO: {s}" for s in sentences
             if "over-optimization" in s and not s.startswith("PPO:")]
    accuracy = records.last("reward model", "heldout/accuracy")
    said = any("no better than chance" in s for s in sentences)
    if accuracy is not None and said != (accuracy <= 0.5) and any("held-out pairs" in s for s in sentences):
        found.append(f"held-out accuracy {accuracy:.3f}, 'no better than chance' said: {said}")
    return found


def _dead_relu(config, records: Records, sentences: list[str]) -> list[str]:
    """An arm whose loss ended within 5% of Var(y) is said to be at the constant-output loss."""
    var = next((records.first(arm, "constant_loss") for arm in records.arms() if records.has("constant_loss", arm)), None)
    if var is None or not sentences:
        return []
    found = []
    for arm in ("ReLU", "LeakyReLU", "GELU"):
        last = records.last(arm, "loss")
        if last is None or records.diverged_at(arm) is not None or abs(last - var) > 0.05 * var:
            continue
        part = next((p for p in sentences[0].split("; ") if p.startswith(f"{arm}:")), "")
        if "constant-output loss" not in part:
            found.append(f"{arm} ended at {last:.4g} = Var(y) {var:.4g} unsaid: {part}")
    return found


def _memory_tricks(config, records: Records, sentences: list[str]) -> list[str]:
    found = [f"fewer than 2 steps compared: {s}" for s in sentences for m in re.finditer(r"over (\d+) steps?", s)
             if int(m[1]) < 2]
    for text in sentences:  # two different byte values in one sentence never print alike
        if text.startswith("Peak bytes saved"):
            printed = [m[0] for m in BYTES.finditer(text)]
            if len(printed) == 2 and printed[0] == printed[1]:
                full = records.at("activation checkpointing", "saved_peak_bytes", 0)
                low = min(records.values("activation checkpointing", "saved_peak_bytes")[1:], default=full)
                if full != low:
                    found.append(f"{full} and {low} bytes both print as {printed[0]}: {text}")
    return found


def _generalization(config, records: Records, sentences: list[str]) -> list[str]:
    return [f"restored weights not said to be those before the step's update: {s}" for s in sentences
            if "Early stopping" in s and "restored" in s and "before step" not in s]


def _attention(config, records: Records, sentences: list[str]) -> list[str]:
    """The unscaled-softmax numbers name the swept d_k nearest the chosen one."""
    dims = [int(d) for d in records.series("random q, k", "var_qk").index]
    if not dims or not sentences:
        return []
    nearest = min(dims, key=lambda d: abs(math.log(d / config.d_k)))
    return [] if sentences[0].startswith(f"At d_k = {nearest}") else [f"d_k {config.d_k}, nearest {nearest}: {sentences[0]}"]


def _optimizers(config, records: Records, sentences: list[str]) -> list[str]:
    """Each SGD-family arm's lr·λ_max is compared with its own edge (the claim re-checks the side)."""
    edges = [s for s in sentences if s.startswith("lr·λ_max against each method's stability edge")]
    if config.surface != "quadratic" or not records.has("lambda_max", "SGD"):
        return []
    return [] if edges and all(arm in edges[0] for arm in ("SGD", "Nesterov")) else [f"no per-method edge: {sentences}"]


CHECKS = {"rlhf-ppo": _rlhf, "dead-relu": _dead_relu, "memory-tricks": _memory_tricks, "generalization": _generalization,
          "attention": _attention, "optimizers": _optimizers}


def explained_and_holding(scenario, overrides: dict, records: Records):
    """The scenario's explanation of a run at `overrides`, after checking that it makes claims, that
    every claim holds on the records and that `problems` finds nothing in its sentences."""
    config = scenario.validate(overrides)
    explanation = scenario.explain(records.frame, config)
    claims = explanation.claims()
    assert claims, explanation.markdown()
    failed = [str(c) for c in claims if not c.holds(records)]
    assert not failed, failed
    sentences = [explanation.takeaway.text, *(s.text for s in explanation.details)]
    found = problems(scenario.id, config, records, sentences)
    assert not found, found
    return explanation
