"""Collectives and DTensor, asserted on real gloo process groups: every collective's result equals
the single-process computation, the bytes each rank sends follow the ring formula, and DDP and FSDP
issue the collectives their designs say per step.

The fast tests read the tiny run the registry contract also uses (2 ranks, one 16 KiB size); the
slow ones launch 3 ranks with sizes up to 1 MiB. Leftover ranks are counted among this test's own
descendants only (tests/descendants.py).
"""
import pytest

from engines.distributed.collectives import ring_bytes
from scenarios import get_scenario
from scenarios.base import ConfigError, Machine
from scenarios.collectives.figures import count, max_error, per_rank
from scenarios.collectives.launch import OPS, TRANSITIONS
from scenarios.records import Records
from tests.descendants import ranks_alive, tag_environment
from tests.tiny_runs import tiny_result

SCENARIO = get_scenario("collectives")
HEADERS = 4096  # gloo's message headers: a few hundred bytes per call, measured 96-1200


def test_ring_formula() -> None:
    """All-reduce 2(N−1)/N·S per rank; all-gather and reduce-scatter (N−1)/N·S; nothing for a broadcast."""
    for world, factor in ((2, 1.0), (3, 4 / 3), (4, 1.5), (8, 1.75)):
        assert ring_bytes("all-reduce", 1200.0, world) == pytest.approx(factor * 1200)
        assert ring_bytes("ring all-reduce (by hand)", 1200.0, world) == pytest.approx(factor * 1200)
        assert ring_bytes("all-gather", 1200.0, world) == pytest.approx(factor / 2 * 1200)
        assert ring_bytes("reduce-scatter", 1200.0, world) == pytest.approx(factor / 2 * 1200)
    assert ring_bytes("broadcast", 1200.0, 4) is None


def check_exact(records: Records) -> None:
    error, results = max_error(records)
    expected = len(OPS) * len(records.series("all-reduce", "size_bytes")) * len(per_rank(records, "all-reduce", "seconds", 0))
    assert error == 0 and results == expected, f"largest |error| {error} over {results} results (expected {expected})"
    for step in range(len(TRANSITIONS)):
        assert records.at("DTensor", "full_tensor_exact", step) == 1.0, TRANSITIONS[step]
        assert all(v == 1.0 for v in per_rank(records, "DTensor", "exact", step)), TRANSITIONS[step]


def check_ring_bytes(records: Records) -> None:
    """Per rank, sent and received bytes are the ring formula plus headers; gloo's reduce-scatter sends
    what its all-reduce sends (to a header: 48 bytes seen)."""
    for op in ("all-reduce", "all-gather", "ring all-reduce (by hand)", "ring reduce-scatter (by hand)"):
        for step in records.series(op, "size_bytes").index:
            ring = records.at(op, "ring_bytes", step)
            for name in ("sent_bytes", "received_bytes"):
                for value in per_rank(records, op, name, step):
                    assert ring <= value + 200 and value <= ring * 1.005 + HEADERS, f"{op} step {step} {name}: {value} vs ring {ring}"
    for step in records.series("reduce-scatter", "size_bytes").index:
        scatter, reduce = (per_rank(records, op, "sent_bytes", step) for op in ("reduce-scatter", "all-reduce"))
        assert scatter == pytest.approx(reduce, abs=HEADERS), f"gloo reduce-scatter {scatter} vs all-reduce {reduce} bytes"


def check_counts(records: Records, units: int) -> None:
    """One collective of its own kind per gloo call and none for the ring by hand; per steady step DDP one
    all-reduce in backward and nothing in forward; FSDP an all-gather per unit in forward and again in
    backward, a reduce-scatter per unit; DTensor: Replicate() one all-gather, back to Shard(0) nothing."""
    kinds = ("all-reduce", "all-gather", "reduce-scatter", "broadcast")
    for op in OPS:
        for step in records.series(op, "size_bytes").index:
            issued = {kind: count(records, op, f"collectives/{kind}", step) for kind in kinds}
            expected = {kind: float(kind == op) for kind in kinds}
            assert issued == expected, f"{op} step {step}: {issued}"
    last = records.last_step("DDP", "units")
    ddp = {phase: {k: count(records, "DDP", f"{phase}/collectives/{k}", last) for k in kinds} for phase in ("forward", "backward")}
    assert ddp == {"forward": dict.fromkeys(kinds, 0.0), "backward": {**dict.fromkeys(kinds, 0.0), "all-reduce": 1.0}}, ddp
    fsdp = {name: count(records, "FSDP", name, last) for name in
            ("forward/collectives/all-gather", "backward/collectives/all-gather", "backward/collectives/reduce-scatter",
             "forward/collectives/all-reduce", "backward/collectives/all-reduce")}
    assert list(fsdp.values()) == [units, units, units, 0.0, 0.0], fsdp
    assert count(records, "DTensor", "collectives/all-gather", 1) == 1.0
    assert sum(count(records, "DTensor", f"collectives/{k}", 2) or 0 for k in kinds) == 0
    assert all(v == 0 for v in per_rank(records, "DTensor", "sent_bytes", 2))


def check_same_training(records: Records) -> None:
    """DDP and FSDP train the same seeded model on the same batches: each rank's losses agree."""
    for step in records.series("DDP", "units").index:
        ddp, fsdp = per_rank(records, "DDP", "loss", step), per_rank(records, "FSDP", "loss", step)
        assert ddp == pytest.approx(fsdp, abs=1e-6), f"step {step}: DDP {ddp} vs FSDP {fsdp}"


def test_tiny_run_is_exact_follows_the_ring_and_counts_per_design() -> None:
    records = Records(tiny_result("collectives").frame)
    check_exact(records)
    check_ring_bytes(records)
    check_counts(records, units=1.0)
    check_same_training(records)


@pytest.fixture(scope="module")
def three_ranks() -> Records:
    result = SCENARIO.run({"world_size": 3, "largest_kib": 1024, "sizes": 2, "repeats": 1, "layers": 3})
    assert result.status == "finished", result.status
    return Records(result.frame)


@pytest.mark.slow
def test_three_ranks_are_exact_follow_the_ring_and_count_per_design(three_ranks) -> None:
    """N = 3: 4/3·S per rank for an all-reduce of S; three FSDP units: 3 + 3 all-gathers and 3 reduce-scatters."""
    check_exact(three_ranks)
    check_ring_bytes(three_ranks)
    check_counts(three_ranks, units=3.0)
    check_same_training(three_ranks)
    rows = [three_ranks.at("DTensor", f"rank_{r}/local_rows", 0) for r in range(3)]
    assert rows == [4.0, 4.0, 2.0], f"Shard(0) of 10 rows over 3 ranks keeps torch.chunk's 4, 4, 2: {rows}"


def test_refusals_name_the_limit() -> None:
    """More ranks than cores (past 4) or than half the host memory holds are refused before Run."""
    small = Machine(cpus=2, memory_limit_bytes=64 * 10**9)
    assert SCENARIO.refusal(SCENARIO.validate({"world_size": 4}), small) is None
    assert "at most 4 rank processes" in SCENARIO.refusal(SCENARIO.validate({"world_size": 5}), small)
    assert SCENARIO.refusal(SCENARIO.validate({"world_size": 8}), Machine(cpus=16, memory_limit_bytes=64 * 10**9)) is None
    tight = Machine(cpus=2, memory_limit_bytes=10**9)
    assert "GB" in SCENARIO.refusal(SCENARIO.validate({"world_size": 4, "largest_kib": 16384}), tight)
    estimate = SCENARIO.estimate(SCENARIO.validate({}))
    assert 2 < estimate.seconds < 60 and estimate.bytes > 0, estimate


def test_a_refused_config_raises_before_any_rank_starts(monkeypatch) -> None:
    tag = tag_environment(monkeypatch)
    monkeypatch.setenv("EXPLORER_MEMORY_LIMIT_BYTES", str(10**8))
    with pytest.raises(ConfigError, match="GB"):
        SCENARIO.run({"world_size": 2})
    assert ranks_alive(tag) == []


class StopAtSecondNote:
    """Presses Stop at the second note: the rank processes have been started by then."""

    def __init__(self) -> None:
        self.heard: list[str] = []

    def add(self, rows) -> None: ...
    def event(self, event) -> None: ...
    def progress(self, fraction) -> None: ...

    def note(self, text: str) -> None:
        self.heard.append(text)

    def stop_requested(self) -> bool:
        return len(self.heard) > 1


@pytest.mark.slow
def test_stop_while_the_ranks_start_reaps_them_all(monkeypatch) -> None:
    tag = tag_environment(monkeypatch)
    sink = StopAtSecondNote()
    result = SCENARIO.run(SCENARIO.tiny, sink)
    assert sink.heard[0] == "starting 2 rank processes", sink.heard
    assert result.status == "stopped" and result.frame.empty
    assert ranks_alive(tag) == [], "a rank outlived Stop"


def test_the_sentence_says_why_gloos_reduce_scatter_stands_at_the_all_reduces_bytes() -> None:
    """gloo's reduce-scatter sends what its all-reduce sends (2× its ring formula at N = 2): the
    sentence says so only while the two measured bytes agree, and its ratio is re-read from the records."""
    from sentence_checks import explained_and_holding
    records = Records(tiny_result("collectives").frame)
    explanation = explained_and_holding(SCENARIO, SCENARIO.tiny, records)
    text = next(s.text for s in explanation.details if s.text.startswith("Sent ÷ the ring formula"))
    from scenarios.collectives.claims import scatter_over_reduce
    ratio = scatter_over_reduce(records)
    assert ratio is not None and abs(ratio - 1) <= 0.01, ratio
    shown = "exactly what" if ratio == 1 else f"{ratio:#.3g}× what"
    assert f"sent {shown} its all-reduce" in text and "whole all-reduce" in text, text


def test_a_fit_whose_free_latency_is_negative_holds_it_at_zero(monkeypatch) -> None:
    """Timings where the small sizes are noise gave the free fit α = −1.04 ms on a loaded machine;
    under α ≥ 0 the least squares is the line through the origin, and the legend says α was held."""
    import numpy as np

    from scenarios.collectives import figures as look
    sizes, times = np.array([1e3, 1e5, 2e5, 3e5]), np.array([1e-4, 1e-4, 2.5e-3, 4.5e-3])
    assert np.polyfit(sizes, times, 1)[1] < 0, "the free fit's intercept is negative here"
    monkeypatch.setattr(look, "seconds", lambda records, op: (sizes, times))
    alpha, bandwidth = look.fit(None, "all-reduce")
    assert alpha == 0.0 and bandwidth == pytest.approx(np.dot(sizes, sizes) / np.dot(sizes, times), rel=1e-12), \
        (alpha, bandwidth)
    assert look.fit_label((alpha, bandwidth)).startswith("α held at 0"), look.fit_label((alpha, bandwidth))


def test_the_first_metric_of_a_run_is_the_bytes_each_rank_sent_over_the_ring_formula() -> None:
    """The page's "Isolate one setting" opens on the first metric in sorted order: it is `bytes_sent_over_ring`,
    at each (op, size) the mean over ranks of the bytes sent ÷ `ring_bytes` (no broadcast: it has no ring formula)."""
    from scenarios.collectives.figures import mean_sent_over_ring
    from scenarios.collectives.launch import SENT_OVER_RING
    frame = tiny_result("collectives").frame
    records = Records(frame)
    metrics = sorted(m for m in frame["metric"].unique() if m != "diverged")
    assert metrics[0] == SENT_OVER_RING, f"first metrics in sorted order: {metrics[:3]}"
    for op in OPS:
        recorded = records.series(op, SENT_OVER_RING)
        steps = list(records.series(op, "size_bytes").index)
        if op == "broadcast":
            assert recorded.empty, f"broadcast has no ring formula, yet recorded {recorded.tolist()}"
            continue
        assert list(recorded.index) == steps, f"{op}: recorded at steps {list(recorded.index)}, sizes at {steps}"
        for step, value in recorded.items():
            assert value == pytest.approx(mean_sent_over_ring(records, op, step), rel=1e-12), (op, step, value)


def test_the_dtensor_sentence_says_which_rows_rank_0_holds_of_how_many() -> None:
    """'with Shard(0), rank 0 holds 5 of the 10 rows': both numbers re-read from the DTensor records."""
    from sentence_checks import explained_and_holding
    records = Records(tiny_result("collectives").frame)
    explanation = explained_and_holding(SCENARIO, SCENARIO.tiny, records)
    text = next(s.text for s in explanation.details if s.text.startswith("DTensor:"))
    held, rows = records.at("DTensor", "rank_0/local_rows", 0), records.at("DTensor", "rows", 0)
    assert f"with Shard(0), rank 0 holds {held:.0f} of the {rows:.0f} rows" in text, text


def test_the_presets_say_the_sizes_they_run_and_ratios_carry_the_digits_they_have() -> None:
    """The default preset read '16 KiB to 4 MiB' while its sweep ran 64 KiB to 4,096 KiB (4 sizes ×4 apart); the
    sentences read '1.000×' six times for TCP's 1.0001: three digits, or 'exactly' where the bytes agree."""
    import re
    from scenarios.collectives.claims import times
    from scenarios.collectives.launch import sizes_of
    units = {"B": 1, "KiB": 2 ** 10, "MiB": 2 ** 20}
    for name, values in SCENARIO.presets.items():
        if stated := re.search(r"([\d,]+) (B|KiB|MiB) to ([\d,]+) (B|KiB|MiB)", name):
            said = [int(stated[i].replace(",", "")) * units[stated[i + 1]] for i in (1, 3)]
            run = [4 * n for n in sizes_of(SCENARIO.validate(values))]
            assert said == [run[0], run[-1]], f"{name!r}: says {said} bytes, runs {run}"
    assert "two ranks, 64 KiB to 4 MiB" in SCENARIO.presets, list(SCENARIO.presets)
    shown = [times(1.0, "its ring formula"), times(1.0001373, "its ring formula"), times(2.000275), times(2.0, "S")]
    assert shown == ["exactly its ring formula", "1.00× its ring formula", "2.00×", "exactly 2× S"], shown
    said = SCENARIO.explain(tiny_result("collectives").frame, SCENARIO.validate(SCENARIO.tiny)).markdown()
    assert not re.findall(r"\d\.\d{3}×", said), re.findall(r"\d\.\d{3}×", said)


def test_the_dtensor_chart_names_each_colour_in_its_legend() -> None:
    """A heatmap has no legend of its own: the grey, blue and orange cells each get an entry naming who holds them."""
    from scenarios.collectives.figures import dtensor_figure
    figure = dtensor_figure(Records(tiny_result("collectives").frame))
    named = [trace.name for trace in figure.data if trace.type == "scatter" and trace.showlegend is not False]
    assert named == ["rank 0", "rank 1", "every rank (replicated)"], named
