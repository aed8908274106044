"""QLoRA on the tiny LM: a pretrained base, frozen and stored in NF4, fine-tuned through LoRA adapters.

`Study` holds what the arms share. `pretrain` trains one byte-level TinyLM (engines.sequence.lm)
on prose (the standard-library docstrings of engines.sequence.text), its Linear weights drawn
from N(0, 1/(3·fan_in)) (the variance of PyTorch's default uniform init) so that, as in the
large models QLoRA was made for, the weights are bell-shaped. Then three arms fine-tune a copy
of it on a shifted task, next-byte prediction on the symbol lines of
engines.sequence.pretrain_finetune (each line one topic's own symbols and chain), from the same
batches:

- `full fine-tune`: every parameter trained by AdamW;
- `LoRA, fp32 base`: the base frozen in float32, peft LoRA adapters s·B A on every Linear (the
  blocks' W_QKV, W_O, the MLP's up and down, and the read-out);
- `QLoRA, NF4 base`: the same adapters on the same base, whose block Linears are stored as NF4
  codes with double-quantized constants (engines.numerics.nf4) and dequantized at every forward.
  The embeddings, norms, biases and the read-out's weight stay float32 (transformers leaves the
  output layer unquantized too).

Logged per arm: held-out bits per byte of the target text and of the prose. After its last step
an arm adds its memory in bits per base parameter, by category, each counted from the tensors
the arm holds (`numel · element_size`): the base's block Linear weights (float32, or 4-bit codes
packed two per byte), the quantization constants (with double quantization, and the float32
absmax they replaced), the rest of the base, the adapters, the gradients and AdamW's state. The
QLoRA arm adds the relative error ‖ŵ − w‖²/‖w‖² of NF4 and of int4 absmax at block sizes
32 … 256: on the base's weights, on N(0, 1) draws and on uniform draws of the same count.
"""
import copy
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import train
from engines.numerics import nf4
from engines.sequence.lm import LMSpec, TinyLM, WindowBatches, lm_arm, next_token_objective
from engines.sequence.pretrain_finetune import (BETAS, CONTEXT, D_MODEL, HEADS, LAYERS, LM_BATCH, bits_per_byte,
                                                domain, prose_bytes)

PRE, FULL, LORA, QLORA = "pretraining", "full fine-tune", "LoRA, fp32 base", "QLoRA, NF4 base"
ARMS = (FULL, LORA, QLORA)
QUANTIZED = ("qkv", "out", "up", "down")  # every Linear inside the blocks: stored in NF4 by the QLoRA arm
ERROR_BLOCKS = (32, 64, 128, 256)
SOURCES = ("base", "normal", "uniform")
CATEGORIES = ("linear_weights", "constants", "rest_of_base", "adapters", "gradients", "optimizer")
TOPICS, BRANCHING, PER_TOPIC = 4, 3, 23


@dataclass(frozen=True)
class Setup:
    rank: int
    alpha: float
    block: int
    second_block: int
    steps: int
    lr: float        # the adapters' AdamW rate
    full_lr: float   # the full fine-tune's
    log_every: int


def normal_init(model: TinyLM, seed: int) -> TinyLM:
    """Every Linear weight from N(0, 1/(3·fan_in)), from a local generator: bell-shaped, as NF4 assumes."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                module.weight.normal_(0.0, 1 / math.sqrt(3 * module.in_features), generator=generator)
    return model


def block_linears(model: nn.Module) -> dict[str, nn.Linear]:
    """The Linears inside the blocks (W_QKV, W_O, up, down): what QLoRA quantizes."""
    return {name: module for name, module in model.named_modules()
            if isinstance(module, nn.Linear) and name.split(".")[-1] in QUANTIZED and name.startswith("blocks.")}


def add_adapters(model: nn.Module, rank: int, alpha: float, seed: int) -> nn.Module:
    """peft LoRA on every Linear (the blocks' and the read-out); A re-drawn from a local generator with
    peft's own law, B = 0."""
    from peft import LoraConfig, get_peft_model  # ~4 s to import: only when an adapter arm runs
    names = [*block_linears(model), "head"]
    wrapped = get_peft_model(model, LoraConfig(r=rank, lora_alpha=alpha, target_modules=names, lora_dropout=0.0,
                                               bias="none"))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name in names:
            a = wrapped.get_submodule(f"base_model.model.{name}").lora_A["default"].weight
            nn.init.kaiming_uniform_(a, a=math.sqrt(5), generator=generator)
    return wrapped


_LINEAR = re.compile(rf"\.({'|'.join(QUANTIZED)})(\.base_layer)?\.weight$|parametrizations\.weight\.original0$")
_CONSTANT = re.compile(r"parametrizations\.weight\.original[1-9]$")


def category_of(name: str) -> str:
    if "lora_" in name:
        return "adapters"
    if _CONSTANT.search(name):
        return "constants"
    return "linear_weights" if _LINEAR.search(name) else "rest_of_base"


def tensor_bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def memory_bits(model: nn.Module, optimizer: torch.optim.Optimizer, base_params: int) -> dict[str, float]:
    """Bits per base parameter by category, from the tensors the arm holds after its last step."""
    counted = dict.fromkeys(CATEGORIES, 0)
    for name, p in model.named_parameters():
        counted[category_of(name)] += tensor_bytes(p)
        if p.grad is not None:
            counted["gradients"] += tensor_bytes(p.grad)
    for state in optimizer.state.values():
        counted["optimizer"] += sum(tensor_bytes(v) for v in state.values() if isinstance(v, torch.Tensor))
    return {f"mem_bits/{k}": 8 * v / base_params for k, v in counted.items()}


def error_table(weights: list[torch.Tensor], seed: int) -> dict[str, float]:
    """Relative error of NF4 and int4 absmax at each block size: the base's weights (each tensor in its
    own blocks, errors summed), and N(0, 1) and U(−1, 1) draws of the same count."""
    count = sum(w.numel() for w in weights)
    generator = torch.Generator().manual_seed(seed)
    samples = {"base": weights, "normal": [torch.randn(count, generator=generator)],
               "uniform": [torch.rand(count, generator=generator) * 2 - 1]}
    table = {}
    for source, tensors in samples.items():
        energy = sum(float(t.pow(2).sum()) for t in tensors)
        for block in ERROR_BLOCKS:
            for code, roundtrip in (("nf4", nf4.nf4_roundtrip), ("int4", nf4.int4_absmax)):
                noise = sum(float((roundtrip(t, block) - t).pow(2).sum()) for t in tensors)
                table[f"qerr/{source}/{code}/block_{block}"] = noise / energy
    return table


def code_and_histogram(weights: list[torch.Tensor], block: int, bins: int = 40) -> dict[str, float]:
    """The 16 NF4 values, int4's 15 levels k/7, and the share of the weights' w / absmax (blocks of `block`) per bin."""
    scaled = []
    for w in weights:
        blocks = nf4.blocks_of(w.flatten(), block)
        scaled.append((blocks / blocks.abs().amax(1, keepdim=True).clamp_min(1e-12)).flatten()[: w.numel()])
    scaled = torch.cat(scaled)
    counts = torch.histc(scaled, bins=bins, min=-1.0, max=1.0)
    table = {f"hist/bin_{i:02d}": float(c) / len(scaled) for i, c in enumerate(counts.tolist())}
    table.update({f"code/nf4/index_{i:02d}": v for i, v in enumerate(nf4.nf4_code().tolist())})
    levels = torch.arange(-nf4.INT4_LEVELS, nf4.INT4_LEVELS + 1, dtype=torch.float64) / nf4.INT4_LEVELS
    table.update({f"code/int4/index_{i:02d}": v for i, v in enumerate(levels.tolist())})
    return table


class Study:
    """The pretrained base (set by `pretrain`) and the data every arm shares."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.prose_train, self.prose_held = prose_bytes()
        self.domain = domain(TOPICS, BRANCHING, PER_TOPIC, 100, seed)
        self.base: TinyLM | None = None

    def measures(self, model: nn.Module):
        def on_log(step: int) -> dict[str, float]:
            return {"domain_bpb": bits_per_byte(model, self.domain.held_out),
                    "prose_bpb": bits_per_byte(model, self.prose_held)}
        return on_log

    def pretrain(self, steps: int, lr: float, log_every: int) -> Iterator[StepRecord | Diverged | None]:
        model = normal_init(TinyLM(LMSpec(256, CONTEXT, D_MODEL, LAYERS, HEADS, seed=self.seed)), self.seed + 11)
        batches = WindowBatches(self.prose_train, CONTEXT, LM_BATCH, self.seed + 1)
        yield from lm_arm(model, batches, steps, lr=lr, log_every=log_every, on_log=self.measures(model), probe=False)
        self.base = model

    def finetune(self, arm: str, setup: Setup) -> Iterator[StepRecord | Diverged | None]:
        """One arm on the target text: `steps` AdamW steps, then one record of its memory (and the errors)."""
        model: nn.Module = copy.deepcopy(self.base)
        base_params = sum(p.numel() for p in self.base.parameters())
        extra: dict[str, float] = {}
        if arm != FULL:
            model.requires_grad_(False)
            if arm == QLORA:
                linears = block_linears(model)
                weights = [layer.weight.detach().clone() for layer in linears.values()]
                quantizers = [nf4.quantize_linear(layer, setup.block, setup.second_block) for layer in linears.values()]
                extra["mem_bits/constants_no_dq"] = 8 * sum(q.absmax_bytes for q in quantizers) / base_params
                extra["qerr/base/nf4_dq/run_block"] = (sum(float((layer.weight - w).pow(2).sum())
                                                       for layer, w in zip(linears.values(), weights))
                                                       / sum(float(w.pow(2).sum()) for w in weights))
                extra.update(error_table(weights, self.seed + 12))
                extra.update(code_and_histogram(weights, setup.block))
                extra["quantized_params"] = float(sum(w.numel() for w in weights))
            model = add_adapters(model, setup.rank, setup.alpha, self.seed + 13)
        trainable = [p for p in model.parameters() if p.requires_grad]
        lr = setup.full_lr if arm == FULL else setup.lr
        optimizer = torch.optim.AdamW(trainable, lr=lr, betas=BETAS, weight_decay=0.0, foreach=True)
        batches = WindowBatches(self.domain.train, CONTEXT, LM_BATCH, self.seed + 2)
        for item in train(model, optimizer, batches, next_token_objective(model), setup.steps,
                          log_every=setup.log_every, on_log=self.measures(model)):
            yield item
            if isinstance(item, Diverged):
                return
        extra.update(memory_bits(model, optimizer, base_params))
        extra.update({"base_params": float(base_params), "trainable_params": float(sum(p.numel() for p in trainable))})
        yield StepRecord(setup.steps - 1, extra)
