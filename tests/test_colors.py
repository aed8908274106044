"""Colours belong to arm identities: an arm has one colour in every figure, whatever order its
run's arms come in and with another run overlaid; no two arms of one figure share a colour;
categories have a palette no arm uses; an overlaid run's traces never look like the current run's."""
import pandas as pd
import pytest

from explorer.runs.handle import Snapshot
from explorer.view.compare import Overlay
from explorer.view.content import build_view
from explorer.view.overlay import arm_of
from scenarios import all_scenarios
from scenarios.plotting import CATEGORY_COLORS, arm_colors, palette_color
from tests.tiny_runs import tiny_frame

TAG = " [seed=1]"


class StaticRun:
    """A finished run handle holding a fixed frame (what build_view reads)."""

    def __init__(self, config, frame: pd.DataFrame) -> None:
        self.config, self.frame = config, frame

    def snapshot(self) -> Snapshot:
        return Snapshot(self.frame, "finished", 1.0, [], None, 0.0, None)


def reversed_arms(frame: pd.DataFrame) -> pd.DataFrame:
    """The same records with the arms in the opposite order (each arm's rows kept in order)."""
    arms = list(frame["arm"].unique())
    return pd.concat([frame[frame["arm"] == arm] for arm in reversed(arms)], ignore_index=True)


ARM_PALETTE = {palette_color(i) for i in range(3000)}


def trace_color(trace) -> str | None:
    """The trace's arm colour (an overlaid bar's is its outline); None for neutral references (gray)."""
    line = getattr(trace, "line", None)
    color = line.color if line is not None else None
    marker = getattr(trace, "marker", None)
    if trace.type == "bar" and marker is not None and marker.pattern.shape:
        color = marker.line.color
    elif not isinstance(color, str) and marker is not None:
        color = marker.color
    return color if isinstance(color, str) and color in ARM_PALETTE else None


def arm_traces(figure, arms: list[str]):
    """(arm, trace, overlaid) for each trace of an arm that has one colour."""
    for trace in figure.data:
        name = str(trace.name or "")
        overlaid = TAG in name
        arm = arm_of(name.replace(TAG, ""), arms)
        if arm is not None and trace_color(trace) is not None and trace.hoverinfo != "skip":
            yield arm, trace, overlaid


def style(trace) -> tuple:
    line, marker = getattr(trace, "line", None), getattr(trace, "marker", None)
    pattern = marker.pattern.shape if trace.type == "bar" and marker is not None else None
    symbol = getattr(marker, "symbol", None) if marker is not None else None
    return (trace.type, line.dash if line is not None else None, symbol,
            trace.opacity, pattern)


def test_categories_use_a_palette_no_arm_ever_gets() -> None:
    arm_palette = {palette_color(i) for i in range(3000)}
    assert not set(CATEGORY_COLORS) & arm_palette, set(CATEGORY_COLORS) & arm_palette


def test_the_palette_never_repeats_within_a_figure_however_many_arms() -> None:
    labels = [f"arm {i}" for i in range(60)]
    colors = arm_colors(labels, labels[:9])
    assert len(set(colors.values())) == 60, f"{60 - len(set(colors.values()))} colours repeat"
    assert arm_colors(labels[::-1], labels[:9]) == colors, "the order labels come in changes no colour"


@pytest.mark.slow
@pytest.mark.parametrize("scenario", all_scenarios(), ids=lambda s: s.id)
def test_an_arm_keeps_its_colour_in_any_order_and_beside_an_overlay(scenario) -> None:
    config = scenario.validate(scenario.tiny)
    frame = tiny_frame(scenario.id)
    arms = [str(a) for a in frame["arm"].unique()]
    other = reversed_arms(frame).assign(value=lambda f: f["value"] * 1.1)  # a stored run, arms in another order
    overlay = Overlay("r1", TAG.strip(" []"), other, {**config.model_dump(mode="json"), "seed": 1})
    drawings = {"as run": scenario.figures(frame, config),
                "arms reversed": scenario.figures(reversed_arms(frame), config),
                "overlaid": build_view(scenario, StaticRun(config, frame), [overlay]).figures}
    seen: dict[str, dict[str, str]] = {}
    for drawing, figures in drawings.items():
        for name, figure in figures.items():
            held: dict[tuple, str] = {}
            for arm, trace, overlaid in arm_traces(figure, arms):
                color = trace_color(trace)
                seen.setdefault(arm, {})[f"{drawing}/{name}/{trace.name}"] = color
                # a scenario may key colours by one part of an arm (DPO: β) and draw the other as a dash
                key = (color, trace.line.dash if trace.type != "bar" else None, overlaid)
                assert held.setdefault(key, arm) == arm, \
                    f"{scenario.id}/{drawing}/{name}: arms {held[key]!r} and {arm!r} share the colour {color}"
    for arm, colors in seen.items():
        assert len(set(colors.values())) == 1, f"{scenario.id}: arm {arm!r} has several colours {colors}"


@pytest.mark.slow
@pytest.mark.parametrize("scenario", all_scenarios(), ids=lambda s: s.id)
def test_an_overlaid_trace_never_looks_like_a_current_one(scenario) -> None:
    config = scenario.validate(scenario.tiny)
    frame = tiny_frame(scenario.id)
    overlay = Overlay("r1", TAG.strip(" []"), frame.assign(value=frame["value"] * 1.1),
                      {**config.model_dump(mode="json"), "seed": 1})
    for name, figure in build_view(scenario, StaticRun(config, frame), [overlay]).figures.items():
        current = {str(t.name): style(t) for t in figure.data if TAG not in str(t.name or "")}
        for trace in figure.data:
            if TAG not in str(trace.name or ""):
                continue
            where = f"{scenario.id}/{name}/{trace.name}"
            assert trace.opacity is not None and trace.opacity < 1, f"{where}: not lighter"
            assert style(trace) != current.get(str(trace.name).replace(TAG, "")), f"{where}: styled like its source"
            assert trace.legendgroup == "run r1", f"{where}: not in its run's legend group"
            if trace.type == "bar":
                assert trace.marker.pattern.shape and trace.marker.line.width, f"{where}: a bar not hatched and outlined"
                continue
            mode = trace.mode or "lines+markers"
            if "lines" in mode:
                assert trace.line.dash not in (None, "solid"), f"{where}: a solid overlay line"
            if "markers" in mode:
                symbols = trace.marker.symbol if isinstance(trace.marker.symbol, tuple) else [trace.marker.symbol]
                assert all("open" in str(s) for s in symbols), f"{where}: filled markers {symbols}"


def test_an_overlaid_arm_never_takes_a_colour_another_arm_holds() -> None:
    import plotly.graph_objects as go
    from explorer.view.overlay import merge_traces
    current = go.Figure(go.Scatter(x=[0, 1], y=[1, 2], name="a", line=dict(color="#d62728")))
    stored = go.Figure(go.Scatter(x=[0, 1], y=[3, 4], name="b", line=dict(color="#d62728")))  # a hash collision
    assert merge_traces(current, stored, "lr=0.1", "r1", ["b"], ["a"])
    assert current.data[1].line.color not in ("#d62728", None), current.data[1].line.color
    same = go.Figure(go.Scatter(x=[0, 1], y=[3, 4], name="a", line=dict(color="#d62728")))
    merge_traces(current, same, "lr=0.2", "r2", ["a"], ["a"])
    assert current.data[2].line.color == "#d62728", "the same arm keeps its colour in the other run"


@pytest.mark.parametrize("scenario_id, first, second", [
    ("warmup", {"norm": "post-ln", "contrast": "other LayerNorm placement"},
     {"norm": "pre-ln", "contrast": "other LayerNorm placement"}),
    ("vanishing-gradients", {"activation": "sigmoid", "contrast": "relu + he"},
     {"activation": "relu", "init": "he", "contrast": "none"}),
])
def test_an_arm_keeps_its_colour_across_two_configs_whose_arms_come_in_another_order(scenario_id, first, second):
    """Two real runs whose arm lists differ in order: every arm label they share has one colour."""
    from scenarios import get_scenario
    scenario = get_scenario(scenario_id)
    colors: dict[str, set[str]] = {}
    orders = []
    for values in (first, second):
        config = scenario.validate({**scenario.tiny, **values})
        frame = scenario.run(config).frame
        orders.append(list(frame["arm"].unique()))
        for figure in scenario.figures(frame, config).values():
            for arm, trace, _ in arm_traces(figure, orders[-1]):
                colors.setdefault(arm, set()).add(trace_color(trace))
    shared = set(orders[0]) & set(orders[1])
    assert any(orders[0].index(arm) != orders[1].index(arm) for arm in shared), f"an arm moved: {orders}"
    assert all(len(colors.get(arm, ())) == 1 for arm in shared), {a: colors.get(a) for a in shared}


def test_an_overlaid_line_is_broken_in_no_style_a_scenario_draws_its_own_lines_in() -> None:
    """generalization draws training dashed and validation solid: an overlaid validation curve drawn
    "dash" read as a training curve. Copied lines take styles no scenario line uses."""
    import plotly.graph_objects as go
    from explorer.view.overlay import merge_traces
    own_styles = {None, "solid", "dash", "dot"}  # what scenarios/ draws its lines in (grep dash= there)
    current = go.Figure([go.Scatter(x=[0, 1], y=[1, 2], name="a", line=dict(color="#1f77b4", dash=dash), mode="lines")
                         for dash in ("solid", "dash", "dot")])
    stored = go.Figure([go.Scatter(x=[0, 1], y=[2, 3], name="a", line=dict(color="#1f77b4", dash=dash), mode="lines")
                        for dash in ("solid", "dash", "dot")])
    assert merge_traces(current, stored, "seed=1", "r1", ["a"], ["a"])
    copied = [t.line.dash for t in current.data if "[seed=1]" in str(t.name)]
    assert len(copied) == 3 and len(set(copied)) == 3 and not set(copied) & own_styles, copied
