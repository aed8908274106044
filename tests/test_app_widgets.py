"""The page's setting widgets under Streamlit's AppTest: what a browser mounting one afresh would show."""
from streamlit.testing.v1 import AppTest

from tests.test_app import scenario_page

def test_every_widget_is_drawn_with_the_value_the_server_holds_as_its_default() -> None:
    """A browser that mounts a widget afresh (its state dropped between page runs) shows the proto's
    default and sends it back: a default of a slider's minimum or a toggle off would then move the
    setting by itself (CI once found auto-run off after two slider moves). Each default is the value."""
    at = AppTest.from_function(scenario_page, args=("vanishing-gradients",), default_timeout=60)
    for name, value in {"depth": "7", "activation": "relu", "residual": "true", "lr": "0.01"}.items():
        at.query_params[name] = value
    at.run()
    depth = at.sidebar.slider(key="vanishing-gradients.depth")
    assert (depth.value, list(depth.proto.default)) == (7, [7.0]), depth.proto
    activation = at.sidebar.selectbox(key="vanishing-gradients.activation")
    assert activation.options[activation.proto.default] == activation.value == "relu", activation.proto
    residual = at.sidebar.toggle(key="vanishing-gradients.residual")
    assert residual.value is True and residual.proto.default is True, residual.proto
    lr = at.sidebar.select_slider(key="vanishing-gradients.lr")
    assert float(lr.options[int(lr.proto.default[0])]) == lr.value == 0.01, (lr.options, lr.proto.default)
    auto = at.toggle(key="autorun:vanishing-gradients")
    assert auto.value is True and auto.proto.default is True, auto.proto
    auto.set_value(False).run()
    auto = at.toggle(key="autorun:vanishing-gradients")
    assert auto.value is False and auto.proto.default is False, "turned off, its default follows"


def test_the_seed_controls_are_drawn_with_the_values_a_link_gave_as_their_defaults() -> None:
    """"repeat over seeds" and its band, restored from a link: a fresh mount shows 3 and mean ± std, not 1."""
    at = AppTest.from_function(scenario_page, args=("vanishing-gradients",), default_timeout=60)
    at.session_state["autorun:vanishing-gradients"] = False
    at.query_params["seeds"], at.query_params["band"] = "3", "mean ± std"
    at.run()
    repeat = at.sidebar.number_input(key="seeds:vanishing-gradients")
    assert repeat.value == 3 and repeat.proto.default == 3, repeat.proto
    band = at.sidebar.radio(key="band:vanishing-gradients")
    assert band.value == "mean ± std" and band.options[band.proto.default] == "mean ± std", band.proto


def test_a_terse_field_is_labelled_by_its_title_and_keeps_its_name_as_its_key() -> None:
    """The sidebar read "d k", "examples b": a field with a title shows it; the URL and the widget key stay the name."""
    at = AppTest.from_function(scenario_page, args=("attention",), default_timeout=60)
    at.session_state["autorun:attention"] = False
    at.query_params["d_k"] = "128"
    at.run()
    widget = at.sidebar.select_slider(key="attention.d_k")
    assert widget.label == "d_k (key width)" and widget.value == 128, (widget.label, widget.value)
    assert at.sidebar.slider(key="attention.steps").label == "steps", "an untitled field keeps its name in words"


def test_a_setting_that_does_nothing_at_these_values_is_greyed_out_and_says_why() -> None:
    """batch-size-clipping's warmup length acts only under "warmup + cosine": greyed out under "constant",
    its help saying so; enabled once the schedule has a warmup."""
    at = AppTest.from_function(scenario_page, args=("batch-size-clipping",), default_timeout=60)
    at.session_state["autorun:batch-size-clipping"] = False
    at.run()
    warmup = at.sidebar.slider(key="batch-size-clipping.warmup_steps")
    assert warmup.proto.disabled and "Not used while schedule is constant." in warmup.proto.help, warmup.proto
    at.sidebar.selectbox(key="batch-size-clipping.schedule").set_value("warmup + cosine").run()
    warmup = at.sidebar.slider(key="batch-size-clipping.warmup_steps")
    assert not warmup.proto.disabled and "Not used" not in warmup.proto.help, warmup.proto
