"""The scenario contract, checked for every registered scenario: a new scenario is covered
without writing a new test."""
import math
import re

import pandas as pd
import plotly.graph_objects as go
import pytest

from scenarios import all_scenarios, get_scenario, register
from scenarios.base import COLUMNS, ConfigError
from scenarios.explanation import Explanation
from scenarios.plotting import Figures
from scenarios.records import Records
from tests.tiny_runs import tiny_result

SCENARIOS = all_scenarios()
ids = [s.id for s in SCENARIOS]
# Scenarios whose checks start rank processes for several configs (ddp-fsdp-memory's evidence and view fields
# took 8.6 s and 8.5 s of the default run): those checks run under `-m slow`.
LAUNCHING = {"ddp-fsdp-memory"}


def slow_where_launching(scenarios) -> list:
    return [pytest.param(s, marks=pytest.mark.slow, id=s.id) if s.id in LAUNCHING else pytest.param(s, id=s.id)
            for s in scenarios]
TOPICS = ("Core mechanics", "Optimization", "Architecture", "Language models", "Generalization",
          "Fine-tuning & compression", "Alignment", "Distributed")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=ids)
def test_declares_what_the_pages_need(scenario) -> None:
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", scenario.id), scenario.id
    assert scenario.title and scenario.question.endswith("?") and scenario.terms and scenario.formula
    assert scenario.topic in TOPICS, f"{scenario.id}: topic {scenario.topic!r} is not one of {TOPICS}"
    assert get_scenario(scenario.id) is scenario
    universe = scenario.arm_universe()
    assert universe and len(universe) == len(set(universe)), f"{scenario.id}: arm_universe must list unique labels"


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
def test_tiny_run_yields_finite_long_records(scenario) -> None:
    result = tiny_result(scenario.id)
    assert list(result.frame.columns) == COLUMNS
    assert len(result.frame) > 0 and result.status in ("finished", "diverged")
    assert result.frame["value"].map(math.isfinite).all()
    frame, summary = result  # the API unpacks as (frame, summary)
    assert summary["status"] == result.status


TIMED = re.compile(r"(?:^|/)(?:seconds|step_time_ms|sent_bytes|received_bytes)$")  # the clock's and the kernel's, not the run's


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if not s.rank_processes(s.validate(s.tiny))], ids=lambda s: s.id)
def test_the_same_config_gives_the_same_records_whatever_the_global_rng(scenario) -> None:
    """Deterministic on CPU: every random draw of a run comes from its own seeded generator, so a
    leftover global RNG state changes nothing but what the clock measures."""
    import torch
    frames = []
    # the session's shared tiny run (made now under global seed 123, or earlier under whatever state the tests
    # before it left), then one more under global seed 456: one run each, not two (the default test run's time)
    for global_seed, run in ((123, lambda: tiny_result(scenario.id)), (456, lambda: scenario.run(scenario.tiny))):
        torch.manual_seed(global_seed)
        frame = run().frame
        frames.append(frame[~frame["metric"].str.contains(TIMED)].reset_index(drop=True))
    merged = frames[0].merge(frames[1], on=["arm", "step", "metric"], how="outer", suffixes=("", "_again"))
    differ = merged[~((merged["value"] == merged["value_again"]) | (merged["value"].isna() & merged["value_again"].isna()))]
    assert differ.empty, f"{scenario.id}: {len(differ)} records differ, e.g. {differ.head(3).to_dict('records')}"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=ids)
def test_every_figure_builds_from_partial_and_empty_frames(scenario) -> None:
    config = scenario.validate(scenario.tiny)
    full = tiny_result(scenario.id).frame
    for frame in (full, full.iloc[: len(full) // 3], pd.DataFrame(columns=COLUMNS)):
        figures = scenario.figures(frame, config)
        assert figures and all(isinstance(f, go.Figure) for f in figures.values())
        for name, figure in figures.items():
            assert figure.layout.title.text, f"figure {name} has no title"
        explanation = scenario.explain(frame, config)
        assert isinstance(explanation, Explanation) and explanation.markdown()
        records = Records(frame)
        wrong = [str(claim) for claim in explanation.claims() if not claim.holds(records)]
        assert not wrong, f"{scenario.id}: claims the records do not show: {wrong}"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=ids)
def test_figures_are_built_one_by_one_when_read(scenario) -> None:
    """The live view reads only the charts in view: naming the figures builds none, reading one builds that one."""
    figures = scenario.figures(tiny_result(scenario.id).frame, scenario.validate(scenario.tiny))
    assert isinstance(figures, Figures) and len(figures) >= 2 and figures.built() == [], figures.built()
    last = list(figures)[-1]
    assert isinstance(figures[last], go.Figure) and figures[last] is figures[last]
    assert figures.built() == [last], f"reading {last} built {figures.built()}"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=ids)
def test_the_explanation_of_a_run_leads_with_a_takeaway(scenario) -> None:
    """A finished run's 'what to look for' starts with one line, and every sentence rests on claims."""
    result = tiny_result(scenario.id)
    explanation = scenario.explain(result.frame, scenario.validate(scenario.tiny))
    assert explanation.takeaway is not None, f"{scenario.id}: no takeaway for a finished run"
    assert "\n" not in explanation.takeaway.text
    for sentence in (explanation.takeaway, *explanation.details):
        assert sentence.claims, f"{scenario.id}: a sentence claims nothing the records prove: {sentence.text!r}"


@pytest.mark.parametrize("scenario", slow_where_launching(SCENARIOS))
def test_every_glossary_term_has_its_evidence_in_a_run(scenario) -> None:
    """A term counts as shown only where the run records its metrics and draws its figure."""
    for term, evidence in scenario.terms.items():
        check_evidence(scenario, term, evidence)


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.methods], ids=lambda s: s.id)
def test_every_training_method_has_its_evidence_in_a_run(scenario) -> None:
    """A training method counts as shown (in full or in part) only where the run records and draws it, like a term."""
    for method, evidence in scenario.methods.items():
        check_evidence(scenario, method, evidence)


def check_evidence(scenario, name: str, evidence) -> None:
    result = tiny_result(scenario.id, **evidence.when)
    records = Records(result.frame)
    arms = [arm for arm in records.arms() if evidence.arm in arm]
    assert arms, f"{scenario.id} / {name}: no arm labelled like {evidence.arm!r} in {records.arms()}"
    for metric in evidence.metrics:
        assert any(records.has(metric, arm) for arm in arms), f"{scenario.id} / {name}: no {metric!r} recorded"
    if evidence.figure is not None:
        figures = scenario.figures(result.frame, scenario.validate({**scenario.tiny, **evidence.when}))
        assert evidence.figure in figures, f"{scenario.id} / {name}: no figure {evidence.figure!r}"
        traces = [t for t in figures[evidence.figure].data if _has_data(t)]
        assert traces, f"{scenario.id} / {name}: figure {evidence.figure!r} draws nothing"


def _has_data(trace) -> bool:
    for attribute in ("y", "z", "values", "x"):
        values = getattr(trace, attribute, None)
        if values is not None and len(values):
            return True
    return False


@pytest.mark.parametrize("scenario", slow_where_launching(s for s in SCENARIOS if s.view_fields()))
def test_view_fields_change_no_record(scenario) -> None:
    """A field marked as view-only is not in the run's key, and changing it trains nothing different."""
    specs = scenario.field_specs()
    base = tiny_result(scenario.id)
    for name in scenario.view_fields():
        spec, current = specs[name], scenario.validate(scenario.tiny).model_dump()[name]
        other = _another_value(spec, current)
        assert name not in scenario.key_of(scenario.validate({**scenario.tiny, name: other}))
        changed = tiny_result(scenario.id, **{name: other})
        assert changed.frame.equals(base.frame), f"{scenario.id}: view field {name}={other} changed the records"


def _another_value(spec: dict, current):
    if spec["kind"] == "choice":
        return next(c for c in spec["choices"] if c != current)
    if spec["kind"] == "bool":
        return not current
    return spec["le"] if current != spec["le"] else spec["ge"]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=ids)
def test_bad_values_are_refused_with_the_field_named(scenario) -> None:
    with pytest.raises(ConfigError, match="unknown key 'no_such_field'"):
        scenario.validate({"no_such_field": 1})
    for name, spec in scenario.field_specs().items():
        if spec["kind"] in ("int", "float"):
            with pytest.raises(ConfigError, match=f"^{name}=.* must be"):
                scenario.validate({name: spec["le"] * 10 + 1})


def test_a_config_that_is_not_a_mapping_is_a_config_error() -> None:
    scenario = SCENARIOS[0]
    for bad in ("depth=3", 5, ["depth", 3]):
        with pytest.raises(ConfigError, match="is a mapping"):
            scenario.validate(bad)


def test_minus_zero_is_keyed_as_zero() -> None:
    """−0.0 and 0.0 train alike, so they share a key."""
    for scenario in SCENARIOS:
        floats = [n for n, spec in scenario.field_specs().items() if spec["kind"] == "float" and spec.get("ge", 1) <= 0]
        for name in floats:
            assert scenario.key_of(scenario.validate({name: -0.0})) == scenario.key_of(scenario.validate({name: 0.0}))


def test_registering_a_duplicate_id_is_refused() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        register(SCENARIOS[0])


def test_unknown_scenario_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="vanishing-gradients"):
        get_scenario("no-such-scenario")
