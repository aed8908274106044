"""Presets: every preset of every scenario runs, and one click on the page sets exactly it.

How a preset is run here: its own values over the scenario's `tiny` overrides, i.e.
`{**tiny, **preset}`. The preset's values always win, so what is tested is the preset's
actual setting (its optimizer, learning rate, β, bit width …); `tiny` only shrinks what the
preset leaves open (steps, widths, sweep sizes), which keeps the whole set to seconds per
scenario. Presets that come out identical after the merge run once.
"""
import math

import pytest
from streamlit.testing.v1 import AppTest

from scenarios import all_scenarios, get_scenario
from scenarios.base import ConfigError

SCENARIOS = [s for s in all_scenarios() if s.presets]


def tiny_presets(scenario) -> dict[str, dict]:
    merged: dict[str, dict] = {}
    for name, values in scenario.presets.items():
        try:
            config = scenario.validate({**scenario.tiny, **values}).model_dump()
        except ConfigError:  # tiny's smaller data cannot hold this preset (tokenization's 4096 tokens): as it is
            config = scenario.validate(values).model_dump()
        if config not in merged.values():
            merged[name] = config
    return merged


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
def test_every_preset_runs_to_finite_records_and_figures(scenario) -> None:
    for name, config in tiny_presets(scenario).items():
        result = scenario.run(config)
        assert result.status in ("finished", "diverged"), f"{scenario.id} / {name}: {result.status}"
        assert len(result.frame) and result.frame["value"].map(math.isfinite).all(), f"{scenario.id} / {name}"
        figures = scenario.figures(result.frame, scenario.validate(config))
        assert figures, f"{scenario.id} / {name}: no figures"
        assert scenario.explain(result.frame, scenario.validate(config)).markdown(), f"{scenario.id} / {name}"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
def test_every_preset_is_a_complete_valid_config(scenario) -> None:
    defaults = scenario.validate({}).model_dump()
    for name, values in scenario.presets.items():
        assert name.strip(), "a preset needs a name for its button"
        config = scenario.validate(values).model_dump()
        assert {k: v for k, v in config.items() if k not in values} == {
            k: v for k, v in defaults.items() if k not in values}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
def test_no_two_presets_are_the_same_config(scenario) -> None:
    """Two buttons that set one config would both show the check mark: one of them says nothing new."""
    seen: dict[str, str] = {}
    for name, values in scenario.presets.items():
        config = repr(sorted(scenario.validate(values).model_dump().items()))
        assert config not in seen, f"{scenario.id}: presets {seen[config]!r} and {name!r} set the same config"
        seen[config] = name


def scenario_page(scenario_id: str) -> None:
    from explorer.page.scenario_page import render_scenario
    from scenarios import get_scenario
    render_scenario(get_scenario(scenario_id))


def test_a_preset_button_sets_its_values_and_resets_the_rest() -> None:
    scenario = get_scenario("vanishing-gradients")
    name, values = next((n, v) for n, v in scenario.presets.items() if "depth" in v and v["depth"] != 10)
    at = AppTest.from_function(scenario_page, args=(scenario.id,), default_timeout=60).run()
    at.sidebar.slider(key="vanishing-gradients.width").set_value(32)
    at.sidebar.number_input(key="vanishing-gradients.seed").set_value(5)
    at.run()
    at.button(key=f"preset:{scenario.id}:{name}").click().run()
    expected = scenario.validate(values).model_dump()
    shown = {field: at.session_state[f"{scenario.id}.{field}"] for field in expected}
    assert shown == expected, "preset values set, every other field back to its default (seed included)"
    assert at.query_params["depth"] == str(values["depth"]), "the URL follows the preset"
    assert at.button(key=f"preset:{scenario.id}:{name}").proto.icon == ":material/check:", "the active preset is marked"
