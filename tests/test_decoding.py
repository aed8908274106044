"""The key/value cache decodes what the full forward pass scores, and refuses what it cannot hold."""
import pytest
import torch

from engines.sequence.decoding import Cache
from engines.sequence.lm import LMSpec, TinyLM


@pytest.mark.parametrize("layers, heads", [(1, 2), (3, 4)])
def test_cached_logits_equal_the_full_forward_pass(layers: int, heads: int) -> None:
    model = TinyLM(LMSpec(vocab=13, context=20, d_model=32, layers=layers, heads=heads, seed=3)).eval()
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(13, (6, 9), generator=generator)
    cache, logits = Cache.prefill(model, ids)
    gaps = []
    for _ in range(11):  # up to the context's last position
        with torch.no_grad():
            full = model(ids)[:, -1]
        gaps.append(float((logits - full).abs().max()))
        nxt = torch.randint(13, (6, 1), generator=generator)
        ids = torch.cat([ids, nxt], 1)
        if ids.shape[1] < 20:
            logits = cache.step(nxt)
    assert max(gaps) < 1e-5 and cache.length == 19, (gaps, cache.length)


def test_a_full_cache_and_an_encoder_are_refused() -> None:
    model = TinyLM(LMSpec(vocab=5, context=4, seed=0))
    cache, _ = Cache.prefill(model, torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="context is 4"):
        cache.step(torch.zeros(2, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="causal"):
        Cache.prefill(TinyLM(LMSpec(vocab=5, context=4, causal=False, seed=0)), torch.zeros(2, 3, dtype=torch.long))
