"""Memory tricks, asserted: the bytes autograd saves with and without checkpointing, accumulated
gradients against the full batch's, and a resumed run against the one that never stopped."""
import math
import pickle
import tempfile

import pytest
import torch

from engines.distributed.activation_memory import (SavedBytes, accumulated_gradient, accumulation_sweep, checkpoint_sweep,
                                       checkpointed_step, deep_mlp, small_net)
from engines.distributed.resume import PARTS, resumed, uninterrupted
from engines.loop.records import StepRecord


def test_saved_bytes_counts_what_an_op_keeps_and_releases_it_after_backward() -> None:
    """tanh saves its output; exp saves its output too, the same storage twice is held once."""
    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(0), requires_grad=True)
    counter = SavedBytes([])
    with counter.hooks():
        y = torch.tanh(x)
        assert counter.bytes == y.numel() * 4, f"tanh held {counter.bytes} bytes"
        (y * y).sum().backward()  # mul saves both operands: the same storage
    assert counter.peak == y.numel() * 4 and counter.bytes == 0, f"peak {counter.peak}, after backward {counter.bytes}"


@pytest.mark.parametrize("layers", [16, 9])
def test_checkpointing_holds_k_plus_1_activations_and_peaks_at_k_plus_n_over_k(layers: int) -> None:
    """a = batch·width·4 bytes; no checkpointing (n + 1)·a; k segments: (k + 1)·a after forward,
    (k + n/k)·a at the peak of backward, smallest at k = √n."""
    records = list(checkpoint_sweep(layers, width=32, batch=8, repeats=1, seed=0))
    a = 8 * 32 * 4
    none = records[0].metrics
    assert none["segments"] == 0 and none["saved_peak_bytes"] == (layers + 1) * a, none
    peaks = {}
    for record in records[1:]:
        k = int(record.metrics["segments"])
        assert record.metrics["saved_after_forward_bytes"] == (k + 1) * a, f"k={k}: {record.metrics}"
        assert record.metrics["saved_peak_bytes"] == (k + layers // k) * a, f"k={k}: {record.metrics}"
        peaks[k] = record.metrics["saved_peak_bytes"]
    assert min(peaks, key=peaks.get) == math.isqrt(layers), f"peaks by k: {peaks}"


def test_checkpointing_changes_no_gradient() -> None:
    model = deep_mlp(8, 32, seed=0)
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(1)).requires_grad_()
    grads = {}
    for segments in (None, 2, 4):
        checkpointed_step(model, x, segments)
        grads[segments] = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    for segments in (2, 4):
        assert torch.equal(grads[segments], grads[None]), f"k={segments}: max diff {(grads[segments] - grads[None]).abs().max():.2e}"


def test_accumulated_mean_losses_give_the_full_batch_gradient_and_batchnorm_does_not() -> None:
    """Loss ÷ K: allclose at every K (rel. diff ~1e-7); not ÷ K: exactly K times the gradient; BatchNorm: off by > 10%."""
    for record in accumulation_sweep(batch=64, width=32, seed=0):
        k = record.metrics["micro_batches"]
        if k == 1:
            continue
        assert record.metrics["allclose/mean loss ÷ K"] == 1.0, f"K={k}: {record.metrics['rel_diff/mean loss ÷ K']:.2e}"
        assert record.metrics["rel_diff/mean loss ÷ K"] < 1e-6
        assert record.metrics["rel_diff/mean loss, not ÷ K"] == pytest.approx(k - 1, rel=1e-5)
        assert record.metrics["allclose/BatchNorm, ÷ K"] == 0.0 and record.metrics["rel_diff/BatchNorm, ÷ K"] > 0.1, \
            f"K={k}: BatchNorm rel. diff {record.metrics['rel_diff/BatchNorm, ÷ K']:.3f}"


def test_batchnorm_in_eval_mode_accumulates_exactly_like_a_mean_loss() -> None:
    """With running statistics (eval mode) BatchNorm is a fixed affine map: accumulation holds again."""
    net = small_net(32, batchnorm=True, seed=0).eval()
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 16, generator=generator), torch.randint(0, 8, (64,), generator=generator)
    full, four = accumulated_gradient(net, x, y, 1), accumulated_gradient(net, x, y, 4)
    assert torch.allclose(four, full, rtol=1e-5, atol=1e-7), f"{((four - full).norm() / full.norm()):.2e}"


def losses(records) -> dict[int, float]:
    return {r.step: r.metrics["loss"] for r in records if isinstance(r, StepRecord) and "loss" in r.metrics}


def final_state(records) -> dict[str, float]:
    """The state fingerprints recorded after the last update."""
    return next(r.metrics for r in list(records)[::-1] if isinstance(r, StepRecord) and "state/weights" in r.metrics)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_resumed_run_is_the_uninterrupted_one_bit_for_bit(seed: int) -> None:
    """Every loss after the resume, and the weights and Adam state after the last update, bit for bit."""
    steps, at = 40, 17
    reference, again = list(uninterrupted(seed, steps, 1e-2)), list(resumed(seed, steps, 1e-2, at))
    assert sorted(losses(again)) == list(range(at, steps))
    unequal = [step for step in losses(again) if losses(again)[step] != losses(reference)[step]]
    assert not unequal, f"seed {seed}: losses differ at steps {unequal[:5]}"
    assert final_state(again) == final_state(reference), (final_state(again), final_state(reference))


@pytest.mark.parametrize("left_out", PARTS[1:])
def test_the_state_after_one_resumed_step_shows_a_part_left_out(left_out: str) -> None:
    """One step after the resume, the loss (taken before the update) is the same either way; the
    state after that update already differs."""
    steps = 12
    reference = list(uninterrupted(0, steps, 1e-2))
    other = list(resumed(0, steps, 1e-2, steps - 1, tuple(p for p in PARTS if p != left_out)))
    assert losses(other)[steps - 1] == losses(reference)[steps - 1] or left_out == "rng", "the loss before the update"
    mine, theirs = final_state(other), final_state(reference)
    differ = [key for key in mine if mine[key] != theirs[key]]
    assert differ, f"without the {left_out}: the same state {mine}"


@pytest.mark.parametrize("left_out", PARTS[1:])
def test_resuming_without_one_part_of_the_state_gives_another_run(left_out: str) -> None:
    steps, at = 40, 17
    reference = losses(uninterrupted(0, steps, 1e-2))
    other = losses(resumed(0, steps, 1e-2, at, tuple(p for p in PARTS if p != left_out)))
    gap = max(abs(other[s] - reference[s]) for s in other)
    assert gap > 1e-4, f"without the {left_out} state the largest loss difference is only {gap:.2e}"


def test_weights_only_loading_refuses_anything_but_tensors_and_plain_containers(tmp_path) -> None:
    path = tmp_path / "not_weights.pt"
    torch.save({"weights": torch.ones(2), "object": tempfile.TemporaryDirectory}, path)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)


def test_the_checkpoint_file_is_ours_and_gone_when_the_arm_ends_or_stops(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    list(resumed(0, 12, 1e-2, 5))
    assert not list(tmp_path.iterdir()), list(tmp_path.iterdir())
    stopped = resumed(0, 12, 1e-2, 5)
    for _ in range(8):  # past the save and load
        next(stopped)
    stopped.close()
    assert not list(tmp_path.iterdir()), list(tmp_path.iterdir())
