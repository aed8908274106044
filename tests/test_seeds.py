"""Seeds: a run repeated over seeds is aggregated per (arm, step, metric) and drawn as the mean
with a band built from the scenario's own figures of the low and high frames."""
import time

import pandas as pd
import plotly.graph_objects as go
import pytest
from streamlit.testing.v1 import AppTest

from explorer.page.session import start_or_load
from explorer.runs.store import RunStore
from explorer.view.seeds import SeedGroup, add_bands, aggregate, banded_figures, seeds_for
from scenarios import all_scenarios, get_scenario
from scenarios.base import COLUMNS
from tests.test_app import progress_text
from tests.tiny_runs import tiny_frame, tiny_result

SCENARIO = get_scenario("vanishing-gradients")


def test_aggregate_gives_mean_min_max_and_std_per_point() -> None:
    a = pd.DataFrame([("x", 0, "loss", 1.0), ("x", 1, "loss", 2.0)], columns=COLUMNS)
    b = pd.DataFrame([("x", 0, "loss", 3.0), ("x", 1, "loss", 2.0), ("x", 2, "loss", 5.0)], columns=COLUMNS)
    stats = aggregate([a, b])
    at = lambda key, step: stats[key].set_index("step")["value"][step]  # noqa: E731
    assert (at("mean", 0), at("min", 0), at("max", 0)) == (2.0, 1.0, 3.0)
    assert at("plus_std", 0) == pytest.approx(2.0 + 2 ** 0.5) and at("minus_std", 1) == 2.0
    assert (at("mean", 2), at("count", 2)) == (5.0, 1), "a point only one seed reached is that seed's value"
    assert list(stats["mean"].columns) == COLUMNS


def test_seeds_stay_inside_the_config_bound() -> None:
    assert seeds_for(5, 3) == [5, 6, 7]
    assert seeds_for(2**31 - 1, 3) == [2**31 - 3, 2**31 - 2, 2**31 - 1]


def test_bands_wrap_each_line_from_the_same_index_of_the_low_and_high_figures() -> None:
    def figure(y: list[float]) -> go.Figure:
        fig = go.Figure()
        fig.add_scatter(x=[0, 1, 2], y=y, name="relu", mode="lines", line=dict(color="#1f77b4"))
        fig.add_heatmap(z=[[1, 2], [3, 4]])
        return fig
    banded = add_bands(figure([2, 2, 2]), figure([1, 1, 1]), figure([3, 4, 5]))
    assert len(banded.data) == 3 and banded.data[0].fill == "toself", "one band, under the line"
    assert list(banded.data[0].y) == [3, 4, 5, 1, 1, 1] and banded.data[0].fillcolor == "rgba(31,119,180,0.2)"
    assert banded.data[1].name == "relu" and banded.data[2].type == "heatmap"


@pytest.mark.slow
@pytest.mark.parametrize("scenario", all_scenarios(), ids=lambda s: s.id)
def test_every_scenario_gets_bands_on_its_line_figures(scenario) -> None:
    """The band machinery on each scenario's own figures; the second 'seed' is the tiny run scaled by 1.1, or
    the tiny run at the next seed where scaling moved the lines themselves (x values that are records)."""
    config = scenario.validate(scenario.tiny)
    frame = tiny_frame(scenario.id)

    def banded(second):
        figures = banded_figures(scenario, aggregate([frame, second]), config, "min–max")
        return figures, [t for fig in figures.values() for t in fig.data if t.name and str(t.name).endswith("(band)")]
    figures, bands = banded(frame.assign(value=frame["value"] * 1.1))
    if not bands:  # the lines' x are records too (scaling-laws: N, D, C), so scaling moved them: a real second seed
        figures, bands = banded(tiny_result(scenario.id, seed=config.seed + 1).frame)
    assert figures and all(isinstance(f, go.Figure) for f in figures.values())
    has_lines = any(t.type == "scatter" and "lines" in (t.mode or "lines") and t.x is not None and len(t.x) > 1
                    for f in scenario.figures(frame, config).values() for t in f.data)  # a band needs two points
    assert bands or not has_lines, f"{scenario.id}: line figures but no band"


@pytest.mark.slow
def test_a_seed_group_runs_each_seed_through_the_run_manager_and_stores_it() -> None:
    store = RunStore()
    config = SCENARIO.validate({**SCENARIO.tiny, "seed": 3})
    group = SeedGroup.start(SCENARIO, config, 3, lambda s, c: start_or_load(s, c, store=store))
    assert group.join(timeout=120)
    snap = group.snapshot()
    assert snap.status == "finished" and snap.progress == 1.0
    assert sorted(r.config["seed"] for r in store.list_runs(SCENARIO.id)) == [3, 4, 5]
    again = SeedGroup.start(SCENARIO, config, 3, lambda s, c: start_or_load(s, c, store=store))
    assert again.join(timeout=60) and again.snapshot().from_store, "the second time every seed comes from the store"


def scenario_page() -> None:
    from explorer.page.scenario_page import render_scenario
    from scenarios import get_scenario
    render_scenario(get_scenario("vanishing-gradients"))


@pytest.mark.slow
def test_repeat_over_seeds_on_the_page_draws_bands_and_says_which() -> None:
    at = AppTest.from_function(scenario_page, default_timeout=60)
    at.query_params.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in SCENARIO.tiny.items()})
    at.session_state["autorun:vanishing-gradients"] = False
    at.run()
    at.sidebar.number_input(key="seeds:vanishing-gradients").set_value(2).run()
    deadline = time.time() + 120
    while at.button(key="run").disabled:  # the server's first page starts the workers
        assert time.time() < deadline, "Run never came on"
        time.sleep(0.3)
        at.run()
    at.button(key="run").click().run()
    group = at.session_state["run:vanishing-gradients"]
    assert isinstance(group, SeedGroup) and group.join(timeout=120)
    at.run()
    assert progress_text(at).startswith("Finished: 2 of 2 seeds 0–1")
    assert any("band: the figure drawn from the per-point minimum and maximum" in c.value for c in at.caption)
    assert any("(band)" in c.proto.json for c in at.get("bidi_component")), "the charts draw the bands"
