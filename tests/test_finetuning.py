"""Pretraining then fine-tuning: ULMFiT's rates, schedule and unfreezing against their formulas; the
instruction format, its loss masks and exact-match scoring against greedy decoding; the page's refusals
and its physics (ULMFiT against scratch, SFT before and after, forgetting)."""
import math

import pytest
import torch

from engines.sequence import finetune as ft
from engines.loop.training import train
from engines.sequence.instructions import (TASKS, RowBatches, answer, instruction_sets, response_scores,
                                           sft_objective)
from engines.sequence.lm import IGNORE, LMSpec, TinyLM
from scenarios import get_scenario
from scenarios.base import ConfigError

SPEC = LMSpec(256, 32, 16, 2, 2, seed=3)


def stlr_by_hand(t: int, total: int, cut_frac: float = 0.1, ratio: float = 32) -> float:
    """Howard & Ruder 2018, eq. 3, with cut ≥ 1 and p ≥ 0 (short runs)."""
    cut = max(1, math.floor(total * cut_frac))
    p = t / cut if t < cut else max(0.0, 1 - (t - cut) / (cut * (1 / cut_frac - 1)))
    return (1 + p * (ratio - 1)) / ratio


def test_discriminative_rates_divide_by_2_6_per_group_below_the_top() -> None:
    """η_l = η_L / 2.6^(L−l) exactly, one torch.optim param group per layer group of the classifier."""
    model = ft.Classifier(TinyLM(SPEC), 4, 0)
    groups = ft.param_groups(model, 0.01)
    expected = [0.01 / 2.6 ** (len(groups) - level) for level in range(1, len(groups) + 1)]
    assert [g["lr"] for g in groups] == expected, f"{[g['lr'] for g in groups]} against {expected}"
    covered = sum(p.numel() for g in groups for p in g["params"])
    used = sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in model.body.head.parameters())
    assert covered == used, f"the groups hold {covered} weights of the {used} the classifier uses"


@pytest.mark.parametrize("total", [7, 60, 333])
def test_the_slanted_triangle_follows_its_formula_in_every_group(total: int) -> None:
    """LambdaLR steps each group's rate through η_l · (1 + p(ratio−1))/ratio: peak at cut, η/ratio at the ends."""
    model = TinyLM(SPEC)
    optimizer = torch.optim.AdamW(ft.param_groups(model, 0.01))
    bases = [g["lr"] for g in optimizer.param_groups]
    scheduler = ft.slanted_triangular(optimizer, total)
    worst = 0.0
    for t in range(total):
        for group, base in zip(optimizer.param_groups, bases):
            worst = max(worst, abs(group["lr"] - base * stlr_by_hand(t, total)) / (base * stlr_by_hand(t, total)))
        optimizer.step()
        scheduler.step()
    assert worst < 1e-12, f"largest relative gap to the formula {worst:.1e}"
    factors = [ft.stlr_factor(t, total) for t in range(total)]
    cut = max(1, math.floor(0.1 * total))
    assert factors[0] == 1 / 32 and max(factors) == factors[cut] == 1.0, f"start {factors[0]}, peak at {factors.index(1.0)}"


def test_gradual_unfreezing_trains_from_the_top_and_leaves_frozen_groups_untouched() -> None:
    """Step by step the trainable groups grow from the top; a frozen group's weights do not move."""
    model = ft.Classifier(TinyLM(SPEC), 3, 1)
    groups = ft.layer_groups(model)
    unfreezing = ft.GradualUnfreezing(groups, every=2)
    optimizer = torch.optim.AdamW(ft.param_groups(model, 0.01))
    ids, lengths, labels = torch.randint(1, 256, (8, 5)), torch.full((8,), 5), torch.arange(8) % 3
    embeddings = groups[0][0].detach().clone()
    trainable = []
    for step in range(2 * len(groups)):
        unfreezing.step(step)
        trainable.append(sum(all(p.requires_grad for p in g) for g in groups))
        if step == 1:
            assert all(p.requires_grad for p in groups[-1]) and not groups[0][0].requires_grad
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(ids, lengths), labels).backward()
        optimizer.step()
        if step < 2 * (len(groups) - 1):
            assert torch.equal(groups[0][0], embeddings), f"the frozen embeddings moved at step {step}"
    assert trainable == [1, 1, 2, 2, 3, 3, 4, 4], trainable
    assert not torch.equal(groups[0][0], embeddings), "the embeddings never trained once unfrozen"


def test_the_classifier_reads_only_the_real_bytes_of_a_padded_line() -> None:
    """Whatever fills the padding, the logits are the same."""
    model = ft.Classifier(TinyLM(SPEC), 4, 2).eval()
    ids, lengths = torch.randint(1, 256, (6, 9)), torch.tensor([1, 2, 5, 9, 3, 4])
    other = ids.clone()
    other[torch.arange(9)[None, :] >= lengths[:, None]] = 7
    gap = (model(ids, lengths) - model(other, lengths)).abs().max().item()
    assert gap == 0.0, f"padding changed the logits by {gap:.2e}"


def test_held_out_instructions_share_no_input_with_training_and_every_answer_is_right() -> None:
    train, held = instruction_sets(TASKS, 4, 3, seed=5)
    text = lambda rows, i: bytes(rows.rows[i, : rows.lengths[i]].tolist()).decode()
    inputs = lambda rows: {text(rows, i).split(": ")[1].split(" → ")[0] for i in range(len(rows))}
    assert not inputs(train) & inputs(held), f"shared inputs: {sorted(inputs(train) & inputs(held))[:5]}"
    assert len(held) == 3 * round(0.25 * (16 + 64)), f"{len(held)} held-out rows"
    for rows in (train, held):
        for i in range(len(rows)):
            task, rest = text(rows, i).split(": ")
            given, said = rest.rstrip("\n").split(" → ")
            assert said == answer(task, given), f"{text(rows, i)!r}"
    assert answer("sort", "dbca") == "abcd" and answer("reverse", "dbca") == "acbd" and answer("count", "dbca") == "4"


def test_the_response_only_loss_counts_the_response_bytes_and_nothing_else() -> None:
    train, _ = instruction_sets(("reverse", "count"), 3, 3, seed=0)
    response, every = train.targets(True), train.targets(False)
    for i in range(len(train)):
        start, end = int(train.response_start[i]), int(train.lengths[i])
        counted = (response[i] != IGNORE).nonzero().flatten() + 1  # target j predicts byte j + 1
        assert counted.tolist() == list(range(start, end)), f"row {i}: {counted.tolist()} against {start}…{end - 1}"
        assert int((every[i] != IGNORE).sum()) == end - 1, f"row {i}: every-token targets miss the padding"


def test_teacher_forced_exact_match_equals_greedy_decoding() -> None:
    """One forward pass's argmax-at-every-response-byte is what greedy decoding, byte by byte, writes."""
    model = TinyLM(LMSpec(256, 32, 32, 2, 2, seed=4))
    rows, held = instruction_sets(("reverse", "count"), 3, 3, seed=1)
    steps = 80  # partly trained: some answers right, some wrong
    for _ in train(model, torch.optim.AdamW(model.parameters(), lr=1e-2), RowBatches(rows, 32, 0),
                   sft_objective(model, rows, True), steps, log_every=steps):
        pass
    model.eval()
    scored = response_scores(model, held)["instruction_accuracy"]
    right = 0
    for i in range(len(held)):
        ids = held.rows[i: i + 1, : held.response_start[i]]
        target = held.rows[i, held.response_start[i]: held.lengths[i]].tolist()
        with torch.no_grad():
            for _ in range(len(target)):
                ids = torch.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], 1)
        right += ids[0, held.response_start[i]:].tolist() == target
    greedy = right / len(held)
    assert scored == greedy and 0 < greedy < 1, f"teacher-forced {scored:.3f}, greedy {greedy:.3f}"


@pytest.mark.parametrize("overrides, field", [({"fewest_labels": 50}, "fewest_labels"), ({"most_labels": 5000}, "most_labels"),
                                              ({"fewest_labels": 600, "most_labels": 300}, "fewest_labels"),
                                              ({"symbols_per_topic": 30}, "symbols_per_topic"), ({"tasks": ""}, "tasks"),
                                              ({"branching": 4, "symbols_per_topic": 4, "topics": 2}, None)])
def test_bad_input_is_refused_before_run_naming_the_field(overrides: dict, field: str | None) -> None:
    scenario = get_scenario("pretrain-finetune")
    if field is None:  # a valid edge: as many successors as symbols
        scenario.validate(overrides)
        return
    with pytest.raises(ConfigError) as caught:
        scenario.validate(overrides)
    assert field in str(caught.value), str(caught.value)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_ulmfit_beats_scratch_with_few_labels_and_sft_teaches_held_out_instructions(seed: int) -> None:
    """Defaults: at 100 labels ULMFiT is ahead of scratch; SFT lifts held-out exact match from 0; the prose's loss rises."""
    scenario = get_scenario("pretrain-finetune")
    frame, summary = scenario.run({"seed": seed})
    accuracy = summary["classifier_accuracy"]
    ulmfit, scratch = accuracy["ULMFiT · 100 labels"], accuracy["from scratch · 100 labels"]
    assert ulmfit > scratch + 0.03, f"seed {seed}: ULMFiT {ulmfit:.3f}, scratch {scratch:.3f} at 100 labels"
    gap_most = accuracy["ULMFiT · 1000 labels"] - accuracy["from scratch · 1000 labels"]
    assert gap_most < ulmfit - scratch, f"seed {seed}: the gap at 1000 labels {gap_most:.3f} did not shrink"
    instructions, prose = summary["instruction_accuracy"], summary["prose_bpb"]
    assert min(instructions.values()) > 0.2, f"seed {seed}: held-out exact match after SFT {instructions}"
    assert prose["SFT · loss on the response"] > prose["pretraining · prose"], f"seed {seed}: prose bits per byte {prose}"


# --- what the page draws and says (the tiny run's records) ------------------------------------------
def tiny_page():
    from scenarios.records import Records
    from tests.tiny_runs import tiny_frame
    scenario = get_scenario("pretrain-finetune")
    frame, config = tiny_frame("pretrain-finetune"), scenario.validate(scenario.tiny)
    return Records(frame), scenario.figures(frame, config), str(scenario.explain(frame, config))


def test_the_sft_chart_and_its_sentence_speak_bits_per_byte_like_the_rest_of_the_page() -> None:
    """The recorded nats per byte, ÷ ln 2: the panel's y values, its axis and the sentence's numbers."""
    records, figures, text = tiny_page()
    sft = figures["sft"]
    for trace in sft.data:
        if trace.xaxis == "x2":
            arm, part = trace.name, "prompt" if trace.line.dash == "dot" else "response"
            nats = records.series(arm, f"{part}_nats").to_numpy()
            gap = max(abs(a - b / math.log(2)) for a, b in zip(trace.y, nats))
            assert gap < 1e-12, f"{arm} {part}: drawn values differ from nats/ln 2 by {gap:.1e}"
    assert sft.layout.yaxis2.title.text == "bits per byte", sft.layout.yaxis2.title.text
    assert "nats" not in text and "Held-out bits per byte after SFT" in text, text
    response = records.last("SFT · loss on the response", "response_nats") / math.log(2)
    assert f"response-only loss {response:#.3g}" in text, f"{response:.4f} bits per byte not in: {text}"


def test_the_stage_legend_names_the_arm_then_what_is_measured() -> None:
    """'pretraining · prose — measured on the prose', never 'pretraining · prose: prose'."""
    _, figures, _ = tiny_page()
    names = [t.name for t in figures["stages"].data if t.name]
    assert "pretraining · prose — measured on the prose" in names, names
    assert "LM fine-tuning · target domain — measured on the target domain" in names, names
    assert not [n for n in names if n.endswith(": prose") or ": target domain" in n], names


def test_learning_rates_listed_together_are_all_written_as_powers_of_ten() -> None:
    """5.69×10⁻⁴, 1.48×10⁻³, …: never 5.69×10⁻⁴ beside 0.00148."""
    _, _, text = tiny_page()
    rates = text.split("η_l from the embeddings up ", 1)[1].split(";", 1)[0].split(", ")
    assert len(rates) == 4 and all("×10" in r for r in rates), rates


def test_held_out_instructions_take_the_page_width_and_the_stage_legend_clears_its_axis_title() -> None:
    """The instructions chart would stand alone in its row: full width. The stage legend starts 0.3 of the
    plot's height below it (at 0.2 its first row touched the x axis's title)."""
    from scenarios.plotting import is_full_width
    _, figures, _ = tiny_page()
    assert is_full_width(figures["instructions"])
    legend = figures["stages"].layout.legend
    assert legend.orientation == "h" and legend.y <= -0.3, f"stages legend at y={legend.y}"


def test_the_forgetting_chart_fits_a_half_width_chart_and_its_8_bits_line_is_named_where_no_curve_runs() -> None:
    """Beside one-line bar names (margin 260 px) the forgetting plot was ~120 px wide and its 35-character x title
    was cut; the stages chart's "8 bits per byte" label sat where stage 2's prose curve climbs through it."""
    from scenarios.plotting import UNIFORM_BYTE_BPB, UNIFORM_BYTE_LABEL
    _, figures, _ = tiny_page()
    forgetting = figures["forgetting"]
    names = [str(name) for name in forgetting.data[0].y]
    widest = max(len(line) for name in names for line in name.split("<br>"))
    x_title = str(forgetting.layout.xaxis.title.text)
    assert widest <= 22 and len(x_title) <= 30, f"bar names up to {widest} characters a line, x title {x_title!r}"
    assert forgetting.layout.margin.l is None or forgetting.layout.margin.l <= 60, f"left margin {forgetting.layout.margin.l}"
    assert forgetting.layout.yaxis.title.standoff, "no standoff: the page drew the y title over the bar names"
    longest, room = max(forgetting.data[0].x), forgetting.layout.xaxis.range[1]
    assert room >= 1.15 * longest, f"x axis to {room:.3g} for a longest bar of {longest:.3g}: no room for its label"
    stages = figures["stages"]
    notes = [str(note.text) for note in stages.layout.annotations]
    named = [trace for trace in stages.data if trace.name == UNIFORM_BYTE_LABEL]
    assert len(named) == 1 and set(named[0].y) == {UNIFORM_BYTE_BPB}, [trace.name for trace in stages.data]
    assert not [note for note in notes if "bits per byte" in note], notes


def test_the_stages_sentence_says_which_model_each_of_its_two_close_numbers_measures() -> None:
    """Stage 1's last log (taken before its last update) and stage 2's first (the model after it) are two
    measurements a step apart (3.73 and 3.72 at the defaults): the words say so, each beside its number."""
    records, _, text = tiny_page()
    pre, domain = "pretraining · prose", "LM fine-tuning · target domain"
    last, first = records.series(pre, "prose_bpb"), records.series(domain, "prose_bpb")
    steps = get_scenario("pretrain-finetune").tiny["pretrain_steps"]
    assert int(last.index[-1]) == steps - 1 and int(first.index[0]) == 0, (last.index.tolist(), first.index.tolist())
    before = f"to {last.iloc[-1]:#.3g} bits per byte (at its last log, taken before its last update)"
    after = f"the prose's from {first.iloc[0]:#.3g} (the pretrained LM after that last update)"
    assert before in text and after in text, f"{last.iloc[-1]:.4f} and {first.iloc[0]:.4f} not said as such in: {text}"


def test_every_instruction_bar_says_its_value_and_the_sft_legend_clears_its_axis_titles() -> None:
    """Before SFT the bars are mostly 0%, and a bar of height 0 draws nothing: each bar carries its number. The SFT
    legend 0.2 of the plot's height below it touched the "SFT step" titles."""
    _, figures, _ = tiny_page()
    bars = figures["instructions"].data
    assert bars and all(bar.texttemplate == "%{y:.0%}" and bar.textposition == "outside" for bar in bars), \
        [(bar.name, bar.texttemplate, bar.textposition) for bar in bars]
    legend = figures["sft"].layout.legend
    assert legend.y <= -0.3, f"SFT legend at y={legend.y}"
