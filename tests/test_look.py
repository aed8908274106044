"""Look and feel, for every scenario's figures: the Streamlit theme applies (no template is
forced), every axis with data is titled, an arm keeps one color on every figure of the
page, quantities spanning decades sit on log axes, and hovering a line names its trace."""
import plotly.graph_objects as go
import pytest

from explorer.view.look import polish
from scenarios import all_scenarios
from tests.tiny_runs import tiny_frame

DECADES_FOR_LOG = 4  # a y range wider than 10^4, all positive, must be drawn on a log axis


def figures_of(scenario):
    return scenario.figures(tiny_frame(scenario.id), scenario.validate(scenario.tiny))


def axis_names(figure, kind: str) -> set[str]:
    """Layout names of the axes that traces use: 'xaxis', 'xaxis2', ..."""
    refs = {getattr(t, kind, None) or kind[0] for t in figure.data if hasattr(t, kind)}
    return {kind + ref[1:] for ref in refs}


@pytest.mark.parametrize("scenario", all_scenarios(), ids=lambda s: s.id)
def test_no_template_is_forced_so_the_streamlit_theme_applies(scenario) -> None:
    default = go.Figure().layout.template  # whatever plotly's default is; st.plotly_chart themes over it
    for name, figure in figures_of(scenario).items():
        assert figure.layout.template == default, f"{scenario.id}/{name} sets its own plotly template"


@pytest.mark.parametrize("scenario", all_scenarios(), ids=lambda s: s.id)
def test_every_axis_with_data_has_a_title(scenario) -> None:
    for name, figure in figures_of(scenario).items():
        if not any(t.type in ("scatter", "bar", "heatmap", "box") for t in figure.data):
            continue
        for kind in ("xaxis", "yaxis"):
            for axis in axis_names(figure, kind):
                title = figure.layout[axis].title.text if figure.layout[axis] is not None else None
                shared = kind == "yaxis" and figure.layout[axis].matches  # a shared axis is titled once
                scaleless = figure.layout[axis].showticklabels is False  # a diagram's lanes: no scale to name
                assert title or shared or scaleless or _titled_sibling(figure, kind), f"{scenario.id}/{name}: {axis} has no title"


def _titled_sibling(figure, kind: str) -> bool:
    """Subplots in one row share the y title of their first panel (and columns the x title)."""
    return any(getattr(figure.layout[key].title, "text", None) for key in figure.layout if key.startswith(kind))


@pytest.mark.parametrize("scenario", all_scenarios(), ids=lambda s: s.id)
def test_an_arm_has_one_color_across_the_figures(scenario) -> None:
    arms = sorted({str(a) for a in tiny_frame(scenario.id)["arm"].unique()}, key=len, reverse=True)
    seen: dict[str, dict[str, str]] = {}
    for name, figure in figures_of(scenario).items():
        for trace in figure.data:
            if trace.type != "scatter" or not trace.name:
                continue
            arm = next((a for a in arms if str(trace.name) == a or str(trace.name).startswith(a + " ")), None)
            color = trace.line.color if trace.line is not None else None
            if arm is not None and isinstance(color, str):
                seen.setdefault(arm, {})[f"{name}:{trace.name}"] = color
    for arm, colors in seen.items():
        assert len(set(colors.values())) == 1, f"{scenario.id}: arm {arm!r} has several colors {colors}"


@pytest.mark.parametrize("scenario", all_scenarios(), ids=lambda s: s.id)
def test_quantities_spanning_decades_are_on_log_axes(scenario) -> None:
    for name, figure in figures_of(scenario).items():
        for axis in axis_names(figure, "yaxis"):
            ref = "y" + axis[5:]
            values = [float(v) for t in figure.data if t.type == "scatter" and (t.yaxis or "y") == ref
                      and t.y is not None for v in t.y if v is not None]
            if len(values) < 3 or min(values) <= 0:
                continue
            if max(values) / min(values) > 10 ** DECADES_FOR_LOG:
                assert figure.layout[axis].type == "log", f"{scenario.id}/{name}: {axis} spans >10^{DECADES_FOR_LOG}, linear"


@pytest.mark.parametrize("scenario", all_scenarios(), ids=lambda s: s.id)
def test_hovering_a_line_names_its_trace_and_values(scenario) -> None:
    for name, figure in figures_of(scenario).items():
        for trace in polish(figure).data:
            if trace.type == "scatter" and trace.hoverinfo != "skip" and trace.showlegend is not False and trace.name:
                template = trace.hovertemplate or ""  # a value: a placeholder, or a constant written in
                assert "%{" in template or any(c.isdigit() for c in template), \
                    f"{scenario.id}/{name}/{trace.name}: hover shows no value"


def test_a_reference_line_label_on_a_log_axis_sits_on_its_line() -> None:
    """plotly.py leaves add_hline's label at the line's value, which plotly.js reads on a log axis as
    log10 of the position: quantization's "float 0.149" stood at 1.4. A label placed by hand stays."""
    import math
    figure = go.Figure(go.Scatter(x=[0, 1], y=[0.01, 10]))
    figure.update_yaxes(type="log")
    figure.add_hline(y=0.149, annotation_text="float 0.149")
    figure.add_vline(x=0.5, annotation_text="on a linear x: left as it is")
    figure.add_annotation(x=0.2, y=-1, text="placed in log10 units by hand")
    polish(polish(figure))  # twice: the page may finish a figure again
    labels = {note.text: (note.x, note.y) for note in figure.layout.annotations}
    assert labels["float 0.149"][1] == pytest.approx(math.log10(0.149)), labels
    assert labels["on a linear x: left as it is"][0] == 0.5 and labels["placed in log10 units by hand"][1] == -1, labels
