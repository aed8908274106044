"""RLVR with GRPO, asserted: the checker, group advantages (zero for equal rewards, exactly), the loss's
zero gradient for such a group, the std's weight 1/√(p(1 − p)), the clipped surrogate with its KL term,
the two length normalisations, and the default run: held-out accuracy from chance past 90%."""
import math

import pytest
import torch

from engines.rl import digit_sum, grpo
from engines.sequence.lm import LMSpec, TinyLM
import scenarios.rlvr_grpo as rlvr
from scenarios import get_scenario
from scenarios.base import ConfigError
from scenarios.records import Records
from scenarios.rlvr_grpo import claims
from scenarios.rlvr_grpo.figures import DR, GRPO, WARM
from tests.sentence_checks import problems

SCENARIO = get_scenario("rlvr-grpo")
E = digit_sum.EOS


def model_and_task(seed: int = 0, bits: int = 5, max_len: int = 6) -> tuple[TinyLM, digit_sum.Task]:
    task = digit_sum.Task.make(bits, max_len, 0.25, seed)
    return TinyLM(LMSpec(digit_sum.VOCAB, context=bits + 1 + max_len, seed=seed)), task


def test_the_checker_reads_the_token_before_eos() -> None:
    """Filler before the answer is allowed; no EOS, or EOS first, is wrong; |o| counts up to the first EOS."""
    task = digit_sum.Task.make(5, 6, 0.25, 0)
    prompt = torch.tensor([[1, 0, 1, 1, 0, digit_sum.EQUALS]] * 5)  # three ones
    responses = torch.tensor([[3, E, E, E, E, E], [digit_sum.FILL, digit_sum.FILL, 3, E, 7, 7], [2, E, E, E, E, E],
                              [3, 3, 3, 3, 3, 3], [E, 3, E, E, E, E]])
    rewards, lengths = digit_sum.rewards_of(task, prompt, responses)
    assert rewards.tolist() == [1, 1, 0, 0, 0], rewards.tolist()
    assert lengths.tolist() == [2, 4, 2, 6, 1], lengths.tolist()


def test_balanced_draws_give_every_answer_alike() -> None:
    task = digit_sum.Task.make(6, 8, 0.25, 0)
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
    responses = digit_sum.sample(model, prompts, task.max_len, generator)
    _, lengths = digit_sum.rewards_of(task, prompts, responses)
    mask = digit_sum.response_mask(lengths, task.max_len)
    for value in (0.0, 1.0):
        rewards = torch.full((1, 4), value, dtype=torch.float64)
        for std in (True, False):
            advantages = grpo.group_advantages(rewards, std)
            assert torch.equal(advantages, torch.zeros_like(advantages)), (value, std, advantages)
            for shift in (0.0, 0.3):
                model.zero_grad()
                logps = digit_sum.token_logps(model, prompts, responses)
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
    responses = digit_sum.sample(model, prompts, task.max_len, generator)
    _, lengths = digit_sum.rewards_of(task, prompts, responses)
    rewards = torch.zeros(3, group, dtype=torch.float64)
    rewards[0, :1], rewards[1, : group // 2], rewards[2] = 1.0, 1.0, 1.0  # p = 1/G, 1/2, 1
    batch = grpo.Rollout(prompts, responses, digit_sum.response_mask(lengths, task.max_len), None, rewards, None, lengths)
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
    mask = digit_sum.response_mask(lengths, width)
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
    mask = digit_sum.response_mask(torch.tensor([2, 5]), 5)
    advantages = torch.tensor([-1.0, -1.0], dtype=torch.float64)
    for length_norm, short, long in ((True, 1 / 2, 1 / 5), (False, 1 / 5, 1 / 5)):
        logps.grad = None
        loss, _ = grpo.grpo_loss(logps, logps.detach(), logps.detach(), advantages, mask, clip=0.2, beta=0.0,
                                 length_norm=length_norm)
        loss.backward()
        per_token = logps.grad * 2  # the loss is the mean over the 2 responses
        assert per_token[0, 0].item() == pytest.approx(short) and per_token[1, 0].item() == pytest.approx(long), \
            (length_norm, per_token.tolist())


def warm_model(seed: int = 0) -> tuple[TinyLM, digit_sum.Task, dict[str, float]]:
    """The default warm start at `seed` (~0.5 s): answers at chance, after 0…3 fillers; and its final record."""
    config = SCENARIO.validate({})
    task = digit_sum.Task.make(config.bits, config.max_len, rlvr.HELDOUT_SHARE, seed)
    spec = LMSpec(digit_sum.VOCAB, context=config.bits + 1 + config.max_len, seed=seed, **rlvr.LM)
    built: dict = {}
    records = [r for r in grpo.warm_start(task, spec, config.warm_steps, rlvr.WARM_LR, rlvr.WARM_BATCH, seed, 20, built)
               if r is not None]
    return built["reference"], task, records[-1].metrics


def test_the_warm_start_writes_the_format_at_chance() -> None:
    """After the default warm start, every greedy held-out response ends with EOS after a digit, and sampled
    held-out accuracy is below 30% (chance 1/9 at 8 bits)."""
    model, task, final = warm_model()
    assert final["heldout/accuracy"] < 0.3, final
    answer, _ = digit_sum.parse(digit_sum.sample(model, task.heldout, task.max_len, None, greedy=True))
    assert ((answer >= 0) & (answer < digit_sum.DIGITS)).all(), answer.tolist()


def test_the_warm_start_teaches_the_lengths_fill_allows() -> None:
    """`fill` = 5: the warm start's sampled responses run from 2 to 7 tokens (0…5 fillers, a digit, EOS),
    longer on average than at fill = 0 (every response 2 tokens: a digit, EOS)."""
    means = {}
    for fill in (0, 5):
        task = digit_sum.Task.make(6, 9, 0.25, 0)
        spec = LMSpec(digit_sum.VOCAB, context=6 + 1 + 9, seed=0, **rlvr.LM)
        built: dict = {}
        for _ in grpo.warm_start(task, spec, 150, rlvr.WARM_LR, rlvr.WARM_BATCH, 0, 50, built, fill=fill):
            pass
        prompts = task.train.repeat(4, 1)
        _, lengths = digit_sum.parse(digit_sum.sample(built["reference"], prompts, task.max_len, torch.Generator().manual_seed(0)))
        means[fill] = lengths.double().mean().item()
        if fill == 5:
            assert lengths.max().item() >= 6, lengths.bincount().tolist()
    assert means[0] < 2.2 and means[5] > 3.5, means


def test_where_the_answers_sit_counts_every_answered_sample_once() -> None:
    """`answer_at/k` is the share of the evaluation's sampled held-out responses (the same draws, replayed) whose
    answer came after k tokens: the shares add up to the answered share, and Σ (k + 2)·share is their total length."""
    model, task, _ = warm_model()
    out = digit_sum.evaluate(model, task, torch.Generator().manual_seed(5))
    responses = digit_sum.sample(model, task.heldout.repeat(4, 1), task.max_len, torch.Generator().manual_seed(5))
    answer, lengths = digit_sum.parse(responses)
    answered = answer >= 0
    shares = [out[f"answer_at/{k}"] for k in range(task.max_len - 1)]
    assert math.isclose(sum(shares), answered.double().mean().item(), rel_tol=1e-12), (shares, answered.double().mean())
    total = sum((k + 2) * v for k, v in enumerate(shares)) * len(responses)
    assert math.isclose(total, lengths[answered].double().sum().item(), rel_tol=1e-9), (total, lengths[answered].sum())
    assert sum(v > 0 for v in shares) >= 3, f"the warm start answers after 0…3 tokens: {shares}"


def test_forced_accuracy_is_what_greedy_decoding_answers_there() -> None:
    """Where greedy decoding writes k fillers then a digit, that digit is the one `forced_accuracy` reads after k
    fillers (the full pass against the key/value cache): what the place figure's lines measure is what the policy
    would answer there. One pass over the longest run of fillers gives what a pass per k gives."""
    model, task, _ = warm_model(seed=1)
    most = task.max_len - 2
    with torch.no_grad():  # a pass per k, and one causal pass over the most fillers
        apart = [model(torch.cat([task.heldout, torch.full((len(task.heldout), k), digit_sum.FILL)], 1))[:, -1]
                 for k in range(most + 1)]
        whole = model(torch.cat([task.heldout, torch.full((len(task.heldout), most), digit_sum.FILL)], 1))
    responses = digit_sum.sample(model, task.heldout, task.max_len, None, greedy=True)
    answer, lengths = digit_sum.parse(responses)
    checked = 0
    for k in range(most + 1):
        rows = ((answer >= 0) & (lengths == k + 2) & (responses[:, :k] == digit_sum.FILL).all(-1)).nonzero()[:, 0]
        read = apart[k][rows, :digit_sum.DIGITS].argmax(-1)
        assert torch.equal(read, answer[rows]), (k, read.tolist(), answer[rows].tolist())
        checked += len(rows)
    assert checked >= len(task.heldout) // 2, f"only {checked} of {len(task.heldout)} greedy answers after fillers"
    gap = max((whole[:, task.heldout.shape[1] - 1 + k] - apart[k]).abs().max().item() for k in range(most + 1))
    assert gap < 1e-4, f"one pass against a pass per k: logits differ by up to {gap}"
    accuracies = [(a[:, :digit_sum.DIGITS].argmax(-1) == task.answers(task.heldout)).double().mean().item() for a in apart]
    forced = digit_sum.forced_accuracy(model, task, most)
    assert all(abs(f - a) <= 1 / len(task.heldout) for f, a in zip(forced, accuracies)), (forced, accuracies)


def test_the_place_figure_draws_the_recorded_shares_and_accuracies() -> None:
    """Bars: each arm's last `answer_at/k`; lines: its last `forced_at/k`; the chance line at 1/(bits + 1)."""
    from tests.tiny_runs import tiny_frame
    frame = tiny_frame(SCENARIO.id)
    records = Records(frame)
    figure = SCENARIO.figures(frame, SCENARIO.validate(SCENARIO.tiny))["answer_place"]
    for arm in (GRPO, DR, WARM):
        bars = next(t for t in figure.data if t.name == f"{arm}: share of answers")
        line = next(t for t in figure.data if t.name == f"{arm}: greedy accuracy there")
        assert list(bars.y) == [records.last(arm, f"answer_at/{k}") for k in bars.x], (arm, bars.y)
        assert list(line.y) == [records.last(arm, f"forced_at/{k}") for k in line.x], (arm, line.y)
    chance_line = next(t for t in figure.data if t.name.startswith("chance"))
    assert chance_line.y[0] == 1 / (SCENARIO.validate(SCENARIO.tiny).bits + 1), chance_line.y


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
    assert "Where the answers sit" in text and "right after '='" in text, text
    assert records.has("heldout/accuracy", DR) and records.has("loss", WARM)


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
