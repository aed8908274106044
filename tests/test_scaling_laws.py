"""Scaling laws: the fit recovers a known law, the closed-form optimum is the isoFLOP minimum, parameters
are counted as stated, the point cache trains only new points (and changes no record), and at fixed D the
loss falls with N until the data run out."""
import math

import numpy as np
import pytest

from engines.loop.runtime import configure
from engines.sequence.scaling import Data, PointSpec, counts, train_point
from engines.sequence.scaling_fit import fit_law
from engines.sequence.scaling_law import Law, budgets
from scenarios import get_scenario
from scenarios.base import ConfigError
from scenarios.points import MemoryPoints
from scenarios.records import Records
from scenarios.scaling_laws.grid import FIT, GRID, OPTIMUM, grid_table
from tests.sentence_checks import explained_and_holding

SCENARIO = get_scenario("scaling-laws")
TRUE = Law(E=1.1, A=40.0, B=300.0, alpha=0.4, beta=0.45)
N = np.repeat([1.8e3, 6.6e3, 1.4e4, 2.5e4, 5.6e4], 4)
D = np.tile([1.28e4, 2.56e4, 5.12e4, 1.024e5], 5)

configure()


def test_fitting_exact_losses_recovers_the_law() -> None:
    """Losses made from known (E, A, B, α, β) on the default grid's N × D: each recovered to 1e-4 relative."""
    law, objective = fit_law(N, D, TRUE.loss(N, D))
    for name in ("E", "A", "B", "alpha", "beta"):
        got, want = getattr(law, name), getattr(TRUE, name)
        assert abs(got - want) <= 1e-4 * want, f"{name}: fitted {got:.6g}, true {want} (objective {objective:.2e})"


@pytest.mark.parametrize("seed", [0, 1])
def test_fitting_noisy_losses_recovers_the_law_within_tolerance(seed) -> None:
    """With 0.5% log-normal noise on every loss: E within 15%, α and β within 0.06, a = β/(α+β) within 0.03."""
    noisy = TRUE.loss(N, D) * np.exp(np.random.default_rng(seed).normal(0, 0.005, N.shape))
    law, _ = fit_law(N, D, noisy)
    assert abs(law.E - TRUE.E) <= 0.15 * TRUE.E, f"E fitted {law.E:.4f}, true {TRUE.E}"
    assert abs(law.alpha - TRUE.alpha) <= 0.06, f"α fitted {law.alpha:.4f}, true {TRUE.alpha}"
    assert abs(law.beta - TRUE.beta) <= 0.06, f"β fitted {law.beta:.4f}, true {TRUE.beta}"
    assert abs(law.a - TRUE.a) <= 0.03, f"a fitted {law.a:.4f}, true {TRUE.a:.4f}"


def test_the_closed_form_optimum_is_the_minimum_of_the_isoflop_curve() -> None:
    for compute in (1e9, 1e11, 1e13):
        n = np.geomspace(10, 1e9, 200_001)
        searched = n[np.argmin(TRUE.isoflop(compute, n))]
        n_opt, d_opt = TRUE.optimum(compute)
        assert abs(math.log(searched / n_opt)) < 1e-3, f"C={compute:.0e}: search {searched:.4g}, closed form {n_opt:.4g}"
        assert abs(6 * n_opt * d_opt / compute - 1) < 1e-9, f"6·N·D = {6 * n_opt * d_opt:.4g}, C = {compute:.4g}"
    assert abs(TRUE.a + TRUE.b - 1) < 1e-12 and abs(TRUE.a - 0.45 / 0.85) < 1e-12, f"a {TRUE.a}, b {TRUE.b}"


def test_compute_budgets_lie_inside_the_grid() -> None:
    compute = 6 * N * D
    chosen = budgets(compute, 4)
    assert 3 <= len(chosen) <= 4 and chosen.min() > compute.min() and chosen.max() < compute.max(), chosen


@pytest.mark.parametrize("width", [8, 48])
def test_parameters_are_counted_with_and_without_embeddings(width) -> None:
    """Non-embedding: 2 blocks of 12d² + 13d and a final LayerNorm; with embeddings: + token, position, read-out."""
    got = counts(width)
    body = 2 * (12 * width ** 2 + 13 * width) + 2 * width
    assert got["body_params"] == body, f"d={width}: body {got['body_params']}, expected {body}"
    assert got["total_params"] == body + 16 * width + 16 * width + 16 + 16 * width, got


class Counting(MemoryPoints):
    """A point cache that counts what it is asked."""

    def __init__(self) -> None:
        super().__init__()
        self.puts = 0

    def put(self, key, metrics) -> None:
        self.puts += 1
        super().put(key, metrics)


def trained(result) -> int:
    return sum(e.kind == "point" and e.message.endswith("trained") for e in result.events)


def test_a_rerun_with_one_more_size_trains_only_the_new_points() -> None:
    cache, config = Counting(), {"sizes": 3, "budgets": 2, "compute_budgets": 3, "seed": 2}
    first = SCENARIO.run(config, points=cache)
    assert trained(first) == 6 and cache.puts == 6, f"first run: {trained(first)} trained, {cache.puts} kept"
    wider = SCENARIO.run({**config, "sizes": 4}, points=cache)
    assert trained(wider) == 2 and cache.puts == 8, f"rerun with one more size: {trained(wider)} trained, {cache.puts} kept"
    fresh = SCENARIO.run({**config, "sizes": 4})
    assert trained(fresh) == 8
    assert wider.frame.equals(fresh.frame), "the records of a rerun from the cache differ from a fresh run's"
    assert len(grid_table(Records(fresh.frame))) == 8


def test_the_run_store_keeps_points_exactly(tmp_path) -> None:
    from explorer.runs.points import StorePoints, points_of
    from explorer.runs.store import RunStore
    store = RunStore(tmp_path / "runs.sqlite3")
    points = points_of(store)
    assert points.get("absent") is None, "a store that never kept a point answers None"
    metrics = {"loss": 1 / 3, "nan": math.nan, "inf": math.inf, "tiny": 5e-324}
    points.put("k", metrics)
    back = StorePoints(store.path).get("k")
    assert back["loss"] == 1 / 3 and math.isnan(back["nan"]) and back["inf"] == math.inf and back["tiny"] == 5e-324, back


def test_the_page_hands_its_store_to_the_worker(tmp_path) -> None:
    from explorer.runs.handle import RunHandle
    from explorer.runs.store import RunStore
    store = RunStore(tmp_path / "runs.sqlite3")
    request = RunHandle(SCENARIO, SCENARIO.validate({}), store).request()
    assert request["store"] == str(store.path), request
    assert "store" not in RunHandle(SCENARIO, SCENARIO.validate({})).request()
    retrain = RunHandle(SCENARIO, SCENARIO.validate({}), store)
    retrain.fresh = True  # the page's "Retrain instead of using the stored result"
    assert "store" not in retrain.request(), "a retrain reused the stored grid points"


def test_a_store_the_points_cannot_use_is_a_miss_not_a_failure(tmp_path) -> None:
    """A path in a folder that does not exist (a Ray node's view of the page's store), or a file that is
    no SQLite database: every point is trained, none kept, and the run goes on."""
    from explorer.runs.points import StorePoints
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not a database" * 100)
    for path in (tmp_path / "no" / "such" / "folder" / "runs.sqlite3", junk):
        points = StorePoints(path)
        points.put("k", {"loss": 1.0})
        assert points.get("k") is None, path


@pytest.mark.parametrize("bad", [{"sizes": 9}, {"sizes": 2}, {"budgets": 7}, {"compute_budgets": 5}, {"lr": 0.5}])
def test_configs_out_of_range_are_refused(bad) -> None:
    with pytest.raises(ConfigError):
        SCENARIO.validate(bad)


def test_at_fixed_tokens_a_larger_model_gains_much_less_when_data_is_short() -> None:
    """Fast: d_model 8 against 24 at 25 steps (12,800 tokens) and at 200 steps (102,400 tokens)."""
    data = Data(0)
    loss = {(w, s): train_point(PointSpec(w, s, 2e-2, 0, 0), data)["heldout_loss"] for w in (8, 24) for s in (25, 200)}
    short, long = loss[8, 25] - loss[24, 25], loss[8, 200] - loss[24, 200]
    assert long > 0.3, f"at 102,400 tokens the larger model gains only {long:.3f} nats ({loss})"
    assert 0 < short < 0.6 * long, f"gain at 12,800 tokens {short:.3f} vs at 102,400 {long:.3f} ({loss})"
    assert min(loss.values()) > data.entropy_rate, f"a loss below the entropy rate {data.entropy_rate:.4f}: {loss}"


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_on_the_default_grid_loss_falls_with_n_until_it_is_data_limited(seed) -> None:
    """At the largest D the loss falls with N at every step; the smallest-D row gains less than half as much."""
    frame, summary = SCENARIO.run({"seed": seed})
    table = grid_table(Records(frame)).pivot(index="width", columns="tokens", values="heldout_loss")
    largest, smallest = table[table.columns.max()], table[table.columns.min()]
    assert (largest.diff().dropna() < 0).all(), f"seed {seed}: at D={table.columns.max():,.0f} the loss by width is {largest.round(4).to_dict()}"
    gain_small, gain_large = smallest.iloc[0] - smallest.iloc[-1], largest.iloc[0] - largest.iloc[-1]
    assert gain_small < 0.5 * gain_large, f"seed {seed}: gain {gain_small:.3f} at the smallest D vs {gain_large:.3f}"
    assert (table.to_numpy() > Records(frame).first("source", "entropy_rate")).all(), table


@pytest.mark.parametrize("overrides", [
    {"seed": 3, "sizes": 3, "budgets": 2, "lr": 0.01, "compute_budgets": 3},
    pytest.param({"seed": 7, "sizes": 4, "budgets": 3, "count": "with embeddings"}, marks=pytest.mark.slow),
    pytest.param({"seed": 1, "sizes": 6, "budgets": 4, "lr": 0.005}, marks=pytest.mark.slow)])
def test_every_claim_holds_off_the_defaults(overrides) -> None:
    result = SCENARIO.run(overrides)
    config, records = SCENARIO.validate(overrides), Records(result.frame)
    explained_and_holding(SCENARIO, overrides, records)
    assert records.has("a", FIT[config.count]) and len(records.series(OPTIMUM[config.count], "n_opt")) >= 2
    assert len(grid_table(records)) == config.sizes * config.budgets and records.has("heldout_loss", GRID)


def test_through_the_worker_a_rerun_with_one_more_size_trains_only_the_new_points(tmp_path) -> None:
    """The page's path: the handle names its store, the worker keeps each point there; a second run with a
    wider grid trains 2 of its 8 points."""
    import threading
    from explorer.runs import worker
    from explorer.runs.handle import RunHandle
    from explorer.runs.store import RunStore
    store = RunStore(tmp_path / "runs.sqlite3")
    counted = []
    for sizes in (3, 4):
        handle = RunHandle(SCENARIO, SCENARIO.validate({"sizes": sizes, "budgets": 2, "compute_budgets": 3}), store)
        sent: list[dict] = []
        worker.train({"id": handle.id, **handle.request()}, sent.append, threading.Event())
        assert sent[-1]["status"] == "finished", sent[-1]
        counted.append(sum(m["kind"] == "event" and m["event"]["message"].endswith(": trained") for m in sent))
    assert counted == [6, 2], f"points trained by the first and the wider run: {counted}"


def test_compute_budgets_and_the_fitted_floor_are_written_as_powers_of_ten_like_the_axes() -> None:
    """The isoFLOP legend writes C as 5×10⁸ (the next chart's axis does), the title names the shaded band, and the
    law's sentence writes a tiny E as 4.58×10⁻⁴, the way the floor sentence does (not 0.000458 beside it)."""
    from tests.tiny_runs import tiny_frame
    frame = tiny_frame(SCENARIO.id)
    config = SCENARIO.validate(SCENARIO.tiny)
    figure = SCENARIO.figures(frame, config)["isoflop"]
    names = [t.name for t in figure.data if t.showlegend is not False]
    assert names and all("×10" in n or n.startswith("C = 10") for n in names) and not any("e+" in n for n in names), names
    assert "shaded: the sizes measured" in figure.layout.title.text, figure.layout.title.text
    tiny = Records(frame).frame.assign(value=lambda f: f["value"].where(
        ~((f["arm"] == FIT["non-embedding"]) & (f["metric"] == "E")), 4.58e-4))
    from scenarios.scaling_laws.claims import floor_sentence, law_sentence
    law, floor = law_sentence(Records(tiny), "non-embedding").text, floor_sentence(Records(tiny), "non-embedding").text
    assert "E = 4.58×10⁻⁴" in law and "E at 4.58×10⁻⁴" in floor, (law, floor)


def test_every_exponent_label_has_room_past_its_bar() -> None:
    """The labels stand outside the bars: at 1.15 × the longest bar (Kaplan's 0.73) its "0.73" was cut at the
    plot's edge; the axis runs to 1.3 × it, and no label is clipped at the axis."""
    from tests.tiny_runs import tiny_frame
    figure = SCENARIO.figures(tiny_frame(SCENARIO.id), SCENARIO.validate(SCENARIO.tiny))["exponents"]
    longest = max(v for bar in figure.data for v in bar.x)
    end = figure.layout.xaxis.range[1]
    assert end >= 1.3 * longest - 1e-9, f"x axis ends at {end:.3f} for a longest bar of {longest:.3f}"
    assert all(bar.textposition == "outside" and bar.cliponaxis is False for bar in figure.data), \
        [(bar.name, bar.textposition, bar.cliponaxis) for bar in figure.data]
