"""FlashAttention, and a softmax that does not overflow.

Standard attention writes the N × N scores and their softmax to the GPU's main memory (HBM) and
reads them back, forward and again backward: Θ(Nd + N²) elements moved, and N² numbers held for
backward. FlashAttention (Dao et al. 2022) computes the same softmax(QKᵀ/√d)V one tile at a time
in on-chip SRAM of M elements, with an online softmax: a running row maximum, a running row sum
and an output rescaled whenever the maximum moves. It keeps only the row logsumexp for backward,
which recomputes each tile's probabilities from Q, K and it: Θ(N²d²/M) elements moved.

Here the tiled algorithm is written in PyTorch, forward and backward (engines/sequence/
flash_attention.py), and checked in float64 against the explicit form and torch's
`scaled_dot_product_attention`. The paper's IO model counts the HBM bytes of both ways against the
SRAM size; at its GPT-2 medium setting (N = 1024, d = 64, M = 192 KiB, fp16) the count gives
6.2× fewer bytes, 10.4× against a baseline that also runs a mask and a dropout over the N × N
matrices as the paper's PyTorch one did (it measured 40.3 → 4.4 GB, 9.2×). PyTorch's MemTracker
measures the peak memory of both implementations against N on this CPU: at the defaults the N × N
matrices make the standard one grow 3.5–4× per doubling of N, the tiled one under 2×. The speed FlashAttention is
known for comes from a fused GPU kernel: on CUDA, SDPA's flash, memory-efficient and math kernels
are timed; on a CPU that figure stays empty (bench/gpu_checks_flash.py runs them on a GPU).

The running maximum is also why a softmax does not overflow: e^x is inf past ln(max) of the float
format (float16 11.09, bfloat16 and float32 88.72, float64 709.78), so the naive e^x/Σe^x gives
NaN there, while the shifted e^{x − m}/Σe^{x − m} never exponentiates above 0.

Look at the HBM bytes and their ratio against M, the two memory curves, the float64 differences
(1e-16 is rounding), where each format's naive softmax breaks, and logsumexp's error per format: the
shifted form at the format's own rounding, the naive one the same until it overflows.
"""
import math

from pydantic import Field, model_validator

from scenarios.base import Arm, Scenario, ScenarioConfig, Work, in_turn, shown_by, together
from scenarios.explanation import Explanation
from scenarios.flash_attention import claims, figures as look
from scenarios.flash_attention.figures import CUDA, DTYPES, EXACT, IO, STANDARD, TILED
from scenarios.plotting import Figures
from scenarios.records import Records


class Config(ScenarioConfig):
    seq_len: int = Field(1024, ge=256, le=2048, description="N: the sequence length of the IO model, of the float64 "
                                                            "check, and the longest of the memory sweep (128, 256, … N).")
    head_dim: int = Field(64, ge=16, le=256, description="d: the size of each query, key and value vector (GPT-2: 64).")
    block_size: int = Field(128, ge=16, le=1024, description="Rows and columns of one tile of the PyTorch tiled "
                                                             "attention (the check and the memory sweep).")
    sram_kib: int = Field(192, title="SRAM M (KiB)", ge=16, le=1024, description="M, the on-chip SRAM of the IO model in KiB (A100: 192 per "
                                                           "SM); the kernel's blocks are B_c = ⌈M/4d⌉ keys.")

    @model_validator(mode="after")
    def _block_fits(self) -> "Config":
        if self.block_size > self.seq_len:
            raise ValueError(f"block_size={self.block_size} is longer than the sequence (seq_len={self.seq_len}): a tile "
                             "cannot hold more rows than there are; lower block_size or raise seq_len")
        return self


class FlashAttention(Scenario):
    id = "flash-attention"
    title = "FlashAttention, and a softmax that does not overflow"
    order = 37
    topic = "Architecture"
    picture = "hbm_traffic"
    counted = ()  # it measures (its steps are N, positions, logits): nothing trains
    question = "How does tiled attention give the exact softmax(QKᵀ/√d)V while moving far fewer bytes, and why does it not overflow?"
    terms = {
        "Scaled dot-product attention": shown_by("exactness", "err/out_vs_explicit", "err/out_vs_sdpa", arm=EXACT,
                                                 how="the tiled O against softmax(QKᵀ/√d)V and torch's SDPA, float64"),
        "Causal mask": shown_by("exactness", "causal", "err/grad_q", arm=EXACT, how="the same identities with the look-ahead masked"),
        "Softmax": shown_by("overflow", "nan/naive_softmax", "first_nan/naive_softmax", arm="float16",
                            how="naive e^x/Σe^x against the max-shifted form, per float format"),
        "NaN (Not a Number)": shown_by("overflow", "first_nan/naive_softmax", arm="float32",
                                       how="inf/inf once e^x overflows: the first NaN, found exactly"),
    }
    methods = {"FlashAttention": shown_by("hbm_traffic", "hbm_bytes/tiled", "hbm_bytes/standard", arm=IO, partial=True,
                                          how="exact tiled attention, its HBM traffic by the paper's IO model and its "
                                              "measured memory; the speed only where CUDA is there")}
    formula = (r"\begin{aligned}m' &= \max(m, \operatorname{rowmax} S_j),\quad "
               r"\ell' = e^{m-m'}\ell + \operatorname{rowsum} e^{S_j-m'},\quad "
               r"O' = e^{m-m'}O + e^{S_j-m'}V_j,\quad L = m + \ln \ell\\"
               r"\text{HBM: standard } &\Theta(Nd + N^2),\qquad \text{tiled } \Theta\!\left(\frac{N^2 d^2}{M}\right),"
               r"\qquad B_c = \left\lceil \frac{M}{4d} \right\rceil\end{aligned}")
    Config = Config
    tiny = {"seq_len": 256, "head_dim": 16, "block_size": 64}
    tiny_space = {"seq_len": [256, 300], "block_size": [64, 128]}
    presets = {
        "the paper's GPT-2 medium setting": {"seq_len": 1024, "head_dim": 64, "sram_kib": 192},
        "a small SRAM": {"sram_kib": 32},
        "long sequences": {"seq_len": 2048, "block_size": 256},
        "wide heads (d = 128)": {"head_dim": 128},
    }
    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-05, rates_reference beside them):
    rates = {"check_tiles": 0.00212, "run": 0.085, "scores": 1.31e-09}
    rates_reference = 0.1748  # the reference workload's CPU s beside the fit
    timed = ({"seq_len": 512, "block_size": 64}, {"seq_len": 1024, "block_size": 256, "head_dim": 128},
             {"seq_len": 2048, "block_size": 512})

    def phases(self, config: Config) -> list[list[Arm]]:
        import torch
        from engines.numerics.softmax_overflow import GRID, overflow_records
        from engines.sequence import flash_measure as measure
        n, d, block = config.seq_len, config.head_dim, config.block_size
        lengths = measure.lengths(n)
        phases = in_turn(Arm(IO, measure.io_records(n, d, config.sram_kib), len(measure.SRAM_KIB_GRID) + 1, cost=0.01))
        phases += together(*(Arm(dtype, overflow_records(dtype), GRID[2], cost=0.05) for dtype in DTYPES))
        phases += in_turn(Arm(EXACT, measure.exactness_records(n, d, block, config.seed), 2, cost=tiles(n, block)))
        phases += together(Arm(STANDARD, measure.memory_records("standard", n, d, block, config.seed), len(lengths), cost=1),
                           Arm(TILED, measure.memory_records("tiled", n, d, block, config.seed), len(lengths),
                               cost=tiles(n, block) / 4))
        if torch.cuda.is_available():
            phases += in_turn(Arm(CUDA, measure.cuda_records(n, d), len(measure.lengths(max(n, 4096)))))
        return phases

    def arm_universe(self) -> list[str]:
        return [IO, *DTYPES, EXACT, STANDARD, TILED, CUDA]

    def work(self, config: Config) -> Work:
        """The float64 check (tiled forward + backward, twice: masked and not; the explicit form's N × N
        scores), then the memory sweep under MemTracker up to N (its tiles dominate); the IO model and
        the softmax grid are near free."""
        n, block = config.seq_len, config.block_size
        return Work({"check_tiles": 2 * tiles(n, block), "tracked_tiles": sum(tiles(m, block) for m in _lengths(n)),
                     "scores": 2 * 2 * n * n * config.head_dim + sum(m * m * config.head_dim for m in _lengths(n))},
                    floats=8 * n * n + 16 * n * config.head_dim)

    def summarize(self, frame, config: Config) -> dict:
        records = Records(frame)
        ratio = claims.io_ratio("standard", config.sram_kib)(records)
        return {"headline": {"IO model: standard ÷ tiled HBM bytes": ratio,
                             "float64: largest |tiled − explicit|": claims.largest_error(("out_vs_explicit", "lse"))(records),
                             f"peak bytes at N = {config.seq_len}, standard": records.at(STANDARD, "peak_bytes", config.seq_len),
                             f"peak bytes at N = {config.seq_len}, tiled": records.at(TILED, "peak_bytes", config.seq_len),
                             "float16: first NaN of the naive softmax": records.last("float16", "first_nan/naive_softmax")}}

    def explain(self, frame, config: Config) -> Explanation:
        records = Records(frame)
        sentences = [s for s in (claims.io_sentence(records, config.sram_kib), claims.overflow_sentence(records),
                                 claims.exactness_sentence(records), claims.memory_sentence(records),
                                 claims.cuda_sentence(records)) if s is not None]
        if not sentences:
            return Explanation(waiting="Run to count the HBM bytes, check the tiled attention and measure its memory.")
        return Explanation(sentences[0], tuple(sentences[1:]))

    def figures(self, frame, config: Config) -> Figures:
        records = Records(frame)
        return Figures({
            "hbm_traffic": lambda: look.io_figure(records, config.sram_kib, config.seq_len, config.head_dim),
            "hbm_ratio": lambda: look.io_ratio_figure(records, config.sram_kib),
            "overflow": lambda: look.overflow_figure(records),
            "lse_error": lambda: look.lse_error_figure(records),
            "exactness": lambda: look.exactness_figure(records),
            "peak_memory": lambda: look.memory_figure(records, config.block_size),
            "cuda_kernels": lambda: look.cuda_figure(records),
        })


def tiles(n: int, block: int) -> int:
    return math.ceil(n / block) ** 2


def _lengths(n: int) -> list[int]:
    return [*(128 * 2 ** p for p in range(12) if 128 * 2 ** p < n), n]  # engines.sequence.flash_measure.lengths
