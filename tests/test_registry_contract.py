"""The scenario contract, checked for every registered scenario: a new scenario is covered
without writing a new test."""
import math
import re

import pandas as pd
import plotly.graph_objects as go
import pytest

from scenarios import all_scenarios, get_scenario, register
from scenarios.base import COLUMNS, ConfigError

SCENARIOS = all_scenarios()
ids = [s.id for s in SCENARIOS]


@pytest.fixture(scope="module")
def tiny_runs() -> dict:
    return {s.id: s.run(s.tiny) for s in SCENARIOS}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=ids)
def test_declares_what_the_pages_need(scenario) -> None:
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", scenario.id), scenario.id
    assert scenario.title and scenario.question.endswith("?") and scenario.terms and scenario.formula
    assert get_scenario(scenario.id) is scenario


@pytest.mark.parametrize("scenario", SCENARIOS, ids=ids)
def test_defaults_lie_inside_their_bounds(scenario) -> None:
    for name, spec in scenario.field_specs().items():
        assert spec["description"], f"{name} has no description (it becomes the widget's help)"
        if spec["kind"] in ("int", "float"):
            assert spec["ge"] <= spec["default"] <= spec["le"], f"{name}={spec['default']}"
        if spec["kind"] == "choice":
            assert spec["default"] in spec["choices"], name
    scenario.validate({})


@pytest.mark.parametrize("scenario", SCENARIOS, ids=ids)
def test_presets_are_valid_configs(scenario) -> None:
    for name, values in scenario.presets.items():
        scenario.validate(values)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=ids)
def test_tiny_run_yields_finite_long_records(scenario, tiny_runs) -> None:
    result = tiny_runs[scenario.id]
    assert list(result.frame.columns) == COLUMNS
    assert len(result.frame) > 0 and result.status in ("finished", "diverged")
    assert result.frame["value"].map(math.isfinite).all()
    frame, summary = result  # the API unpacks as (frame, summary)
    assert summary["status"] == result.status


@pytest.mark.parametrize("scenario", SCENARIOS, ids=ids)
def test_every_figure_builds_from_partial_and_empty_frames(scenario, tiny_runs) -> None:
    config = scenario.validate(scenario.tiny)
    full = tiny_runs[scenario.id].frame
    for frame in (full, full.iloc[: len(full) // 3], pd.DataFrame(columns=COLUMNS)):
        figures = scenario.figures(frame, config)
        assert figures and all(isinstance(f, go.Figure) for f in figures.values())
        for name, figure in figures.items():
            assert figure.layout.title.text, f"figure {name} has no title"
    text = scenario.explain(scenario.summarize(full.iloc[: len(full) // 3], config), config)
    assert isinstance(text, str) and text


@pytest.mark.parametrize("scenario", SCENARIOS, ids=ids)
def test_bad_values_are_refused_with_the_field_named(scenario) -> None:
    with pytest.raises(ConfigError, match="unknown key 'no_such_field'"):
        scenario.validate({"no_such_field": 1})
    for name, spec in scenario.field_specs().items():
        if spec["kind"] in ("int", "float"):
            with pytest.raises(ConfigError, match=f"^{name}=.* must be"):
                scenario.validate({name: spec["le"] * 10 + 1})


def test_registering_a_duplicate_id_is_refused() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        register(SCENARIOS[0])


def test_unknown_scenario_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="vanishing-gradients"):
        get_scenario("no-such-scenario")
