"""LoRA on our own small modules: a rank sweep against a task of known intrinsic rank.

The base model is a frozen two-layer MLP (`fc1 -> tanh -> fc2`, width 64). The task is
the base model with every Linear shifted by a rank-k update ΔW* = σ·U Vᵀ (U, V with k
orthonormal columns): fine-tuning has to find ΔW*, and ΔW* has exactly k directions.

LoRA (Hu et al., ICLR 2022) learns ΔW = s·B A with B (d_out × r) and A (r × d_in), via
peft's `LoraConfig` / `get_peft_model` on these very modules:
- A starts like an `nn.Linear` weight, B at 0, so the adapted model equals the base at
  init (exactly);
- s = lora_alpha / r, or lora_alpha / √r with `use_rslora` (Kalajdzievski 2023);
- trainable parameters per adapted Linear: r·(d_in + d_out); rank(ΔW) ≤ r.

A full fine-tune of the same weights is the reference arm, and the singular values of its
ΔW show the low-rank hypothesis directly. Hu et al.'s Eq. 4 compares what two ranks
learned: φ(A_i, A_j; p, q) = ‖U_iᵀ[:p] U_j[:, :q]‖_F² / min(p, q) ∈ [0, 1] with U the
right singular vectors of A.

Everything crosses the boundary as floats: `sweep()` yields `ArmRecord`s.
"""
import copy
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn
from torch.nn import functional as F

from engines.models import init_linear
from engines.training import Diverged, train

WIDTH = 64          # d_in = d_out of every Linear
SHIFT_SIZE = 1.0    # σ: each singular value of the task's ΔW* (‖W‖₂ of the base is ≈ 1.1)
BATCH = 128
EVAL_SAMPLES = 2048
LAYERS = ("fc1", "fc2")
FULL = "full"

AlphaRule = Literal["alpha = 2r", "alpha = 8 fixed", "rsLoRA alpha = 4"]
# lora_alpha as a function of r, and whether peft divides by √r instead of r. All three
# give the same scale s = 2 at r = 4, so they differ only in how s moves with r.
ALPHA_RULES: dict[str, tuple[str, bool]] = {
    "alpha = 2r": ("2r", False),          # s = 2 at every rank: the sweep compares like with like
    "alpha = 8 fixed": ("8", False),      # s = 8/r: each direction's update shrinks as r grows
    "rsLoRA alpha = 4": ("4", True),      # s = 4/√r: rank-stabilized (Kalajdzievski 2023)
}


class FrozenBase(nn.Module):
    """The 'pretrained' model: fc1 -> tanh -> fc2, seeded from a local generator."""

    def __init__(self, seed: int, width: int = WIDTH) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, width)
        self.act = nn.Tanh()
        self.fc2 = nn.Linear(width, width)
        generator = torch.Generator().manual_seed(seed)
        for layer in (self.fc1, self.fc2):
            init_linear(layer, "pytorch-default", generator)
        self.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))  # (batch, width)


class LowRankShiftTask:
    """Inputs x ~ N(0, I); targets from the base with each Linear shifted by ΔW* = σ·U Vᵀ of rank k."""

    def __init__(self, base: FrozenBase, k: int, seed: int) -> None:
        self.generator = torch.Generator().manual_seed(seed)
        self.teacher = copy.deepcopy(base)
        self.shifts: dict[str, torch.Tensor] = {}
        width = base.fc1.in_features
        for name in LAYERS:
            u, _ = torch.linalg.qr(torch.randn(width, k, generator=self.generator))  # (d_out, k) orthonormal
            v, _ = torch.linalg.qr(torch.randn(width, k, generator=self.generator))  # (d_in, k) orthonormal
            self.shifts[name] = SHIFT_SIZE * u @ v.T  # (d_out, d_in), singular values all σ
            getattr(self.teacher, name).weight.add_(self.shifts[name])
        self.width = width

    def batch(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(batch_size, self.width, generator=self.generator)  # (batch, width)
        with torch.no_grad():
            return x, self.teacher(x)

    def batches(self, batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            yield self.batch(batch_size)


def lora_kwargs(rank: int, alpha_rule: str, targets: tuple[str, ...]) -> dict:
    """The LoraConfig arguments for one arm (also what the page's peft snippet shows)."""
    alpha, rslora = ALPHA_RULES[alpha_rule]
    lora_alpha = 2 * rank if alpha == "2r" else int(alpha)
    kwargs = {"r": rank, "lora_alpha": lora_alpha, "target_modules": list(targets), "lora_dropout": 0.0, "bias": "none"}
    if rslora:
        kwargs["use_rslora"] = True
    return kwargs


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


def lora_scale(rank: int, alpha_rule: str) -> float:
    """s in ΔW = s·B A: lora_alpha / r, or lora_alpha / √r under rsLoRA (peft's rule)."""
    kwargs = lora_kwargs(rank, alpha_rule, ())
    return kwargs["lora_alpha"] / (math.sqrt(rank) if kwargs.get("use_rslora") else rank)


def add_lora(base: nn.Module, rank: int, alpha_rule: str, targets: tuple[str, ...], seed: int) -> nn.Module:
    """Wrap a copy of `base` with peft LoRA adapters; A re-drawn from a local generator (peft uses the global RNG)."""
    from peft import LoraConfig, get_peft_model  # ~4 s to import: only when a LoRA arm runs

    model = get_peft_model(copy.deepcopy(base), LoraConfig(**lora_kwargs(rank, alpha_rule, targets)))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name in targets:
            layer = lora_layer(model, name)
            # Same law as peft's default (nn.Linear's kaiming_uniform_(a=√5)); B stays 0.
            nn.init.kaiming_uniform_(layer.lora_A["default"].weight, a=math.sqrt(5), generator=generator)
    return model


def lora_layer(model: nn.Module, name: str) -> nn.Module:
    return model.get_submodule(f"base_model.model.{name}")


def delta_weight(model: nn.Module, name: str) -> torch.Tensor:
    """ΔW = s·B A of one adapted Linear, (d_out, d_in)."""
    layer = lora_layer(model, name)
    a, b = layer.lora_A["default"].weight, layer.lora_B["default"].weight  # (r, d_in), (d_out, r)
    return layer.scaling["default"] * b @ a


def trainable_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def subspace_similarity(a_small: torch.Tensor, a_large: torch.Tensor) -> torch.Tensor:
    """Hu et al. Eq. 4 for every (p, q): ‖U_smallᵀ[:p] U_large[:, :q]‖_F² / min(p, q), (r_small, r_large)."""
    u_small = torch.linalg.svd(a_small.double(), full_matrices=False).Vh  # (r_small, d_in): right singular vectors
    u_large = torch.linalg.svd(a_large.double(), full_matrices=False).Vh  # (r_large, d_in)
    overlap = (u_small @ u_large.T) ** 2  # (r_small, r_large): squared cosines between directions
    cumulative = overlap.cumsum(0).cumsum(1)  # ‖·‖_F² of the top-left p × q block
    p = torch.arange(1, overlap.shape[0] + 1, dtype=torch.float64)[:, None]
    q = torch.arange(1, overlap.shape[1] + 1, dtype=torch.float64)[None, :]
    return cumulative / torch.minimum(p, q)


@dataclass(frozen=True)
class SweepSpec:
    k: int                      # intrinsic rank of the task's ΔW*
    ranks: tuple[int, ...]      # LoRA ranks, swept in this order
    alpha_rule: str
    targets: tuple[str, ...]    # Linear layers LoRA adapts (and the full fine-tune trains)
    steps: int
    lr: float
    seed: int
    log_every: int = 1
    full: bool = True           # include the full fine-tune reference arm


@dataclass(frozen=True)
class ArmRecord:
    arm: str
    step: int
    metrics: dict[str, float]
    done_fraction: float         # of the whole sweep, for the progress bar
    diverged: str | None = None  # the message, when this arm diverged at `step`


def arm_name(rank: int | None) -> str:
    return FULL if rank is None else f"r={rank}"


def comparison_ranks(ranks: tuple[int, ...], k: int) -> tuple[int, int] | None:
    """The pair whose A matrices Eq. 4 compares: the smallest rank ≥ k (else the smallest) and the largest."""
    ordered = sorted(set(ranks))
    if len(ordered) < 2:
        return None
    small = next((r for r in ordered if r >= k), ordered[0])
    return (small, ordered[-1]) if small != ordered[-1] else (ordered[0], ordered[-1])


def sweep(spec: SweepSpec) -> Iterator[ArmRecord]:
    """Full fine-tune first (no peft import before the first point), then each rank; rows as they come."""
    base = FrozenBase(spec.seed)
    task = LowRankShiftTask(base, spec.k, seed=spec.seed + 1)
    eval_x, eval_y = task.batch(EVAL_SAMPLES)  # held out: training batches restart from seed + 2 below
    with torch.no_grad():
        base_loss = F.mse_loss(base(eval_x), eval_y).item()
    arms: list[int | None] = ([None] if spec.full else []) + list(spec.ranks)
    pair = comparison_ranks(spec.ranks, spec.k)
    kept_a: dict[int, dict[str, torch.Tensor]] = {}
    for index, rank in enumerate(arms):
        name = arm_name(rank)
        task.generator.manual_seed(spec.seed + 2)  # every arm sees the same batches
        if rank is None:
            model = copy.deepcopy(base)
            for target in spec.targets:
                getattr(model, target).weight.requires_grad_(True)  # weights only, as LoRA's bias="none"
        else:
            model = add_lora(base, rank, spec.alpha_rule, spec.targets, seed=spec.seed * 1000 + rank)
        optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=spec.lr)
        diverged = None
        for record in train(model, optimizer, task.batches(BATCH), F.mse_loss, spec.steps,
                            log_every=spec.log_every, metric_fn=None):
            fraction = (index + (record.step + 1) / spec.steps) / len(arms)
            if isinstance(record, Diverged):
                diverged = record
                yield ArmRecord(name, record.step, {}, fraction, diverged=record.message)
                break
            yield ArmRecord(name, record.step, record.metrics, fraction)
        last = diverged.step if diverged else spec.steps - 1
        metrics = final_metrics(model, base, rank, spec, eval_x, eval_y, base_loss)
        if diverged:  # its weights say nothing; keep only what does not depend on them
            metrics = {key: metrics[key] for key in ("trainable_params", "rank", "scale")}
        yield ArmRecord(name, last, metrics, (index + 1) / len(arms))
        if rank is not None and pair and rank in pair:
            kept_a[rank] = {t: lora_layer(model, t).lora_A["default"].weight.detach().clone() for t in spec.targets}
        if pair and rank == pair[1] and pair[0] in kept_a:
            phi = similarity_metrics(kept_a[pair[0]], kept_a[pair[1]], top=min(spec.k, pair[0]))
            yield ArmRecord(name, last, phi, (index + 1) / len(arms))


@torch.no_grad()
def final_metrics(model: nn.Module, base: FrozenBase, rank: int | None, spec: SweepSpec,
                  eval_x: torch.Tensor, eval_y: torch.Tensor, base_loss: float) -> dict[str, float]:
    """Held-out loss, parameter count, and the singular values of each adapted layer's ΔW."""
    eval_loss = F.mse_loss(model(eval_x), eval_y).item()
    metrics = {
        "final/eval_loss": eval_loss,
        "final/relative_loss": eval_loss / base_loss,  # 1 = no better than the base model
        "final/base_loss": base_loss,
        "trainable_params": float(trainable_params(model)),
        "rank": float(rank if rank is not None else WIDTH),
        "scale": lora_scale(rank, spec.alpha_rule) if rank is not None else 1.0,
    }
    for target in spec.targets:
        delta = (getattr(model, target).weight - getattr(base, target).weight if rank is None
                 else delta_weight(model, target))
        singular_values = torch.linalg.svdvals(delta.double())
        energy = singular_values ** 2
        # Share of ‖ΔW‖²_F in the top k directions: 1 for an update of rank ≤ k.
        metrics[f"top_k_energy/{target}"] = (energy[: spec.k].sum() / energy.sum().clamp_min(1e-300)).item()
        for i, value in enumerate(singular_values.tolist()):
            metrics[f"delta_sv/{target}/index_{i + 1:02d}"] = value
    return metrics


def similarity_metrics(a_small: dict[str, torch.Tensor], a_large: dict[str, torch.Tensor],
                       top: int) -> dict[str, float]:
    """φ(p, q) per adapted layer (`subspace/<layer>/i_PP/j_QQ`), and φ(top, top) as `subspace_top_k/<layer>`."""
    metrics = {}
    for target, a in a_small.items():
        phi = subspace_similarity(a, a_large[target]).tolist()
        metrics[f"subspace_top_k/{target}"] = phi[top - 1][top - 1]
        for p, row in enumerate(phi):
            for q, value in enumerate(row):
                metrics[f"subspace/{target}/i_{p + 1:02d}/j_{q + 1:02d}"] = value
    return metrics
