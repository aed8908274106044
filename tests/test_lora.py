"""LoRA, asserted: peft's algebra on our modules (B = 0 at init, r·(d_in + d_out) parameters,
rank(ΔW) ≤ r, merging changes nothing, s = α/r or α/√r), Hu et al.'s Eq. 4, and the
phenomenon: loss falls sharply up to r = k and is flat beyond.

Phenomenon thresholds were calibrated over seeds 0-4 at the default 200 steps, lr 5e-3
(measured ranges in the comments).
"""
import copy
import functools
import math

import pytest
import torch

from engines.supervised.lora import (FrozenBase, LowRankShiftTask, add_lora, delta_weight, lora_layer, lora_scale,
                          subspace_similarity, trainable_params)
from scenarios import get_scenario
from scenarios.base import Event

SCENARIO = get_scenario("lora-rank")
RULES = ["alpha = 2r", "alpha = 8 fixed", "rsLoRA alpha = 4"]


def trained_lora(rank: int, steps: int = 30, targets: tuple[str, ...] = ("fc1", "fc2")):
    """A LoRA model after a few Adam steps on the rank-4 task, so B ≠ 0."""
    base = FrozenBase(seed=0)
    task = LowRankShiftTask(base, k=4, seed=1)
    model = add_lora(base, rank, "alpha = 2r", targets, seed=2)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(steps):
        x, y = task.batch(64)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return base, task, model


@pytest.mark.parametrize("rule", RULES)
def test_adapted_model_equals_the_base_model_at_init(rule: str) -> None:
    """B starts at 0, so s·B A x = 0 and the outputs are bit-for-bit the base model's."""
    base = FrozenBase(seed=3)
    model = add_lora(base, 8, rule, ("fc1", "fc2"), seed=4)
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(5))
    assert torch.equal(model(x), base(x)), f"max |diff| {(model(x) - base(x)).abs().max():.2e}"
    assert all(lora_layer(model, t).lora_A["default"].weight.abs().sum() > 0 for t in ("fc1", "fc2")), "A is 0"


@pytest.mark.parametrize("rank", [1, 4, 64])
@pytest.mark.parametrize("targets", [("fc1", "fc2"), ("fc2",)])
def test_trainable_parameters_are_r_times_d_in_plus_d_out_per_layer(rank: int, targets: tuple[str, ...]) -> None:
    model = add_lora(FrozenBase(seed=0), rank, "alpha = 2r", targets, seed=0)
    expected = len(targets) * rank * (64 + 64)
    assert trainable_params(model) == expected, f"{trainable_params(model)} vs r·(d_in + d_out)·layers = {expected}"
    assert model.get_nb_trainable_parameters()[0] == expected, "peft's own count disagrees"


@pytest.mark.parametrize("rank, rule, expected", [
    (4, "alpha = 2r", 2.0), (64, "alpha = 2r", 2.0), (1, "alpha = 8 fixed", 8.0), (64, "alpha = 8 fixed", 0.125),
    (16, "rsLoRA alpha = 4", 1.0), (64, "rsLoRA alpha = 4", 0.5)])
def test_scale_is_alpha_over_r_or_over_sqrt_r_as_peft_applies_it(rank: int, rule: str, expected: float) -> None:
    model = add_lora(FrozenBase(seed=0), rank, rule, ("fc1",), seed=0)
    peft_scale = lora_layer(model, "fc1").scaling["default"]
    assert lora_scale(rank, rule) == pytest.approx(expected) and peft_scale == pytest.approx(expected), \
        f"{rule} at r={rank}: ours {lora_scale(rank, rule)}, peft {peft_scale}, expected {expected}"


@pytest.mark.parametrize("rank", [1, 3, 8])
def test_rank_of_the_learned_update_is_at_most_r(rank: int) -> None:
    _, _, model = trained_lora(rank)
    for target in ("fc1", "fc2"):
        delta = delta_weight(model, target).detach()  # float32: the default tolerance is float32's
        found = int(torch.linalg.matrix_rank(delta))
        assert 1 <= found <= rank, f"{target}: rank(ΔW) = {found} with r = {rank}"


def test_merged_weights_give_the_same_outputs() -> None:
    """peft's merge_and_unload gives W₀ + s·B A, and the merged plain model computes what the adapter did."""
    base, task, model = trained_lora(4)
    x, _ = task.batch(256)
    with torch.no_grad():
        adapted = model(x)
        expected_fc2 = base.fc2.weight + delta_weight(model, "fc2")
        merged = copy.deepcopy(model).merge_and_unload()
        assert isinstance(merged, FrozenBase), type(merged)
        assert torch.allclose(merged.fc2.weight, expected_fc2, atol=1e-6), "merged W ≠ W₀ + s·B A"
        gap = (merged(x) - adapted).abs().max().item()
    assert gap < 1e-5, f"merged vs adapter outputs differ by {gap:.2e}"
    assert (adapted - base(x)).abs().max() > 1e-2, "the adapter should have learned something"


def test_subspace_similarity_is_one_for_the_same_row_space_and_zero_for_orthogonal_ones() -> None:
    """Eq. 4 depends only on A's row space: A and M·A (M invertible) span it equally; orthogonal spans give 0."""
    generator = torch.Generator().manual_seed(0)
    basis, _ = torch.linalg.qr(torch.randn(64, 12, generator=generator, dtype=torch.float64))  # (64, 12) orthonormal
    a_small = basis[:, :4].T  # (4, 64)
    mixed = torch.randn(4, 4, generator=generator, dtype=torch.float64) @ a_small
    same = subspace_similarity(a_small, mixed)
    assert same[-1, -1].item() == pytest.approx(1.0, abs=1e-9), f"φ(4, 4) of the same span {same[-1, -1]:.6f}"
    orthogonal = subspace_similarity(a_small, basis[:, 4:12].T)  # (4, 8) cells
    assert orthogonal.abs().max().item() < 1e-12, f"orthogonal spans φ up to {orthogonal.abs().max():.2e}"
    random = subspace_similarity(torch.randn(8, 64, generator=generator), torch.randn(64, 64, generator=generator))
    assert 0.0 <= random.min().item() and random.max().item() <= 1.0 + 1e-9, "φ must lie in [0, 1]"
    assert random[-1, -1].item() == pytest.approx(1.0, abs=1e-9), "a full-rank 64×64 A spans everything: φ(8, 64) = 1"


def test_subspace_similarity_cell_matches_the_formula() -> None:
    generator = torch.Generator().manual_seed(1)
    a_i, a_j = torch.randn(6, 64, generator=generator), torch.randn(10, 64, generator=generator)
    u_i = torch.linalg.svd(a_i.double(), full_matrices=False).Vh.T  # (64, 6), columns = right singular vectors
    u_j = torch.linalg.svd(a_j.double(), full_matrices=False).Vh.T
    p, q = 3, 7
    direct = (torch.linalg.matrix_norm(u_i[:, :p].T @ u_j[:, :q]) ** 2 / min(p, q)).item()
    assert subspace_similarity(a_i, a_j)[p - 1, q - 1].item() == pytest.approx(direct, rel=1e-12)


@functools.cache
def sweep_summary(k: int, ranks: str, seed: int) -> dict:
    return SCENARIO.run({"k": k, "ranks": ranks, "seed": seed}).summary


@pytest.mark.parametrize("k, ranks, seed", [(2, "1,2,4,8", 0), (8, "2,4,8,16", 1), (4, "1,4,16,64", 3)])
def test_loss_drops_sharply_up_to_r_equals_k_and_is_flat_beyond(k: int, ranks: str, seed: int) -> None:
    """Below k a share of the loss stays (seeds 0-4: ≥ 0.25); from k on ≤ 0.6% is left (≤ 0.0059)."""
    arms = sweep_summary(k, ranks, seed)["arms"]
    left = {info["rank"]: info["relative_loss"] for name, info in arms.items() if name != "full"}
    below = [r for r in sorted(left) if r < k]
    above = [r for r in sorted(left) if r >= k]
    shown = {r: f"{v:.2g}" for r, v in left.items()}
    assert all(left[r] > 0.15 for r in below), f"k={k}: ranks below k should stall: {shown}"
    assert all(left[r] < 0.01 for r in above), f"k={k}: ranks ≥ k should fit: {shown}"
    path = [left[r] for r in below] + [left[k]]
    assert all(a > b for a, b in zip(path, path[1:])), f"k={k}: loss should fall with rank up to k: {shown}"
    cliff = left[below[-1]] / left[k]
    assert cliff > 20, f"k={k}: the cliff from r={below[-1]} to r=k is only ×{cliff:.1f}"
    full = arms["full"]["relative_loss"]
    assert max(left[r] for r in above) < 20 * full, f"k={k}: ranks ≥ k vs full fine-tune {full:.2g}: {shown}"


def test_full_fine_tune_update_is_low_rank_and_ranks_share_directions() -> None:
    """Full ΔW: ≥ 95% of ‖ΔW‖²_F in the top k (seeds 0-4: 0.983-0.994); φ(top k) of r=4 vs r=64 A
    ≥ 0.4 (seeds 0-4: 0.63-0.93), against ≈ 4/64 for random subspaces."""
    summary = sweep_summary(4, "1,4,16,64", 3)
    for target, share in summary["full_top_k_energy"].items():
        assert share > 0.95, f"{target}: top-4 share of the full ΔW {share:.3f}"
    assert summary["subspace"]["pair"] == [4, 64]
    for target, phi in summary["subspace"]["phi"].items():
        assert phi > 0.4, f"{target}: φ(4, 4) between r=4 and r=64 is {phi:.2f}"


class RecordingSink:
    def __init__(self, stop_after_rows: int | None = None) -> None:
        self.batches: list[list[tuple]] = []
        self.stop_after_rows = stop_after_rows

    def add(self, rows) -> None:
        self.batches.append(list(rows))

    def event(self, event: Event) -> None: ...
    def progress(self, fraction: float) -> None: ...

    def stop_requested(self) -> bool:
        return self.stop_after_rows is not None and sum(map(len, self.batches)) >= self.stop_after_rows


def test_each_arm_is_reported_as_it_runs_full_fine_tune_first_then_every_rank_together() -> None:
    """The full fine-tune streams first; the ranks train as one batched model, so each of its steps
    brings every rank's rows (engines/supervised/lora_arms.py)."""
    sink = RecordingSink()
    SCENARIO.run(SCENARIO.tiny, sink)
    arms_in_arrival = [row[0] for batch in sink.batches for row in batch]
    order = list(dict.fromkeys(arms_in_arrival))
    assert order == ["full", "r=1", "r=2", "r=4", "r=8"], order
    last_full = max(i for i, arm in enumerate(arms_in_arrival) if arm == "full")
    assert last_full < arms_in_arrival.index("r=1"), "the full fine-tune finishes before the ranks start"
    ranks_in_arrival = [batch[0][0] for batch in sink.batches if batch[0][0] != "full"]
    assert ranks_in_arrival[:8] == order[1:] * 2, f"the ranks' first records arrive {ranks_in_arrival[:8]}"
    assert len(sink.batches) > 5 * len(order), f"rows came in {len(sink.batches)} batches: not streamed"


def test_stop_ends_the_sweep_and_keeps_what_it_drew() -> None:
    result = SCENARIO.run(SCENARIO.tiny, RecordingSink(stop_after_rows=3))
    assert result.status == "stopped"
    assert set(result.frame["arm"]) == {"full"}, set(result.frame["arm"])


def test_same_config_gives_identical_records_whatever_the_global_rng() -> None:
    torch.manual_seed(123)
    first = SCENARIO.run(SCENARIO.tiny).frame
    torch.manual_seed(456)
    torch.rand(1000)
    second = SCENARIO.run(SCENARIO.tiny).frame
    assert first.equals(second), "records differ between two runs of one config"
    assert math.isfinite(first["value"].sum())
