"""The tiny language model: causal masking, masked-LM corruption, sampling, units of the loss, probes."""
import math

import torch
import torch.nn.functional as F

from engines.sequence.attention import SelfAttention, written_attention
from engines.sequence.lm import (IGNORE, LMSpec, TinyLM, WindowBatches, bits_per_byte, evaluation_windows, generate,
                                 lm_arm, mask_tokens, next_token_objective, perplexity, scheduled_sampling_objective,
                                 token_nll)


def test_a_causal_model_never_reads_the_future_and_a_bidirectional_one_does() -> None:
    """Changing the last token moves no earlier logit in the causal model; in the bidirectional one it moves them."""
    ids = torch.randint(0, 20, (3, 12), generator=torch.Generator().manual_seed(0))
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 20
    for causal in (True, False):
        model = TinyLM(LMSpec(20, 16, causal=causal, seed=1))
        moved = (model(ids)[:, :-1] - model(changed)[:, :-1]).abs().max().item()
        assert (moved == 0.0) if causal else (moved > 1e-4), f"causal={causal}: earlier logits moved by {moved:.2e}"


def test_causal_sdpa_equals_the_written_out_masked_softmax() -> None:
    q, k, v = torch.randn(3, 2, 2, 7, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64).unbind(0)
    gap = (F.scaled_dot_product_attention(q, k, v, is_causal=True) - written_attention(q, k, v, causal=True)[0]).abs().max()
    assert gap < 1e-12, f"max |SDPA − written| = {gap:.2e}"
    weights = SelfAttention(8, 2, causal=True).weights(torch.randn(1, 5, 8))
    assert weights.triu(1).abs().max() == 0, "a causal weight above the diagonal"


def test_masked_lm_corruption_is_fifteen_percent_split_80_10_10() -> None:
    ids = torch.randint(0, 50, (400, 64), generator=torch.Generator().manual_seed(3))
    inputs, targets = mask_tokens(ids, mask_id=50, vocab=50, rate=0.15, generator=torch.Generator().manual_seed(4))
    chosen = targets != IGNORE
    share = chosen.float().mean().item()
    masked = (inputs[chosen] == 50).float().mean().item()
    kept = (inputs[chosen] == ids[chosen]).float().mean().item()
    assert abs(share - 0.15) < 0.005 and abs(masked - 0.8) < 0.01, f"chosen {share:.3f}, [MASK] {masked:.3f}"
    assert 0.1 < kept < 0.11 + 0.01, f"kept {kept:.3f} (10% kept plus random picks that land on the same token)"
    assert torch.equal(inputs[~chosen], ids[~chosen])


def test_the_loss_units_agree() -> None:
    """A uniform model: ln V nats per token, perplexity V, bits per byte log2 V / bytes per token."""
    model = TinyLM(LMSpec(32, 8, seed=0))
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.zero_()
    windows = evaluation_windows(torch.arange(200) % 32, 8)
    nll = token_nll(model, windows)
    assert nll.shape == (len(windows), 8) and torch.allclose(nll, torch.full_like(nll, math.log(32)))
    assert abs(perplexity(math.log(32)) - 32) < 1e-9 and abs(bits_per_byte(math.log(32), 2.5) - 5 / 2.5) < 1e-12


def test_sampling_is_seeded_and_temperature_raises_the_entropy() -> None:
    model = TinyLM(LMSpec(30, 16, seed=5))
    prompt = torch.zeros(8, 1, dtype=torch.long)
    runs = [generate(model, prompt, 10, 1.0, torch.Generator().manual_seed(6)).ids for _ in range(2)]
    assert torch.equal(*runs)
    entropies = [generate(model, prompt, 6, t, torch.Generator().manual_seed(6)).entropy[:, 0].mean().item()
                 for t in (0.25, 1.0, 4.0)]
    assert entropies[0] < entropies[1] < entropies[2] < math.log(30), entropies


def test_scheduled_sampling_at_share_zero_is_teacher_forcing() -> None:
    model = TinyLM(LMSpec(12, 8, seed=7))
    window = torch.randint(0, 12, (4, 9), generator=torch.Generator().manual_seed(8))
    plain = next_token_objective(model)(window, False)
    scheduled, metrics = scheduled_sampling_objective(model, lambda step: 0.0, seed=0)(window, True)
    assert torch.equal(plain, scheduled) and metrics["own_share"].item() == 0.0


def test_the_probe_records_every_block_and_the_model_is_seeded() -> None:
    spec = LMSpec(16, 8, layers=2, seed=9)
    torch.manual_seed(123)
    a = TinyLM(spec)
    torch.manual_seed(456)
    b = TinyLM(spec)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    records = [r for r in lm_arm(a, WindowBatches(torch.arange(500) % 16, 8, 4, 0), 3, lr=1e-3, log_every=1) if r]
    names = set(records[-1].metrics)
    for kind in ("grad_norm", "act_std", "out_grad", "update_ratio"):
        assert {f"{kind}/layer_01", f"{kind}/layer_02"} <= names, (kind, sorted(names))
