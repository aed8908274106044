"""QLoRA, asserted: NF4's 16 values against the published table and the quantile definition, blockwise
absmax, packing, double quantization's bits, int4 absmax, the NF4 parametrization, memory counted from
tensors, and the scenario's claims off the defaults."""
import math

import pytest
import torch
from torch import nn
from torch.distributions import Normal

from engines.numerics import nf4
from engines.numerics.quantization import fake_quantize_by_hand
from scenarios import get_scenario
from scenarios.base import ConfigError
from scenarios.qlora.figures import FULL, LORA, NO_DQ, PANELS, QLORA, memory_rows
from scenarios.records import Records
from tests.sentence_checks import explained_and_holding

SCENARIO = get_scenario("qlora")

# bitsandbytes' NF4 table (functional.py, as QLoRA's Appendix E prints it), float32.
PUBLISHED_NF4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                 -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                 0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                 0.7229568362236023, 1.0]


def test_nf4_values_equal_the_published_table() -> None:
    code = nf4.nf4_code()
    err = (code - torch.tensor(PUBLISHED_NF4, dtype=torch.float64)).abs().max().item()
    assert code.numel() == 16 and err < 1e-6, f"{code.numel()} values, max |ours − published| = {err:.2e}"


def test_nf4_is_8_positive_7_negative_quantiles_and_an_exact_zero() -> None:
    code = nf4.nf4_code()
    assert (code > 0).sum() == 8 and (code < 0).sum() == 7 and (code == 0).sum() == 1, code.tolist()
    assert code[0].item() == -1.0 and code[-1].item() == 1.0, (code[0].item(), code[-1].item())
    # Undo the normalisation: Φ(q · Φ⁻¹(1 − δ)) must be evenly spaced probabilities from ½ to 1 − δ.
    normal = Normal(torch.tensor(0.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64))
    top = normal.icdf(torch.tensor(1 - nf4.DELTA, dtype=torch.float64))
    for side, count in ((code[code > 0], 8), (-code[code < 0], 7)):
        probabilities = normal.cdf(side.sort().values * top)
        expected = torch.linspace(0.5, 1 - nf4.DELTA, count + 1, dtype=torch.float64)[1:]
        err = (probabilities - expected).abs().max().item()
        assert err < 1e-12, f"{count} values: probabilities off the grid by {err:.2e}"
    published = torch.tensor(PUBLISHED_NF4, dtype=torch.float64)
    steps = normal.cdf(published[published > 0] * top).diff()
    assert (steps - steps.mean()).abs().max() < 1e-6, f"published positive steps in probability {steps.tolist()}"


def test_the_nearest_code_value_is_chosen_and_packing_round_trips() -> None:
    x = torch.linspace(-1, 1, 1001)
    code = nf4.nf4_code(torch.float32)
    brute = (x[:, None] - code[None, :]).abs().argmin(1)
    chosen = nf4.nearest(x, code).long()
    assert torch.equal((x - code[chosen]).abs(), (x - code[brute]).abs()), "bucketize picked a farther value"
    indices = torch.randint(0, 16, (64,), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    packed = nf4.pack(indices)
    assert packed.numel() == 32 and torch.equal(nf4.unpack(packed), indices), "two 4-bit indices per byte"


@pytest.mark.parametrize("block", [32, 64, 256])
def test_blockwise_absmax_keeps_each_blocks_largest_weight_exactly(block) -> None:
    w = torch.randn(10, 70, generator=torch.Generator().manual_seed(block))  # 700: the last block padded
    packed, absmax = nf4.nf4_blockwise(w, block)
    assert absmax.numel() == math.ceil(700 / block) and packed.numel() == absmax.numel() * block // 2
    w_hat = nf4.nf4_dequantize(packed, absmax, w.shape)
    blocks, blocks_hat = nf4.blocks_of(w.flatten(), block), nf4.blocks_of(w_hat.flatten(), block)
    at = blocks.abs().argmax(1, keepdim=True)
    err = (blocks.gather(1, at) - blocks_hat.gather(1, at)).abs().max().item()
    assert err < 1e-6, f"block {block}: the absmax weight came back off by {err:.2e}"
    worst = ((w_hat - w).abs().view(-1)[: 700] / absmax.repeat_interleave(block)[:700]).max().item()
    half_gap = (nf4.nf4_code().diff().max() / 2).item()
    assert worst <= half_gap + 1e-6, f"|ŵ − w|/c = {worst:.4f} > half the widest gap {half_gap:.4f}"


def test_double_quantization_bits_are_the_papers() -> None:
    plain, nested = nf4.constant_bits(64, None), nf4.constant_bits(64, 256)
    assert plain == 0.5 and abs(nested - (8 / 64 + 32 / (64 * 256))) < 1e-15, (plain, nested)
    assert abs(plain - nested - 0.373046875) < 1e-12, f"saving {plain - nested}"


def test_double_quantized_constants_come_back_within_half_a_step() -> None:
    absmax = torch.rand(1000, generator=torch.Generator().manual_seed(3)) + 0.5
    dq = nf4.double_quantize(absmax, 256)
    assert dq.codes.dtype == torch.int8 and dq.codes.numel() == 1000 and dq.scales.numel() == 4
    back = nf4.double_dequantize(dq, 256)
    steps = dq.scales.repeat_interleave(256)[:1000]
    worst = ((back - absmax).abs() / steps).max().item()
    assert worst <= 0.5 + 1e-4, f"worst error {worst:.4f} steps of Δ₂"


def test_int4_absmax_is_round_7w_over_c_through_the_shared_quantizer() -> None:
    w = torch.randn(4, 64, generator=torch.Generator().manual_seed(1))
    c = w.abs().amax(1, keepdim=True)
    expected = torch.round(w * (1.0 / (c / 7))) * (c / 7)
    got = nf4.int4_absmax(w, 64)
    assert torch.allclose(got, expected, atol=1e-7), (got - expected).abs().max().item()
    assert torch.equal(got, fake_quantize_by_hand(w, c / 7, 0, -7, 7)), "not the shared quantizer's arithmetic"
    assert torch.unique(torch.round(got / (c / 7))).numel() <= 15


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("block", [32, 64, 256])
def test_nf4_beats_int4_on_normal_data_and_loses_on_uniform(seed, block) -> None:
    generator = torch.Generator().manual_seed(seed)
    normal, uniform = torch.randn(1 << 15, generator=generator), torch.rand(1 << 15, generator=generator) * 2 - 1
    errors = {name: (nf4.relative_error(x, nf4.nf4_roundtrip(x, block)), nf4.relative_error(x, nf4.int4_absmax(x, block)))
              for name, x in (("normal", normal), ("uniform", uniform))}
    assert errors["normal"][0] < 0.9 * errors["normal"][1], f"seed {seed}, B {block}: normal NF4/int4 {errors['normal']}"
    assert errors["uniform"][1] < 0.9 * errors["uniform"][0], f"seed {seed}, B {block}: uniform NF4/int4 {errors['uniform']}"


def test_a_quantized_linear_stores_codes_and_dequantizes_on_access() -> None:
    torch.manual_seed(0)
    layer = nn.Linear(64, 32)
    w = layer.weight.detach().clone()
    nf4.quantize_linear(layer, 64, 256)
    stored = dict(layer.named_parameters())
    codes = stored["parametrizations.weight.original0"]
    assert codes.dtype == torch.uint8 and codes.numel() == 64 * 32 // 2, (codes.dtype, codes.numel())
    assert not any(p.dtype == torch.float32 and p.numel() == w.numel() for p in stored.values()), "a float copy is kept"
    packed, absmax = nf4.nf4_blockwise(w, 64)
    rel = ((layer.weight - nf4.nf4_dequantize(packed, absmax, w.shape)).abs().max() / absmax.max()).item()
    assert rel < 0.01, f"double quantization moved ŵ by {rel:.2e} of the largest absmax"
    x = torch.randn(5, 64)
    assert torch.allclose(layer(x), x @ layer.weight.T + layer.bias), "forward does not use the dequantized weight"


def test_memory_by_category_is_counted_from_tensors() -> None:
    from engines.sequence.qlora import Setup, Study
    study = Study(0)
    for _ in study.pretrain(2, 1e-2, 1):
        pass
    setup = Setup(rank=4, alpha=8, block=64, second_block=256, steps=2, lr=1e-2, full_lr=1e-3, log_every=1)
    last = {arm: [item for item in study.finetune(arm, setup)][-1].metrics for arm in (FULL, LORA, QLORA)}
    full, lora, qlora = last[FULL], last[LORA], last[QLORA]
    base, quantized = full["base_params"], qlora["quantized_params"]
    assert abs(full["mem_bits/gradients"] - 32) < 1e-9 and abs(full["mem_bits/optimizer"] - 64) < 0.1, full
    assert abs(full["mem_bits/linear_weights"] + full["mem_bits/rest_of_base"] - 32) < 1e-9, full
    codes_per_weight = qlora["mem_bits/linear_weights"] * base / quantized
    assert codes_per_weight == 4, f"{codes_per_weight} bits per quantized weight"
    assert abs(qlora["mem_bits/constants_no_dq"] * base / quantized - 0.5) < 1e-12, qlora["mem_bits/constants_no_dq"]
    assert qlora["mem_bits/constants"] < qlora["mem_bits/constants_no_dq"] / 3, qlora
    assert lora["mem_bits/adapters"] == qlora["mem_bits/adapters"] == lora["mem_bits/gradients"], (lora, qlora)
    assert lora["trainable_params"] == 4 * sum(i + o for i, o in ((32, 96), (32, 32), (32, 128), (128, 32))) * 2 + 4 * (32 + 256)


def run(**overrides) -> tuple[Records, dict]:
    frame, summary = SCENARIO.run(overrides)
    return Records(frame), summary


@pytest.mark.parametrize("field, value", [("block_size", 48), ("second_block", 100), ("rank", 0), ("lr", 1.0),
                                          ("steps", 5)])
def test_bad_input_is_refused_naming_the_field(field, value) -> None:
    with pytest.raises(ConfigError) as refused:
        SCENARIO.validate({field: value})
    assert field in str(refused.value), str(refused.value)


@pytest.mark.parametrize("overrides", [{"seed": 3, "pretrain_steps": 30, "steps": 12, "block_size": 32, "second_block": 64,
                                        "rank": 2},
                                       {"seed": 7, "pretrain_steps": 20, "steps": 15, "block_size": 256,
                                        "second_block": 1024, "alpha": 4.0, "lr": 1e-3}])
def test_every_claim_holds_off_the_defaults(overrides) -> None:
    records, summary = run(**overrides)
    explanation = explained_and_holding(SCENARIO, overrides, records)
    assert len(explanation.claims()) > 20, explanation.markdown()
    rows = memory_rows(records)
    assert list(rows) == [FULL, LORA, NO_DQ, QLORA], list(rows)
    assert sum(rows[QLORA].values()) < sum(rows[LORA].values()) < sum(rows[FULL].values()), summary["memory_bits"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_qlora_ends_near_lora_and_nf4_rounds_the_base_better_than_int4(seed) -> None:
    records, summary = run(seed=seed)
    final = summary["domain_bpb"]
    start = records.first(LORA, "domain_bpb")
    gap = abs(final[QLORA] - final[LORA])
    assert gap < 0.05 * (start - final[LORA]), f"seed {seed}: |QLoRA − LoRA| {gap:.4f} vs LoRA's gain {start - final[LORA]:.3f}"
    nf4_err, int4_err = records.last(QLORA, "qerr/base/nf4/block_64"), records.last(QLORA, "qerr/base/int4/block_64")
    assert nf4_err < 0.9 * int4_err, f"seed {seed}: base weights NF4 {nf4_err:.4g} vs int4 {int4_err:.4g}"
    memory = summary["memory_bits"]
    assert memory[QLORA] < 0.8 * memory[LORA] and memory[FULL] > 127, memory


def test_the_uniform_guess_is_a_legend_entry_and_b_names_only_loras_matrix() -> None:
    """The uniform guess's label on its line ran over the y-axis title and the curves: it is a legend entry,
    and the loss charts carry no annotation. "B" is LoRA's matrix (zero at the start); the block size is
    'block size 64' or n in every word of the page: presets, mechanism, field help, titles, legends, sentences."""
    import re
    import sys
    from tests.tiny_runs import tiny_frame
    frame = tiny_frame(SCENARIO.id)
    config = SCENARIO.validate(SCENARIO.tiny)
    figures = SCENARIO.figures(frame, config)
    for name in ("prose", "loss"):
        notes = [note.text for note in figures[name].layout.annotations if note.text not in PANELS]  # subplot titles
        lines = [trace.name for trace in figures[name].data if trace.name and trace.name.startswith("uniform guess")
                 and trace.showlegend is not False]
        assert not notes and lines == ["uniform guess: 8 bits"], f"{name}: annotations {notes}, legend lines {lines}"
    words = [*SCENARIO.presets, SCENARIO.formula, sys.modules[type(SCENARIO).__module__].__doc__,
             *(field.description for field in SCENARIO.Config.model_fields.values()),
             SCENARIO.explain(frame, config).markdown(),
             *(str(fig.layout.title.text) for fig in figures.values()),
             *(str(trace.name) for fig in figures.values() for trace in fig.data)]
    block_b = [m.group(0) for text in words for m in re.finditer(r"\bB(?:₂|_2)?\s*=\s*\d+|/\(?B\b|\bB\s*\(\d+\)", text)]
    assert not block_b, f"B used for the block size: {block_b}"
    said = SCENARIO.explain(frame, config).markdown()
    assert "LoRA's B matrix starts at zero" in said, said
