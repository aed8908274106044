"""Compare: stored runs overlaid on the current figures (labelled by what differs), and the
isolation view (a metric's final value against one setting, over runs differing only there)."""
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from explorer.page.url import config_query
from explorer.runs.store import RunStore
from explorer.view.compare import (Overlay, differences, final_values, isolation_figure, isolation_table, overlay_frame,
                              short_label, shows)
from explorer.view.content import build_view
from scenarios import all_scenarios, get_scenario
from scenarios.base import COLUMNS
from tests.test_app import progress_text
from tests.tiny_runs import tiny_frame

SCENARIO = get_scenario("vanishing-gradients")


def frame_of(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS)


def test_a_label_says_what_differs() -> None:
    base = {"depth": 10, "activation": "sigmoid", "seed": 0}
    assert differences(base, {"depth": 30, "activation": "sigmoid", "seed": 0}) == {"depth": 30}
    assert short_label({"depth": 30}, "abc") == "depth=30"
    assert short_label({}, "abc") == "run abc"
    long = short_label({f"field_{i}": "x" * 10 for i in range(6)}, "abc")
    assert len(long) < 70 and long.endswith("more")


def test_overlay_renames_arms_and_keeps_the_current_first() -> None:
    current = frame_of([("relu", 0, "loss", 1.0), ("relu", 1, "loss", 0.5)])
    other = frame_of([("relu", 0, "loss", 2.0), ("relu", 1, "loss", 1.5)])
    merged = overlay_frame(current, [Overlay("r1", "depth=30", other, {})])
    assert list(merged["arm"].unique()) == ["relu", "relu [depth=30]"]
    assert len(merged) == 4


def test_isolation_keeps_only_runs_that_differ_in_that_field() -> None:
    config = {"depth": 10, "width": 64, "seed": 0}
    loss = lambda v: frame_of([("a", 0, "loss", 9.0), ("a", 5, "loss", v), ("b", 5, "loss", v + 1)])  # noqa: E731
    runs = [("r1", {"depth": 20, "width": 64, "seed": 0}, loss(0.2)),   # differs in depth only: kept
            ("r2", {"depth": 20, "width": 32, "seed": 0}, loss(0.3)),   # differs in two fields: dropped
            ("r3", {"depth": 10, "width": 64, "seed": 0}, loss(0.1)),   # the current config: kept
            ("r4", {"depth": 20, "width": 64, "seed": 0}, loss(0.9))]   # older run of depth 20: dropped
    table = isolation_table(config, runs, "depth", "loss")
    assert sorted(table["run_id"].unique()) == ["r1", "r3"]
    assert table[(table["value"] == 20) & (table["arm"] == "a")]["final"].item() == 0.2
    assert final_values(loss(0.2), "loss") == {"a": 0.2, "b": 1.2}
    figure = isolation_figure(SCENARIO, table, "depth", "loss", ["a", "b"])
    assert [t.name for t in figure.data] == ["a", "b"] and list(figure.data[0].x) == [10, 20]
    assert figure.layout.xaxis.title.text == "depth" and "loss" in figure.layout.yaxis.title.text
    assert list(figure.layout.xaxis.tickvals) == [10, 20], "an integer setting is labelled at its measured values"


def test_isolation_names_a_setting_as_the_sidebar_does_and_labels_whole_numbers_only() -> None:
    """dpo-beta's sequence_steps at 80 and 82 was drawn with ticks 80, 80.5, 81, 81.5, 82 and titled
    "sequence_steps": now "sequence steps", ticks at 80 and 82."""
    from scenarios import get_scenario
    scenario = get_scenario("dpo-beta")
    config = {"sequence_steps": 80, "seed": 0}
    runs = [(f"r{v}", {"sequence_steps": v, "seed": 0}, frame_of([("a", 5, "loss", v / 100)])) for v in (80, 82)]
    figure = isolation_figure(scenario, isolation_table(config, runs, "sequence_steps", "loss"), "sequence_steps",
                              "loss", ["a"])
    assert figure.layout.xaxis.title.text == "sequence steps", figure.layout.xaxis.title.text
    assert "sequence_steps" not in figure.layout.title.text, figure.layout.title.text
    assert list(figure.layout.xaxis.tickvals) == [80, 82], figure.layout.xaxis.tickvals


@pytest.mark.slow
@pytest.mark.parametrize("scenario", all_scenarios(), ids=lambda s: s.id)
def test_every_scenario_overlays_a_stored_run_on_every_figure_with_lines(scenario) -> None:
    """No scenario code involved: the renamed arms are drawn by the scenario's own figures, or,
    where a figure follows the arms its config names, the stored run's own lines are merged in."""
    config = scenario.validate(scenario.tiny)
    frame = tiny_frame(scenario.id)
    other = frame.assign(value=frame["value"] * 1.1)  # stands for a stored run with another seed
    overlay = Overlay("r1", "seed=1", other, {**config.model_dump(mode="json"), "seed": 1})
    view = build_view(scenario, StaticRun(config, frame), [overlay])
    for name, figure in view.figures.items():
        if any(t.type == "scatter" and t.hoverinfo != "skip" for t in figure.data):
            assert shows(figure, overlay), f"{scenario.id}/{name}: the overlaid run is not drawn"
    assert "[seed=1]" in " ".join(view.data["arm"].astype(str).unique()), "the CSV rows of the overlay are labelled"


class StaticRun:
    """A finished run handle holding a fixed frame (what build_view reads from a RunHandle)."""

    def __init__(self, config, frame) -> None:
        self.config, self.frame = config, frame

    def snapshot(self):
        from explorer.runs.handle import Snapshot
        return Snapshot(self.frame, "finished", 1.0, [], None, 0.0, None)


def save_tiny(overrides: dict) -> str:
    config = SCENARIO.validate({**SCENARIO.tiny, **overrides})
    result = SCENARIO.run(config)
    return RunStore().save(SCENARIO.id, config.model_dump(mode="json"), SCENARIO.code_version(), result.status,
                           result.frame, result.summary)


def scenario_page() -> None:
    from explorer.page.scenario_page import render_scenario
    from scenarios import get_scenario
    render_scenario(get_scenario("vanishing-gradients"))


@pytest.mark.slow
def test_overlay_and_isolation_on_the_page() -> None:
    current = save_tiny({})
    deeper = save_tiny({"depth": 6})
    save_tiny({"depth": 8})
    at = AppTest.from_function(scenario_page, default_timeout=60)
    at.query_params.update(config_query(SCENARIO.validate(SCENARIO.tiny)))
    at.run()
    assert progress_text(at).startswith(f"Served from the run store: run {current}")
    overlay = at.multiselect(key="overlay:vanishing-gradients")
    assert current not in overlay.options and len(overlay.options) == 2
    overlay.set_value([deeper]).run()
    assert not at.exception
    loss = next(c for c in at.get("bidi_component") if "Training loss" in c.proto.json)  # the page's charts
    assert "[depth=6]" in loss.proto.json, "the overlaid run's arms are in the loss figure, labelled"
    notes = " ".join(c.value for c in at.caption)
    assert f"Overlaid: stored run {deeper}, where it differs: depth=6. Its traces end in “[depth=6]”" in notes, notes
    only = notes.split("show the current run only: ", 1)[-1] if "current run only" in notes else ""
    assert all(part.strip().startswith("“") for part in only.split("”,")[:-1]), f"figures named by title: {only}"

    # Isolation: depth 4 (current), 6 and 8 differ only in depth. Built only while its expander is open.
    assert not [c for c in at.get("plotly_chart") if "Final loss against depth" in c.proto.spec]
    at.session_state["isolate-open:vanishing-gradients"] = True
    at.run()
    assert at.selectbox(key="isolate-field:vanishing-gradients").value == "depth"
    isolation = [c for c in at.get("plotly_chart") if "Final loss against depth" in c.proto.spec]
    assert isolation, "the isolation figure is drawn"


def test_axis_decisions_include_the_overlay() -> None:
    """A 170-nat stored run drawn on a log axis by its own figure makes the merged axis log; a fixed
    range grows to hold the overlay; the legend groups each run under a title."""
    from explorer.view.overlay import group_current, merge_traces
    from scenarios.plotting import curves_figure
    from scenarios.records import Records
    calm = frame_of([("relu", s, "loss", 0.7 - 0.01 * s) for s in range(5)])
    wild = frame_of([("relu", s, "loss", 170.0 / 10 ** s) for s in range(5)])
    current = curves_figure(Records(calm), {"relu": "#1f77b4"}, "loss", title="loss", y_title="loss")
    own = curves_figure(Records(wild), {"relu": "#1f77b4"}, "loss", title="loss", y_title="loss")
    assert current.layout.yaxis.type == "linear" and own.layout.yaxis.type == "log"
    assert merge_traces(current, own, "lr=1", "r1", ["relu"], ["relu"])
    assert current.layout.yaxis.type == "log" and "log scale" in current.layout.yaxis.title.text
    group_current(current)
    assert [t.legendgroup for t in current.data] == ["this run", "run r1"]
    assert current.data[1].legendgrouptitle.text == "[lr=1] · run r1"

    fixed = curves_figure(Records(calm), {"relu": "#1f77b4"}, "loss", title="loss", y_title="loss")
    fixed.update_yaxes(range=[0.6, 0.8])
    other = curves_figure(Records(calm.assign(value=calm["value"] + 1)), {"relu": "#1f77b4"}, "loss", title="loss",
                          y_title="loss")
    merge_traces(fixed, other, "seed=1", "r2", ["relu"], ["relu"])
    assert fixed.layout.yaxis.range[1] >= 1.7, fixed.layout.yaxis.range
