"""Fuzzing every edge that takes input: each scenario's Config (`validate`), the CLI's `--set` and
`--config`, and the URL (`parse_query`). Bad values give a one-line ConfigError, exit code 2 with
one line, or one-line warnings — never a traceback. Nothing trains: a valid config stops at the
run's door. A quick pass runs in the default suite; `-m slow` runs a long one."""
import contextlib
import io
import json
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from explorer.cli.main import main
from explorer.page.url import parse_query
from scenarios import all_scenarios
from scenarios.base import ConfigError, Scenario, ScenarioConfig

SCENARIOS = all_scenarios()
QUICK, LONG = 25, 300  # examples per scenario and edge (the CLI gets half: it spawns no process, but parses more)


def fuzz(examples: int):
    return settings(max_examples=examples, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


ANY_TEXT = st.text(max_size=24)
ODD_TEXT = st.sampled_from(["", " ", "\n", "5\n6", " 7 ", "nan", "-nan", "inf", "-inf", "1e309", "-0.0", "0x10",
                            "1_000", "١٢", "true", "True", "yes", "1", "0", "[1]", "{}", "null", "\x00", "é", "🙂",
                            "[x](https://evil.example)", "**b**", "<b>", "a=b", "=", "9" * 40])


def raw_values(spec: dict) -> st.SearchStrategy:
    """Values aimed at one field: its choices and bounds, next to them, and anything at all."""
    near: list = []
    if spec["kind"] == "choice":
        near = list(spec["choices"]) + [str(c) for c in spec["choices"]] + [str(c).upper() for c in spec["choices"]]
    elif spec["kind"] in ("int", "float"):
        for bound in (spec.get("ge"), spec.get("le"), spec.get("gt"), spec.get("lt")):
            if bound is not None:
                near += [bound, bound - 1, bound + 1, bound * 10, -bound, str(bound), f" {bound}", float(bound) + 0.5]
    return st.one_of(ODD_TEXT, ANY_TEXT, st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                     st.booleans(), st.none(), st.lists(st.integers(), max_size=3),
                     st.dictionaries(ANY_TEXT, st.integers(), max_size=2), *([st.sampled_from(near)] if near else []))


def settings_for(scenario: Scenario) -> st.SearchStrategy:
    """A mapping of a few settings: mostly real keys with values aimed at them, some unknown keys."""
    specs = scenario.field_specs()
    known = st.sampled_from(list(specs)).flatmap(lambda key: st.tuples(st.just(key), raw_values(specs[key])))
    unknown = st.tuples(st.one_of(ANY_TEXT, ODD_TEXT), raw_values({"kind": "other"}))
    return st.lists(known | unknown, max_size=5).map(dict)


def one_line(message: str) -> bool:
    return bool(message.strip()) and "\n" not in message and "\r" not in message


# --- the API: Scenario.validate ------------------------------------------------------------
def check_validate(scenario: Scenario, values: dict) -> None:
    try:
        config = scenario.validate(values)
    except ConfigError as error:
        assert one_line(str(error)), repr(str(error))
        return
    assert isinstance(config, scenario.Config) and isinstance(config, ScenarioConfig)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
@fuzz(QUICK)
@given(data=st.data())
def test_validate_gives_a_config_or_a_one_line_error(scenario, data) -> None:
    check_validate(scenario, data.draw(settings_for(scenario)))


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
@fuzz(LONG)
@given(data=st.data())
def test_validate_long(scenario, data) -> None:
    check_validate(scenario, data.draw(settings_for(scenario)))


# --- the CLI: run --set ... --config FILE ---------------------------------------------------
class WouldTrain(Exception):
    """Raised in place of training: the command line was good."""


def check_cli(scenario: Scenario, sets: list[str], config_text: str | None, tmp_path) -> None:
    """(tmp_path is shared by the examples: each writes its own config file over the last.)"""
    argv = ["run", scenario.id, "--no-store"] + [arg for pair in sets for arg in ("--set", pair)]
    if config_text is not None:
        path = tmp_path / "config.json"
        path.write_text(config_text, encoding="utf-8", errors="surrogatepass")
        argv += ["--config", str(path)]
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.object(Scenario, "run", side_effect=WouldTrain), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    lines = err.getvalue().strip().splitlines()
    if code == 1:  # the patched run raised: the config was valid and it would have trained
        assert lines[-1] == "error: the run failed: WouldTrain:", lines
        return
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (argv, code, err.getvalue())


def cli_input(scenario: Scenario) -> st.SearchStrategy:
    pairs = settings_for(scenario).map(lambda values: [f"{k}={v}" for k, v in values.items()])
    sets = st.one_of(pairs, st.lists(st.one_of(ANY_TEXT, ODD_TEXT), max_size=3))
    config_text = st.one_of(st.none(), settings_for(scenario).map(lambda v: json.dumps(v, default=str)),
                            ANY_TEXT, ODD_TEXT, st.just("[" * 5000), st.just('{"seed": NaN}'))
    return st.tuples(sets, config_text)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
@fuzz(QUICK // 2)
@given(data=st.data())
def test_cli_run_arguments_exit_2_in_one_line_or_would_train(scenario, data, tmp_path) -> None:
    check_cli(scenario, *data.draw(cli_input(scenario)), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
@fuzz(LONG // 2)
@given(data=st.data())
def test_cli_run_arguments_long(scenario, data, tmp_path) -> None:
    check_cli(scenario, *data.draw(cli_input(scenario)), tmp_path)


# --- the URL: parse_query -------------------------------------------------------------------
def check_query(scenario: Scenario, params: dict[str, str]) -> None:
    restored = parse_query(scenario, params)
    assert all(one_line(w) for w in restored.warnings), restored.warnings
    assert set(restored.values) <= set(scenario.field_specs())
    scenario.validate(restored.values)  # what the page will use is valid together
    assert len(restored.warnings) >= any(k not in scenario.field_specs() for k in params)  # unknown ones: one line
    assert all(len(w) < 1000 for w in restored.warnings), "echoed values are cut"


def query_for(scenario: Scenario) -> st.SearchStrategy:
    return settings_for(scenario).map(lambda values: {str(k): str(v) for k, v in values.items()})


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
@fuzz(QUICK)
@given(data=st.data())
def test_url_parameters_give_values_or_one_line_warnings(scenario, data) -> None:
    check_query(scenario, data.draw(query_for(scenario)))


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
@fuzz(LONG)
@given(data=st.data())
def test_url_parameters_long(scenario, data) -> None:
    check_query(scenario, data.draw(query_for(scenario)))
