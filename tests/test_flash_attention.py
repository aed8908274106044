"""FlashAttention: the tiled algorithm's identities in float64, the paper's IO model, measured memory,
softmax overflow per float format, and the page's claims away from the defaults."""
import math

import pytest
import torch

from engines.numerics.softmax_overflow import DTYPES, first_failure, naive_softmax, overflow_records, shifted_softmax
from engines.sequence.flash_attention import causal_mask, explicit_attention, flash_attention, tiled_forward
from engines.sequence.flash_measure import block_sizes, memory_records, standard_io, tiled_io
from scenarios import get_scenario
from scenarios.base import ConfigError
from scenarios.records import Records

SCENARIO = get_scenario("flash-attention")


def qkv(n: int, d: int, seed: int = 0, heads: int = 2) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(1, heads, n, d, generator=generator, dtype=torch.float64) for _ in range(3)]


def masked_scores(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    n = q.shape[-2]
    return scores.masked_fill(causal_mask(n, n, 0, 0, q.device), float("-inf")) if causal else scores


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n,block_q,block_k", [(100, 32, 24), (128, 64, 64), (37, 16, 40)])
def test_tiled_forward_equals_explicit_and_sdpa_in_float64(n: int, block_q: int, block_k: int, causal: bool) -> None:
    """N not a multiple of the block, blocks of different shapes, masked and not: equal to 1e-12."""
    q, k, v = qkv(n, 16)
    out, lse = tiled_forward(q, k, v, block_q, block_k, causal)
    explicit = explicit_attention(q, k, v, causal)
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    lse_ref = torch.logsumexp(masked_scores(q, k, causal), dim=-1)
    for name, error in (("explicit", (out - explicit).abs().max()), ("sdpa", (out - sdpa).abs().max()),
                        ("logsumexp", (lse - lse_ref).abs().max())):
        assert error < 1e-12, f"N={n} blocks {block_q}×{block_k} causal={causal}: |tiled − {name}| = {error:.2e}"


@pytest.mark.parametrize("causal", [False, True])
def test_tiled_backward_equals_autograd_of_the_explicit_form(causal: bool) -> None:
    """dQ, dK, dV recomputed from the saved logsumexp equal autograd through softmax(QKᵀ/√d)V."""
    q, k, v = (t.requires_grad_() for t in qkv(90, 16, seed=1))
    grad_out = torch.randn(1, 2, 90, 16, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    tiled = torch.autograd.grad(flash_attention(q, k, v, 32, 20, causal), (q, k, v), grad_out)
    explicit = torch.autograd.grad(explicit_attention(q, k, v, causal), (q, k, v), grad_out)
    for name, a, b in zip(("dQ", "dK", "dV"), tiled, explicit):
        error = (a - b).abs().max()
        assert error < 1e-12, f"causal={causal}: |{name} tiled − autograd| = {error:.2e}"


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_of_the_tiled_attention(causal: bool) -> None:
    q, k, v = (t.requires_grad_() for t in qkv(10, 4, seed=3, heads=1))
    assert torch.autograd.gradcheck(lambda a, b, c: flash_attention(a, b, c, 4, 3, causal), (q, k, v))


def test_the_io_model_at_the_papers_gpt2_medium_setting() -> None:
    """N = 1024, d = 64, M = 192 KiB of fp16 SRAM (98,304 elements): B_c = 384, B_r = 64, T_c = 3. Standard
    attention moves 11N² + 12Nd = 12,320,768 elements a head, forward + backward; the tiled kernel
    6Nd + 3·(8Nd + 6N) = 1,984,512: 6.21×. With the mask and dropout passes the paper's PyTorch baseline
    also ran (+8N²): 10.4×. The paper measured 40.3 → 4.4 GB (9.2×); over its 64 × 16 heads in fp16 the
    model gives 25.2 GB (42.4 GB with the two passes) → 4.06 GB: the same order of magnitude."""
    assert block_sizes(64, 192) == (384, 64)
    standard, tiled = standard_io(1024, 64), tiled_io(1024, 64, 192)
    assert (standard, tiled) == (12_320_768, 1_984_512), (standard, tiled)
    plain, baseline = standard / tiled, standard_io(1024, 64, 2) / tiled
    assert 5 < plain < 20 and 5 < baseline < 20, f"ratio {plain:.3g}× (with mask + dropout {baseline:.3g}×)"
    tiled_gb = tiled * 2 * 64 * 16 / 1e9
    assert 3 < tiled_gb < 6, f"tiled traffic over the paper's 1024 heads: {tiled_gb:.3g} GB (paper: 4.4 GB)"


def test_the_io_ratio_grows_with_the_sram() -> None:
    ratios = [standard_io(1024, 64) / tiled_io(1024, 64, kib) for kib in (16, 32, 64, 128, 256, 512)]
    assert all(b > a for a, b in zip(ratios, ratios[1:])), f"standard ÷ tiled against M: {ratios}"
    assert ratios[0] < 1 < ratios[-1], f"a 16 KiB SRAM ({ratios[0]:.3g}×) loses, 512 KiB ({ratios[-1]:.3g}×) wins"


def test_measured_peak_memory_grows_like_n_squared_for_standard_and_like_n_for_tiled() -> None:
    """From N = 512 to 1024, MemTracker's peak: the standard ×≈4 (the N × N matrices), the tiled ×≈2."""
    standard = {r.step: r.metrics["peak_bytes"] for r in memory_records("standard", 1024, 32, 64, 0)}
    tiled = {r.step: r.metrics["peak_bytes"] for r in memory_records("tiled", 1024, 32, 64, 0)}
    grow_standard, grow_tiled = standard[1024] / standard[512], tiled[1024] / tiled[512]
    assert 3.5 < grow_standard < 4.5, f"standard peak ×{grow_standard:.3g} for 2× N ({standard})"
    assert 1.5 < grow_tiled < 2.5, f"tiled peak ×{grow_tiled:.3g} for 2× N ({tiled})"
    assert standard[1024] > 5 * tiled[1024], f"at N = 1024: standard {standard[1024]:.3g} B, tiled {tiled[1024]:.3g} B"


@pytest.mark.parametrize("dtype,bound", [("float16", 11.09), ("bfloat16", 88.72), ("float32", 88.72), ("float64", 709.78)])
def test_the_naive_softmax_overflows_just_past_ln_max_and_the_shifted_one_holds(dtype: str, bound: float) -> None:
    first = first_failure(DTYPES[dtype], lambda p: bool(torch.isnan(naive_softmax(p)).any()))
    ln_max = math.log(torch.finfo(DTYPES[dtype]).max)
    assert abs(ln_max - bound) < 0.01 and ln_max <= first < ln_max * 1.005, f"{dtype}: first NaN at {first}, ln max {ln_max}"
    just_past = torch.tensor([first, 0.0], dtype=torch.float64).to(DTYPES[dtype])
    assert torch.isnan(naive_softmax(just_past)).any() and torch.isfinite(shifted_softmax(just_past)).all(), dtype
    last = list(overflow_records(dtype))[-1].metrics
    assert last["bad/shifted_at_max"] == 0 and last["first_nan/naive_softmax"] == first, last


def test_fp32_softmax_of_two_thousands() -> None:
    x = torch.tensor([1000.0, 1000.0])
    assert torch.isnan(naive_softmax(x)).all() and shifted_softmax(x).tolist() == [0.5, 0.5]


@pytest.mark.parametrize("values", [
    {"seed": 3, "seq_len": 300, "head_dim": 32, "block_size": 96, "sram_kib": 48},
    {"seed": 11, "seq_len": 512, "head_dim": 128, "block_size": 512, "sram_kib": 1024},
])
def test_the_claims_hold_away_from_the_defaults(values: dict) -> None:
    config = SCENARIO.validate(values)
    result = SCENARIO.run(config)
    explanation = SCENARIO.explain(result.frame, config)
    records = Records(result.frame)
    wrong = [str(c) for c in explanation.claims() if not c.holds(records)]
    assert explanation.takeaway is not None and len(explanation.details) >= 3, explanation.markdown()
    assert not wrong, f"{values}: {wrong}"
    assert result.summary["headline"]["float64: largest |tiled − explicit|"] < 1e-12, result.summary


def test_a_block_longer_than_the_sequence_is_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError) as refused:
        SCENARIO.validate({"seq_len": 256, "block_size": 512})
    assert "block_size" in str(refused.value) and "seq_len" in str(refused.value), str(refused.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the CUDA arm runs (bench/gpu_checks_flash.py checks it)")
def test_without_cuda_there_is_no_cuda_arm_and_the_gpu_script_says_so() -> None:
    import subprocess
    import sys
    from pathlib import Path
    from engines.sequence.flash_measure import cuda_records
    assert list(cuda_records(256, 16)) == []
    script = Path(__file__).resolve().parents[1] / "bench" / "gpu_checks_flash.py"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "no CUDA" in done.stdout, done.stdout + done.stderr[-1000:]


def test_the_memory_axis_is_ticked_at_the_lengths_measured_and_the_no_cuda_note_is_compact() -> None:
    """Peak memory's N axis ticks at 128, 256, … (the sweep), with no ticktext the page's 1-2-5 log ticks would
    replace; the exactness bars' labels lie flat; without CUDA records the kernels' figure is a short note."""
    from explorer.view.look import polish
    from scenarios.flash_attention.figures import CUDA, NO_CUDA_HEIGHT_PX
    from tests.tiny_runs import tiny_frame
    frame = tiny_frame(SCENARIO.id)
    config = SCENARIO.validate(SCENARIO.tiny)
    figures = SCENARIO.figures(frame, config)
    lengths = sorted(Records(frame).series("standard attention", "peak_bytes").index)
    axis = polish(figures["peak_memory"]).layout.xaxis
    assert len(lengths) >= 2 and list(axis.tickvals) == lengths and axis.ticktext is None, (lengths, axis.tickvals)
    assert figures["exactness"].layout.xaxis.tickangle == 0, figures["exactness"].layout.xaxis.tickangle
    if CUDA not in set(frame["arm"]):
        assert figures["cuda_kernels"].layout.height == NO_CUDA_HEIGHT_PX, figures["cuda_kernels"].layout.height


def test_the_exactness_sentence_writes_its_differences_as_powers_of_ten() -> None:
    """'at most 8.88×10⁻¹⁵', as the rest of the app writes small numbers, never '8.9e-15'."""
    from scenarios.flash_attention.claims import exactness_sentence
    from tests.tiny_runs import tiny_frame
    text = exactness_sentence(Records(tiny_frame(SCENARIO.id))).text
    assert "e-" not in text and ("×10" in text or "at most 0" in text), text


def test_the_hbm_traffic_legend_stands_outside_the_plot() -> None:
    """Inside the plot the legend covered the tiled line and the ringed M as set (any corner: the tiled line
    falls across the whole width, the standard ones run flat along the top): it stands below the axes."""
    from explorer.view.look import polish
    from tests.tiny_runs import tiny_frame
    legend = polish(SCENARIO.figures(tiny_frame(SCENARIO.id), SCENARIO.validate(SCENARIO.tiny))["hbm_traffic"]).layout.legend
    outside = (legend.y is not None and legend.y < 0 and legend.yanchor == "top") or (legend.x is not None and legend.x >= 1)
    assert outside, f"legend at x = {legend.x}, y = {legend.y} (anchors {legend.xanchor}, {legend.yanchor}): inside the plot"
