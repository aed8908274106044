"""QLoRA: how much memory does a 4-bit NormalFloat base save, and what does it cost the fine-tune?

A byte-level tiny LM (2 blocks, d_model 32) is pretrained on prose, its weights drawn bell-shaped as
large models' are. Three arms then fine-tune it on a shifted task, next-byte prediction on lines of
symbols, from the same batches: a **full fine-tune** (AdamW on every parameter), **LoRA** (peft's
adapters s·B A on every Linear, the blocks' and the read-out's; the base frozen in float32) and
**QLoRA** (the same adapters; the frozen block Linears stored in NF4 and dequantized at every
forward; embeddings, norms, biases and the read-out stay float32).

**NF4** (Dettmers et al. 2023) is a 4-bit code whose 16 values sit at quantiles of N(0, 1): 8
positive, 7 negative and an exact zero, divided by the largest to span [−1, 1]. Weights are cut
into blocks of n weights (the block size, 64); each keeps its absmax c in float32 and each weight the
nearest code value of w/c: 4 bits plus 32/n. **Double quantization** stores the constants as 8-bit
codes in blocks of n₂ (256), 8/n + 32/(n·n₂) bits: 0.127 instead of 0.5 at the paper's sizes. **int4
absmax** at the same bits and block rounds w/c onto 15 evenly spaced levels. (B is LoRA's up-projection
in s·B A, zero at the start; the block size is n.)

Look at: the memory chart (bits per base parameter, counted from each arm's tensors: gradients and
AdamW's two moments make the full fine-tune's 128 bits of float32 state per weight); the loss gap
between QLoRA and LoRA against the gap to the full fine-tune; the code chart (NF4's ticks crowd where
the weights are); and the error chart: NF4 beats int4 on bell-shaped data, int4 wins on uniform data.
"""
from typing import Literal

from pydantic import Field

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, in_turn, shown_by, together
from scenarios.cost import logs
from scenarios.explanation import Explanation
from scenarios.plotting import Figures, arm_colors
from scenarios.qlora import claims
from scenarios.qlora import figures as look
from scenarios.qlora.figures import ARMS, FULL, LORA, PRE, QLORA
from scenarios.records import Records


class Config(ScenarioConfig):
    pretrain_steps: int = Field(150, ge=20, le=2000, description="AdamW steps of next-byte pretraining on the prose "
                                                                 "(16 windows of 32 bytes each).")
    steps: int = Field(120, ge=10, le=2000, description="Fine-tuning steps of each arm on the target text.")
    rank: int = Field(8, ge=1, le=32, description="r: LoRA's rank on every Linear (both adapter arms).")
    alpha: float = Field(16.0, ge=1.0, le=128.0, description="lora_alpha: peft scales B·A by s = alpha / r.")
    block_size: Literal[32, 64, 128, 256] = Field(
        64, description="n: weights per absmax constant, the block size (QLoRA: 64).")
    second_block: Literal[64, 128, 256, 512, 1024] = Field(
        256, description="n₂: absmax constants per float32 scale of the double quantization (QLoRA: 256).")
    lr: float = Field(3e-2, ge=1e-4, le=5e-2, json_schema_extra={"scale": "log"},
                      description="AdamW rate of the adapters (LoRA and QLoRA).")
    full_lr: float = Field(3e-3, ge=1e-4, le=3e-2, json_schema_extra={"scale": "log"},
                           description="AdamW rate of the full fine-tune.")
    pretrain_lr: float = Field(1e-2, ge=1e-4, le=3e-2, json_schema_extra={"scale": "log"},
                               description="AdamW rate of the pretraining.")


class QLoRA(Scenario):
    id = "qlora"
    title = "QLoRA: a 4-bit NormalFloat base under LoRA"
    order = 41
    topic = "Fine-tuning & compression"
    picture = "memory"
    question = "How much memory does a 4-bit NormalFloat base save under LoRA, and what does it cost the fine-tune?"
    arms_note = ("Pretraining runs first; then the three fine-tunes train side by side as separate copies of the "
                 "pretrained model, on the same batches.")
    terms = {
        "QLoRA": shown_by("memory", "mem_bits/constants", "mem_bits/linear_weights", arm=QLORA,
                          how="a frozen NF4 base with double-quantized constants under LoRA adapters: memory and loss"),
        "LoRA": shown_by("loss", "domain_bpb", "mem_bits/adapters", arm=LORA,
                         how="peft adapters on the frozen block Linears against a full fine-tune"),
        "Quantization": shown_by("quant_error", "qerr/", arm=QLORA,
                                 how="4-bit NF4 and int4 absmax, blockwise: the relative error by block size"),
        "Fine-tuning": shown_by("loss", "domain_bpb", arm=FULL, how="a pretrained LM trained further on a shifted task"),
        "Bits per byte": shown_by("loss", "domain_bpb", "prose_bpb", arm=QLORA, how="the held-out loss of every arm"),
    }
    formula = (r"\begin{aligned}\text{NF4: } q_i &= \tfrac{\Phi^{-1}(p_i)}{\Phi^{-1}(1-\delta)},\ "
               r"p_i \in \{\tfrac12 \ldots 1-\delta\}\ (8 \text{ positive}, 7 \text{ negative}, 0),\ "
               r"\delta = \tfrac12\big(\tfrac1{32} + \tfrac1{30}\big)\\"
               r"\hat w &= c \cdot q_{\,\arg\min_i |w/c - q_i|},\quad c = \max_{w \in \text{block}} |w|\\"
               r"\text{constants: } &\tfrac{32}{n} \;\to\; \tfrac{8}{n} + \tfrac{32}{n\,n_2}"
               r"\quad(\text{block size } n = 64,\ n_2 = 256:\ 0.5 \to 0.127 \text{ bits per weight})\\"
               r"h &= \hat W x + s\,B A x,\quad s = \alpha / r\end{aligned}")
    Config = Config
    tiny = {"pretrain_steps": 20, "steps": 10}
    presets = {
        "the paper's sizes (block size 64, n₂ = 256)": {"block_size": 64, "second_block": 256},
        "big blocks (block size 256): fewer constants, more error": {"block_size": 256},
        "rank 1 adapters": {"rank": 1, "alpha": 2.0},
        "a longer fine-tune": {"steps": 400},
    }

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-05 08:15, rates_reference beside them):
    rates = {"lm_steps": 0.00679, "logs": 0.00741, "run": 0.0724}
    rates_reference = 0.1417  # the reference workload's CPU s beside the fit
    timed = ({"pretrain_steps": 100, "steps": 20}, {"pretrain_steps": 20, "steps": 80},
             {"pretrain_steps": 40, "steps": 40, "block_size": 32})

    def phases(self, config: Config) -> list[list[Arm]]:
        from engines.loop.training import log_every_for
        from engines.sequence.qlora import Setup, Study
        study = Study(config.seed)
        setup = Setup(config.rank, config.alpha, config.block_size, config.second_block, config.steps, config.lr,
                      config.full_lr, log_every_for(config.steps, 20))
        pre = Arm(PRE, study.pretrain(config.pretrain_steps, config.pretrain_lr, log_every_for(config.pretrain_steps, 20)),
                  config.pretrain_steps, needed=True)
        arms = [Arm(arm, study.finetune(arm, setup), config.steps + 1, cost=1.0 if arm == FULL else 1.5) for arm in ARMS]
        return in_turn(pre) + together(*arms)

    def snippet(self, config: Config) -> str:
        """The same arm with the libraries on a Hugging Face model (bitsandbytes fixes block size 64 and n₂ = 256)."""
        return ("import torch\nfrom transformers import AutoModelForCausalLM, BitsAndBytesConfig\n"
                "from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training\n\n"
                "quantized = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=\"nf4\",\n"
                "                               bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16)\n"
                "model = AutoModelForCausalLM.from_pretrained(name, quantization_config=quantized)\n"
                "model = prepare_model_for_kbit_training(model)\n"
                f"model = get_peft_model(model, LoraConfig(r={config.rank}, lora_alpha={config.alpha:g}, "
                "target_modules=\"all-linear\", lora_dropout=0.0))\n"
                "# all-linear leaves out the output layer; this page adapts the tiny LM's read-out too\n"
                "# here: engines.numerics.nf4 writes the NF4 code, the blocks and the double quantization by hand")

    def arm_universe(self) -> list[str]:
        return [PRE, *ARMS]

    def work(self, config: Config) -> Work:
        """Pretraining and three fine-tunes of 16 × 32 bytes a step; each log scores held-out prose and target text."""
        counted = logs(config.pretrain_steps, 20) + 3 * logs(config.steps, 20)
        return Work({"lm_steps": config.pretrain_steps + 3 * config.steps, "logs": counted, "run": 1},
                    floats=4 * 45_000 * 8 + 32 * 32 * 256 * 6)

    def summarize(self, frame, config: Config) -> dict:
        records = Records(frame)
        final = {arm: records.last(arm, "domain_bpb") for arm in ARMS}
        memory = {bar: sum(row.values()) for bar, row in look.memory_rows(records).items()}
        b = config.block_size
        return {"headline": {**{f"target bits per byte, {arm}": final[arm] for arm in ARMS},
                             **{f"bits per base parameter, {bar}": bits for bar, bits in memory.items()},
                             f"NF4 relative error, base weights, block size {b}": records.last(QLORA, f"qerr/base/nf4/block_{b}"),
                             f"int4 relative error, base weights, block size {b}": records.last(QLORA, f"qerr/base/int4/block_{b}")},
                "domain_bpb": final, "memory_bits": memory,
                "memory_by_category": look.memory_rows(records)}

    def explain(self, frame, config: Config) -> Explanation:
        records = Records(frame)
        b = config.block_size
        sentences = [s for s in (claims.loss_sentence(records), claims.memory_sentence(records),
                                 claims.constants_sentence(records, b, config.second_block),
                                 claims.error_sentence(records, "base", "the base's block Linear weights", b),
                                 claims.error_sentence(records, "normal", "N(0, 1) draws of the same count", b),
                                 claims.error_sentence(records, "uniform", "uniform draws of the same count", b),
                                 claims.start_sentence(records), claims.pretrain_sentence(records),
                                 claims.forgetting_sentence(records)) if s is not None]
        if not sentences:
            return Explanation(waiting="Run to pretrain the tiny LM, then fine-tune it three ways: fully, with LoRA, "
                                       "and with LoRA on its NF4-quantized copy.")
        return Explanation(sentences[0], tuple(sentences[1:]))

    def figures(self, frame, config: Config) -> Figures:
        records = Records(frame)
        colors = arm_colors(self.arm_universe(), self.arm_universe())
        return Figures({  # pretraining first: the chart that has points from the run's first second
            "prose": lambda: look.prose_figure(records, colors),
            "memory": lambda: look.memory_figure(records),
            "constants": lambda: look.constants_figure(records, config.block_size, config.second_block),
            "loss": lambda: look.loss_figure(records, colors),
            "gap": lambda: look.gap_figure(records, colors),
            "quant_error": lambda: look.error_figure(records),
            "code": lambda: look.code_figure(records),
        })
