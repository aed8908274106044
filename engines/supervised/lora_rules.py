"""LoRA's arithmetic without torch: the alpha rules, peft's arguments, the arm names.

Torch-free on purpose: the scenario module and its figures read these while the page draws,
and the UI process never imports torch. `engines.supervised.lora` trains with the same rules.
"""
import math
from typing import Literal

WIDTH = 64          # d_in = d_out of every Linear of the base model
LAYERS = ("fc1", "fc2")
FULL = "full"       # the full fine-tune's arm

AlphaRule = Literal["alpha = 2r", "alpha = 8 fixed", "rsLoRA alpha = 4"]
# lora_alpha as a function of r, and whether peft divides by √r instead of r. All three
# give the same scale s = 2 at r = 4, so they differ only in how s moves with r.
ALPHA_RULES: dict[str, tuple[str, bool]] = {
    "alpha = 2r": ("2r", False),          # s = 2 at every rank: the sweep compares like with like
    "alpha = 8 fixed": ("8", False),      # s = 8/r: each direction's update shrinks as r grows
    "rsLoRA alpha = 4": ("4", True),      # s = 4/√r: rank-stabilized (Kalajdzievski 2023)
}


def lora_kwargs(rank: int, alpha_rule: str, targets: tuple[str, ...]) -> dict:
    """The LoraConfig arguments for one arm (also what the peft snippet shows)."""
    alpha, rslora = ALPHA_RULES[alpha_rule]
    lora_alpha = 2 * rank if alpha == "2r" else int(alpha)
    kwargs = {"r": rank, "lora_alpha": lora_alpha, "target_modules": list(targets), "lora_dropout": 0.0, "bias": "none"}
    if rslora:
        kwargs["use_rslora"] = True
    return kwargs


def lora_scale(rank: int, alpha_rule: str) -> float:
    """s in ΔW = s·B A: lora_alpha / r, or lora_alpha / √r under rsLoRA (peft's rule)."""
    kwargs = lora_kwargs(rank, alpha_rule, ())
    return kwargs["lora_alpha"] / (math.sqrt(rank) if kwargs.get("use_rslora") else rank)


def peft_snippet(ranks: tuple[int, ...], alpha_rule: str, targets: tuple[str, ...]) -> str:
    """The peft code that builds every arm of a sweep, written from the same `lora_kwargs` the run uses."""
    kwargs = {key: repr(value) for key, value in lora_kwargs(ranks[0], alpha_rule, targets).items()}
    kwargs["r"] = "r"
    if ALPHA_RULES[alpha_rule][0] == "2r":
        kwargs["lora_alpha"] = "2 * r"
    args = ", ".join(f"{key}={value}" for key, value in kwargs.items())
    return ("from peft import LoraConfig, get_peft_model\n\n"
            f"for r in {ranks}:\n"
            f"    config = LoraConfig({args})\n"
            "    model = get_peft_model(copy.deepcopy(base), config)  # base: fc1 -> tanh -> fc2, frozen\n"
            "    model.print_trainable_parameters()  # r·(d_in + d_out) per adapted Linear")


def arm_name(rank: int | None) -> str:
    return FULL if rank is None else f"r={rank}"


def comparison_ranks(ranks: tuple[int, ...], k: int) -> tuple[int, int] | None:
    """The pair whose A matrices Eq. 4 compares: the smallest rank ≥ k (else the smallest) and the largest."""
    ordered = sorted(set(ranks))
    if len(ordered) < 2:
        return None
    small = next((r for r in ordered if r >= k), ordered[0])
    return (small, ordered[-1]) if small != ordered[-1] else (ordered[0], ordered[-1])
