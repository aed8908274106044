"""Batched arms' memory, asserted: a sweep too large for the machine is refused before Run with the
estimate, and the estimate's weights are the batched model's own."""
import pytest
import torch

from engines.loop import arms_memory
from scenarios import all_scenarios, get_scenario
from scenarios.base import Machine, host_memory

BATCHED = ["dpo-beta", "distillation-temperature", "contrastive", "generalization", "lora-rank"]


@pytest.mark.parametrize("scenario_id", BATCHED)
def test_a_sweep_too_large_for_the_machine_is_refused_with_the_estimate(scenario_id: str) -> None:
    scenario = get_scenario(scenario_id)
    config = scenario.validate({})
    need = scenario.batched_bytes(config)
    roomy, cramped = Machine(cpus=2, memory_limit_bytes=int(4 * need)), Machine(cpus=2, memory_limit_bytes=int(need))
    assert scenario.refusal(config, roomy) is None, scenario.refusal(config, roomy)
    said = scenario.refusal(config, cramped)
    assert said is not None and f"{need / 1e6:,.1f} MB" in said and "arms trained as one batched model" in said, said
    assert scenario.refusal(config, Machine(cpus=2)) is None, "host memory unknown: nothing to refuse on"


def test_more_arms_need_proportionally_more() -> None:
    scenario = get_scenario("dpo-beta")
    two, eight = (scenario.batched_bytes(scenario.validate({"betas": b})) for b in ("0.1,1", "0.02,0.05,0.1,0.2,0.5,1,2,5"))
    assert eight == pytest.approx(4 * two), f"8 arms {eight:.0f} B vs 2 arms {two:.0f} B"


def weights_of(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_the_estimates_count_the_batched_models_own_weights() -> None:
    """Per arm, the arithmetic of each refusal counts what the engines build."""
    from engines.rl.dpo_tasks import TinyLM
    from engines.supervised.contrastive import encoder
    from engines.supervised.distill import mlp
    from engines.supervised.generalization import DropoutMLP
    from engines.supervised.lora import FrozenBase
    from engines.supervised.lora_arms import PaddedLoRA
    from scenarios.dpo_beta import SEQUENCE_WEIGHTS
    counted = {
        "dpo-beta TinyLM": (SEQUENCE_WEIGHTS, weights_of(TinyLM(4, 32, 5, seed=0))),
        "distillation student": (arms_memory.linear_weights(16, 24, 10), weights_of(mlp(16, 24, 1, 10, seed=0))),
        "contrastive encoder": (arms_memory.linear_weights(32, 64, 64, 6), weights_of(encoder(6, seed=0))),
        "generalization MLP": (arms_memory.linear_weights(10, 48, 48, 4), weights_of(DropoutMLP(48, 0.5, 0))),
        "lora-rank adapters": (2 * 2 * 2 * 8 * 64,  # 2 arms, padded to rank 8, A and B, fc1 and fc2
                               sum(p.numel() for p in PaddedLoRA(FrozenBase(0), [2, 8], "alpha = 2r", ("fc1", "fc2"),
                                                                 [0, 1]).parameters() if p.requires_grad)),
    }
    wrong = {name: pair for name, pair in counted.items() if pair[0] != pair[1]}
    assert not wrong, f"(estimated, built) weights that differ: {wrong}"


@pytest.mark.parametrize("scenario_id", [s.id for s in all_scenarios()])
def test_every_refusal_reads_only_what_a_machine_says(scenario_id: str) -> None:
    """Each scenario's refusal runs on this machine's facts and on a machine that knows nothing of its memory."""
    scenario = get_scenario(scenario_id)
    for overrides in ({}, scenario.tiny):
        for machine in (Machine(cpus=2, **host_memory()), Machine(cpus=2)):
            said = scenario.refusal(scenario.validate(overrides), machine)
            assert said is None or isinstance(said, str), f"{scenario_id}: {said!r}"
