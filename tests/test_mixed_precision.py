"""Mixed precision, asserted: what fp16 and bf16 can hold, what loss scaling and a master copy
win back, and the page's sweeps against torch's own rounding.

Training thresholds were calibrated on seeds 0-5 (ranges in the comments).
"""
import pytest
import torch

from engines.loop.records import StepRecord
from engines.numerics import number_formats
from engines.numerics.mixed_precision import Precision, Stepper, train_arm
from scenarios import get_scenario
from scenarios.records import Records

SCENARIO = get_scenario("mixed-precision")


def test_fp16_flushes_values_at_or_below_2_to_the_minus_25_and_keeps_2_to_the_minus_24() -> None:
    """2⁻²⁴ is fp16's smallest subnormal; half of it is a tie rounded to the even 0; between the two, x rounds up."""
    tiny = 2.0 ** -24
    assert torch.tensor(tiny, dtype=torch.float16).item() == tiny
    for x in (2.0 ** -25, 2.0 ** -26, 1e-8, 1e-10, 2.0 ** -30):
        assert torch.tensor(x, dtype=torch.float16).item() == 0.0, f"{x:.3e} should flush to 0 in fp16"
    for x in (0.51 * tiny, 0.75 * tiny, 0.99 * tiny):
        assert torch.tensor(x, dtype=torch.float16).item() == tiny, f"{x:.3e} should round up to 2⁻²⁴"
    assert torch.tensor(1e-30, dtype=torch.bfloat16).item() > 0, "bf16 has fp32's exponent range"


def test_the_underflow_sweep_flushes_every_bin_below_2_to_the_minus_25_and_none_above() -> None:
    records = list(number_formats.underflow_sweep(seed=0))
    for record in records:
        exponent, flushed = record.metrics["log2_x"], record.metrics["flushed/fp16"]
        expected = 1.0 if exponent + 0.25 <= -25 else 0.0
        assert flushed == expected, f"bin 2^{exponent}: flushed share {flushed}, expected {expected}"
        assert record.metrics["flushed/bf16"] == 0.0
    normal = [r.metrics["rel_error/fp16"] for r in records if r.metrics["log2_x"] >= -14]
    assert max(normal) < 2.0 ** -11, f"fp16 normal numbers: relative error up to {max(normal):.2e} > 2⁻¹¹"


@pytest.mark.parametrize("name, bits", [("fp16", 11), ("bf16", 8)])
def test_w_plus_delta_is_w_when_delta_is_below_w_times_2_to_the_minus_p_minus_1_at_powers_of_two(name, bits) -> None:
    """At w = 2^e: |δ| < |w|·2⁻¹¹ (fp16) or |w|·2⁻⁸ (bf16) is lost upward; just above it is kept."""
    dtype = number_formats.DTYPES[name]
    for exponent in (-6, 0, 3):
        w = torch.tensor(2.0 ** exponent, dtype=dtype)
        for fraction in (0.1, 0.5, 0.99, 1.0):  # 1.0: the exact tie, rounded to the even w
            delta = torch.tensor(fraction * 2.0 ** (exponent - bits), dtype=dtype)
            assert (w + delta) == w, f"{name}: w=2^{exponent}, δ={fraction}·|w|·2^-{bits} should be lost"
        kept = torch.tensor(1.01 * 2.0 ** (exponent - bits), dtype=dtype)
        assert (w + kept) != w, f"{name}: w=2^{exponent}, δ=1.01·|w|·2^-{bits} should be kept"


@pytest.mark.parametrize("name, bits", [("fp16", 11), ("bf16", 8)])
def test_for_any_w_updates_below_2_to_the_minus_p_minus_2_are_lost_and_above_2_to_the_minus_p_minus_1_kept(name, bits) -> None:
    """Half the spacing at w lies in (|w|·2^−(p+2), |w|·2^−(p+1)]: the boundary moves with w's mantissa."""
    generator = torch.Generator().manual_seed(0)
    w = ((1 + torch.rand(4096, generator=generator)) * 2.0 ** torch.randint(-8, 8, (4096,), generator=generator)).to(
        number_formats.DTYPES[name])
    for ratio, expected in ((0.99 * 2.0 ** -(bits + 1), 0.0), (1.01 * 2.0 ** -bits, 1.0)):
        for sign in (1.0, -1.0):
            total = (w.double() * (1 + sign * ratio)).to(w.dtype)  # the exact sum, rounded once
            kept = float((total != w).double().mean())
            assert kept == expected, f"{name}: |δ|/|w| = {ratio:.3e}, sign {sign}: kept share {kept}, expected {expected}"
    sweep = {r.metrics["log2_ratio"]: r.metrics[f"kept/{name}"] for r in number_formats.rounding_sweep(seed=0)}
    assert all(v == 0.0 for x, v in sweep.items() if x < -(bits + 1)), f"{name}: kept below the band"
    assert all(v == 1.0 for x, v in sweep.items() if x > -bits), f"{name}: lost above the band"


def test_ten_thousand_updates_of_1e_minus_4_leave_fp16_at_1_and_bring_fp32_to_2() -> None:
    last = list(number_formats.accumulate(10_000, 1e-4))[-1]
    assert last.metrics["updates"] == 10_000
    assert last.metrics["weight/fp16"] == 1.0, f"fp16 weight {last.metrics['weight/fp16']}"
    assert last.metrics["weight/bf16"] == 1.0, f"bf16 weight {last.metrics['weight/bf16']}"
    assert abs(last.metrics["weight/fp32"] - 2.0) < 1e-3, f"fp32 master {last.metrics['weight/fp32']:.6f}"


def run(precision: Precision, seed: int = 0, steps: int = 250, lr: float = 1e-4, loss_weight: float = 1e-5,
        log_every: int = 250) -> list[StepRecord]:
    return [r for r in train_arm(precision, lr=lr, loss_weight=loss_weight, steps=steps, growth_interval=10, seed=seed,
                                 log_every=log_every) if isinstance(r, StepRecord)]


def drop(records: list[StepRecord]) -> float:
    return records[0].metrics["test_loss"] - records[-1].metrics["test_loss"]


def test_loss_scaling_rescues_the_gradients_fp16_flushes() -> None:
    """loss_weight 1e-5: 76-87% of fp16 gradient entries are 0 without scaling (seeds 0-5), none with GradScaler."""
    plain, scaled = run(Precision("fp16"), steps=2, log_every=1), run(Precision("fp16", True), steps=2, log_every=1)
    assert plain[0].metrics["grad_zero_frac"] > 0.5, f"unscaled fp16: {plain[0].metrics['grad_zero_frac']:.1%} zeros"
    assert scaled[0].metrics["grad_zero_frac"] < 0.01, f"GradScaler: {scaled[0].metrics['grad_zero_frac']:.1%} zeros"
    assert scaled[0].metrics["loss_scale"] == 2.0 ** 16


def test_adam_in_fp32_does_not_notice_the_loss_weight() -> None:
    """Adam divides by √v: the same run with loss_weight 1 and 1e-5 (ε = 1e-16) stays within 1e-5."""
    a, b = run(Precision(None), steps=30, loss_weight=1.0), run(Precision(None), steps=30, loss_weight=1e-5)
    gap = abs(a[-1].metrics["test_loss"] - b[-1].metrics["test_loss"])
    assert gap < 1e-5, f"test loss differs by {gap:.2e}"


def test_grad_scaler_doubles_after_growth_interval_clean_steps_and_halves_on_overflow() -> None:
    records = run(Precision("fp16", True), steps=250, log_every=1)
    scales = [r.metrics["loss_scale"] for r in records]
    ratios = {b / a for a, b in zip(scales, scales[1:])}
    assert ratios <= {0.5, 1.0, 2.0}, f"scale changed by {sorted(ratios)}"
    halvings = sum(b < a for a, b in zip(scales, scales[1:]))
    assert halvings == records[-1].metrics["skipped_steps"] > 0, f"{halvings} halvings, {records[-1].metrics['skipped_steps']} skipped"


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_loss_scaling_trains_like_fp32_where_unscaled_fp16_falls_behind(seed: int) -> None:
    """Held-out loss drop over 250 steps: GradScaler within 3% of fp32's; unscaled fp16 25-36% of it (seeds 0-5)."""
    fp32, scaled, plain = (drop(run(p, seed)) for p in (Precision(None), Precision("fp16", True), Precision("fp16")))
    assert abs(scaled - fp32) < 0.1 * fp32, f"GradScaler drop {scaled:.4f} vs fp32 {fp32:.4f}"
    assert plain < 0.5 * fp32, f"unscaled fp16 drop {plain:.4f} vs fp32 {fp32:.4f}"


def test_a_master_copy_keeps_updates_that_fp16_storage_rounds_away() -> None:
    """A weight of 1.0 (a LayerNorm gain) under Adam at lr 1e-4: every step is 1e-4 < 2⁻¹¹, so stored
    in fp16 it never moves; the fp32 master copy moves by ≈ lr per step."""
    moved = {}
    for storage in (None, torch.float16):
        gain = torch.nn.Parameter(torch.ones(8))
        stepper = Stepper([gain], lr=1e-4, scaler=torch.amp.GradScaler("cpu"), storage=storage)
        for _ in range(100):
            stepper.zero_grad()
            stepper.scaler.scale(((gain - 2.0) ** 2).mean()).backward()
            stepper.step()
        moved[storage] = (float((gain.detach() - 1).abs().max()), float(stepper.lost_since_last()["lost_updates"]))
    assert moved[torch.float16] == (0.0, 1.0), f"fp16 storage: moved {moved[torch.float16][0]}, lost {moved[torch.float16][1]}"
    assert moved[None][0] == pytest.approx(100 * 1e-4, rel=0.05) and moved[None][1] == 0.0, f"master: {moved[None]}"


@pytest.mark.slow
@pytest.mark.parametrize("dtype, lr", [("bf16", 1e-4), ("fp16", 1e-5)])
def test_the_master_weight_arm_trains_where_pure_16_bit_weights_stall(dtype: str, lr: float) -> None:
    """Pure 16-bit weights lose ~90% of their updates; their held-out loss drops 13-20% as far as
    the master-weight arm's (bf16 at 1e-4: seeds 0-5; fp16 at 1e-5: seeds 0-3)."""
    master = run(Precision(dtype, dtype == "fp16"), lr=lr)
    pure = run(Precision(dtype, dtype == "fp16", master=False), lr=lr)
    assert pure[-1].metrics["lost_updates"] > 0.8, f"pure {dtype}: {pure[-1].metrics['lost_updates']:.1%} lost"
    assert drop(pure) < 0.35 * drop(master), f"pure {dtype} drop {drop(pure):.4f} vs master {drop(master):.4f}"


def test_the_page_says_what_the_default_run_shows() -> None:
    result = SCENARIO.run({"steps": 20})
    records = Records(result.frame)
    assert records.last("10⁴ updates of 1e-4", "weight/fp16") == 1.0
    explanation = SCENARIO.explain(result.frame, SCENARIO.validate({"steps": 20}))
    assert "2^-25" in explanation.markdown() and "2^-11" in explanation.markdown(), explanation.markdown()
    assert all(claim.holds(records) for claim in explanation.claims())


def test_the_subnormal_label_sits_where_no_curve_runs_and_coinciding_formats_both_show() -> None:
    """"2⁻¹⁴: fp16 subnormals below" sat at the bottom, on float16's curve: at the top, where every error right of
    2⁻¹⁴ stays below 2⁻⁸. float16 and bfloat16 both leave the weight at 1.0: float16 wide beneath, bfloat16 dashed."""
    from tests.tiny_runs import tiny_frame
    frame = tiny_frame("mixed-precision")
    figures = SCENARIO.figures(frame, SCENARIO.validate(SCENARIO.tiny))
    note = next(n for n in figures["underflow"].layout.annotations if str(n.text).startswith("2⁻¹⁴"))
    assert note.y == 1 and note.yanchor == "top", (note.y, note.yanchor)
    right = [y for trace in figures["underflow"].data for x, y in zip(trace.x, trace.y) if x > -14]
    assert right and max(right) < 2 ** -8, f"an error of {max(right):.3g} right of 2⁻¹⁴ would reach the label"
    lines = {trace.name: trace.line for trace in figures["accumulation"].data}
    fp16, bf16 = lines["float16"], lines["bfloat16"]
    assert fp16.width > bf16.width and bf16.dash == "dash", (fp16, bf16)
