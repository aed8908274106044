"""Line controls: an EMA smoothing (0 = off) and a log/linear toggle for the loss and metric curves;
they change what the page draws, never the figures' raw data that the exports write."""
import math

import plotly.graph_objects as go

from explorer.view.line_controls import LineSettings, apply_lines, ema, is_curve
from scenarios.plotting import layout


def curve() -> go.Figure:
    fig = go.Figure(go.Scatter(x=list(range(6)), y=[4.0, 0.0, 4.0, 0.0, 4.0, 0.0], name="relu", mode="lines"))
    return layout(fig, "Training loss", "step", "loss")


def test_ema_is_tensorboards_debiased_average() -> None:
    assert ema([2.0, 2.0, 2.0], 0.9) == [2.0, 2.0, 2.0], "debiased: a constant stays itself from the first point"
    smoothed = ema([0.0, 10.0], 0.5)
    assert smoothed[1] == (0.5 * 0.5 * 0 + 0.5 * 10) / (1 - 0.25), smoothed
    passed = ema([1.0, math.nan, 3.0], 0.5)
    assert math.isnan(passed[1]) and passed[2] == (0.25 * 1 + 0.5 * 3) / 0.75, passed
    assert ema([1.0, 5.0], 0.0) == [1.0, 5.0]


def test_smoothing_draws_the_ema_over_a_faint_raw_line_and_leaves_the_figure_raw() -> None:
    raw = curve()
    drawn = apply_lines({"loss": raw}, LineSettings(smoothing=0.8))["loss"]
    assert list(raw.data[0].y) == [4.0, 0.0, 4.0, 0.0, 4.0, 0.0], "the view's own figure (the exports') stays raw"
    behind, line = drawn.data
    assert list(behind.y) == list(raw.data[0].y) and behind.opacity < 1 and behind.showlegend is False
    assert max(line.y[2:]) - min(line.y[2:]) < 4.0 * 0.5, f"smoothed swings {max(line.y[2:]) - min(line.y[2:]):.2f}"


def test_the_scale_toggle_sets_every_curve_axis_and_leaves_other_figures_alone() -> None:
    other = layout(go.Figure(go.Bar(x=["a", "b"], y=[1, 2])), "Accuracy", "arm", "accuracy")
    figures = apply_lines({"loss": curve(), "bars": other}, LineSettings(y_scale="log"))
    assert figures["loss"].layout.yaxis.type == "log" and "log scale" in figures["loss"].layout.yaxis.title.text
    assert figures["bars"] is other and not is_curve(other)
    back = apply_lines({"loss": figures["loss"]}, LineSettings(y_scale="linear"))["loss"]
    assert back.layout.yaxis.type == "linear" and "log" not in back.layout.yaxis.title.text
    assert apply_lines({"loss": other}, LineSettings()) == {"loss": other}, "defaults change nothing"
