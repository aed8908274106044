"""Axes that read right: log ticks written in full (never a bare "5" meaning 0.5), a tick at every
integer on a short integer axis (never at 0.5), a legend too long for the side moved below, and a
subplot title wider than its column wrapped."""
import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from explorer.view.look import polish
from scenarios import all_scenarios
from scenarios.plotting import is_own_log_ticks, layout, log_ticks, tick_text
from tests.tiny_runs import tiny_frame


def test_log_ticks_are_decades_or_numbers_written_in_full() -> None:
    short = log_ticks([0.3, 2.3])
    assert short["ticktext"] == ["0.5", "1", "2"], short
    assert log_ticks([1e-7, 1.0])["dtick"] == 1 and log_ticks([1e-30, 1.0])["dtick"] == 4
    assert [tick_text(v) for v in (5e-4, 1e-6, 2e5, 0.05)] == ["5×10⁻⁴", "10⁻⁶", "2×10⁵", "0.05"]


def test_an_integer_axis_over_a_short_range_ticks_every_integer() -> None:
    fig = layout(go.Figure(go.Scatter(x=[0, 1, 2, 3], y=[0.1, 0.2, 0.15, 0.3])), "t", "step", "loss")
    polish(fig)
    assert fig.layout.xaxis.dtick == 1 and fig.layout.yaxis.dtick is None, "steps are integers, the loss is not"
    long = polish(layout(go.Figure(go.Scatter(x=list(range(500)), y=[1.0] * 500)), "t", "step", "loss"))
    assert long.layout.xaxis.dtick is None, "a long axis keeps plotly's own (integer) ticks"


def test_a_long_legend_goes_below_and_the_figure_grows_to_hold_it() -> None:
    fig = go.Figure([go.Scatter(x=[0, 1], y=[i, i + 1], name=f"a{i}") for i in range(20)])
    polish(fig)
    assert fig.layout.legend.orientation == "h" and fig.layout.height > 430 + 19 * 19


def test_a_subplot_title_wider_than_its_column_wraps() -> None:
    titles = ["sigmoid · pytorch-default · residual · layer norm"] * 4
    fig = polish(make_subplots(rows=1, cols=4, subplot_titles=titles))
    assert all("<br>" in a.text and a.font.size == 12 for a in fig.layout.annotations)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", all_scenarios(), ids=lambda s: s.id)
def test_no_log_axis_keeps_bare_digit_ticks(scenario) -> None:
    for name, figure in scenario.figures(tiny_frame(scenario.id), scenario.validate(scenario.tiny)).items():
        polish(figure)
        for key in [k for k in figure.layout.to_plotly_json() if k[:5] in ("xaxis", "yaxis")]:
            axis = figure.layout[key]
            if axis.type == "log" and is_own_log_ticks(axis):
                assert axis.dtick not in ("D1", "D2"), f"{scenario.id}/{name}/{key}: dtick {axis.dtick}"


def test_a_line_far_from_the_data_keeps_an_integer_axis_from_a_tick_at_every_integer() -> None:
    """Tokenization's first record (x = 256) beside its vocabulary line (x = 2048): a tick per integer
    would be ~2,600 labels, which froze the browser for 36 s while plotly fitted them."""
    from explorer.view.look import polish
    figure = go.Figure(go.Scatter(x=[256], y=[1.0]))
    figure.add_vline(x=2048)
    figure.update_xaxes(title_text="vocabulary size")
    assert polish(figure).layout.xaxis.dtick is None, figure.layout.xaxis.dtick
    near = go.Figure(go.Scatter(x=[1, 2, 3], y=[1.0, 2.0, 3.0]))
    near.update_xaxes(title_text="step")
    assert polish(near).layout.xaxis.dtick == 1, "three integers still get a tick each"


def test_ticks_at_the_data_are_the_scenarios_own_even_in_tick_texts_writing() -> None:
    """flash-attention's peak memory at N = 128…1024 and ranks 1, 2, 4, 8 are the data's ticks: the page keeps
    them; 1, 2, 5 × 10^k and every 1…9 × 10^k are `log_ticks`' own, which the page may redraw."""
    def axis(values):
        return go.Figure().update_xaxes(type="log", tickvals=values, ticktext=[tick_text(v) for v in values]).layout.xaxis
    assert not is_own_log_ticks(axis([128, 256, 512, 1024])) and not is_own_log_ticks(axis([1, 2, 4, 8]))
    assert is_own_log_ticks(axis([0.5, 1, 2, 5, 10])) and is_own_log_ticks(axis([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]))
    assert is_own_log_ticks(axis(log_ticks([3, 70])["tickvals"]))
