"""The shareable URL: a page's config round-trips through its query string, and a bad link
never crashes the page — it says which field was wrong and uses the default."""
import re

import pytest
from streamlit.testing.v1 import AppTest

from explorer.page.url import config_query, parse_query, to_query
from explorer.plaintext import WORD_JOINER
from scenarios import all_scenarios, get_scenario

SCENARIO_ID = "vanishing-gradients"


def scenario_page(scenario_id: str) -> None:
    from explorer.page.scenario_page import render_scenario
    from scenarios import get_scenario
    render_scenario(get_scenario(scenario_id))


def open_page(query: dict[str, str] | None = None, scenario_id: str = SCENARIO_ID) -> AppTest:
    at = AppTest.from_function(scenario_page, args=(scenario_id,), default_timeout=60)
    at.query_params.update(query or {})
    return at.run()


def shown(markdown: str) -> str:
    """What a reader sees of an escaped markdown body: the backslashes and word joiners gone."""
    return re.sub(r"\\(.)", r"\1", markdown).replace(WORD_JOINER, "")


def widget_values(at: AppTest, scenario_id: str = SCENARIO_ID) -> dict:
    prefix = scenario_id + "."
    return {key[len(prefix):]: at.session_state[key] for key in at.session_state
            if isinstance(key, str) and key.startswith(prefix)}


@pytest.mark.parametrize("scenario", all_scenarios(), ids=lambda s: s.id)
def test_every_config_survives_its_own_query_string(scenario) -> None:
    """Defaults, every preset, and the upper bound of each number parse back to the same config."""
    configs = [scenario.validate({})] + [scenario.validate(p) for p in scenario.presets.values()]
    for name, spec in scenario.field_specs().items():
        if spec["kind"] in ("int", "float") and "le" in spec:
            configs.append(scenario.validate({name: spec["le"]}))
    for config in configs:
        restored = parse_query(scenario, config_query(config))
        assert not restored.warnings, restored.warnings
        assert scenario.validate(restored.values) == config


def test_query_text_is_plain() -> None:
    assert [to_query(v) for v in (True, False, 30, 0.1, 1e-05, "relu + he")] == [
        "true", "false", "30", "0.1", "1e-05", "relu + he"]


def test_a_bad_value_names_the_field_and_falls_back_to_the_default() -> None:
    scenario = get_scenario(SCENARIO_ID)
    restored = parse_query(scenario, {"depth": "999", "activation": "swish", "width": "abc", "lr": "0.03",
                                      "colour": "red"})
    assert restored.values == {"lr": 0.03}, restored.values
    text = " ".join(restored.warnings)
    assert "depth must be an integer from 2 to 64" in text and "default, 10" in text
    assert "activation must be one of sigmoid, tanh, relu, gelu" in text
    assert "width" in text and "'colour' is not a setting" in text
    assert all("\n" not in w for w in restored.warnings)


def test_url_round_trip_config_to_query_to_a_new_session() -> None:
    """Set widgets -> the URL carries the config -> a new session opened on that URL shows the same config."""
    at = open_page()
    at.sidebar.slider(key=f"{SCENARIO_ID}.depth").set_value(23)
    at.sidebar.selectbox(key=f"{SCENARIO_ID}.activation").set_value("tanh")
    at.sidebar.toggle(key=f"{SCENARIO_ID}.residual").set_value(True)
    at.sidebar.select_slider(key=f"{SCENARIO_ID}.lr").set_value(0.02)
    at.sidebar.number_input(key=f"{SCENARIO_ID}.seed").set_value(7)
    at.run()
    query = dict(at.query_params)
    assert query["depth"] == "23" and query["activation"] == "tanh" and query["residual"] == "true"
    assert query["lr"] == "0.02" and query["seed"] == "7"
    assert set(query) == set(get_scenario(SCENARIO_ID).field_specs()), "only config fields in the URL"

    fresh = open_page(query)
    assert not fresh.exception and not fresh.warning
    assert widget_values(fresh) == widget_values(at)
    assert fresh.sidebar.slider(key=f"{SCENARIO_ID}.depth").value == 23
    assert dict(fresh.query_params) == query


def test_a_link_with_a_value_between_the_log_steps_still_draws_its_slider() -> None:
    at = open_page({"lr": "0.03"})
    assert not at.exception
    assert at.sidebar.select_slider(key=f"{SCENARIO_ID}.lr").value == 0.03


def test_invalid_query_values_warn_on_the_page_and_use_defaults() -> None:
    at = open_page({"depth": "65", "activation": "swish", "steps": "20", "nope": "1"})
    assert not at.exception
    warnings = " ".join(shown(w.value) for w in at.warning)
    assert "depth=65 is not allowed" in warnings and "depth must be an integer from 2 to 64" in warnings
    assert "activation must be one of" in warnings and "'nope'" in warnings
    assert at.sidebar.slider(key=f"{SCENARIO_ID}.depth").value == 10
    assert at.sidebar.slider(key=f"{SCENARIO_ID}.steps").value == 20, "the valid value is kept"
    assert at.query_params["depth"] == "10" and "nope" not in at.query_params

    at.sidebar.slider(key=f"{SCENARIO_ID}.width").set_value(32).run()
    assert not at.warning, "the warnings go once the person changes a setting"


CRAFTED = {"[click](https://evil.example)": "1", "depth": "![x](https://evil.example/x.png)\n**two**",
           "activation": ":red[styled] <b>html</b> $x^2$ www.evil.example"}


def test_a_crafted_link_is_warned_about_in_plain_text_on_one_line() -> None:
    """Markdown in a link's names and values reaches the warning escaped: no link, image or style."""
    at = open_page(CRAFTED)
    assert not at.exception
    bodies = [w.value for w in at.warning]
    assert len(bodies) == 3, bodies
    for body in bodies:
        assert "\n" not in body, body
        assert re.search(r"(?<!\\)[\[\]()*:$<>]", body.replace("\\\\", "")) is None, f"unescaped markup in {body!r}"
    text = " ".join(shown(b) for b in bodies)
    assert "'[click](https://evil.example)' is not a setting" in text
    assert "![x](https://evil.example/x.png) **two**" in text, "the newline became a space"
    assert ":red[styled] <b>html</b> $x^2$ www.evil.example" in text


@pytest.mark.slow
def test_a_link_to_a_stored_config_shows_the_stored_run_at_once() -> None:
    scenario = get_scenario(SCENARIO_ID)
    config = scenario.validate(scenario.tiny)
    result = scenario.run(config)
    from explorer.runs.store import RunStore
    from tests.test_app import progress_text
    RunStore().save(scenario.id, config.model_dump(mode="json"), scenario.code_version(), result.status,
                    result.frame, result.summary)
    at = open_page(config_query(config))
    assert not at.exception
    assert progress_text(at).startswith("Served from the run store")
    assert len([c for c in at.get("bidi_component") if '"figure"' in c.proto.json]) >= 3  # the page's charts


def test_a_comparison_link_restores_seeds_band_and_isolated_setting() -> None:
    """seeds, band and isolate are page state in the URL: restored into their widgets, written back,
    never taken for settings; a bad one is warned about in one line."""
    scenario = get_scenario(SCENARIO_ID)
    tiny = config_query(scenario.validate(scenario.tiny))
    at = open_page({**tiny, "seeds": "3", "band": "mean ± std", "isolate": "depth"})
    assert not at.exception and not at.warning, [w.value for w in at.warning]
    assert at.sidebar.number_input(key=f"seeds:{SCENARIO_ID}").value == 3
    assert at.sidebar.radio(key=f"band:{SCENARIO_ID}").value == "mean ± std"
    assert at.session_state[f"isolate-field:{SCENARIO_ID}"] == "depth"
    assert {k: at.query_params[k] for k in ("seeds", "band", "isolate")} == {
        "seeds": "3", "band": "mean ± std", "isolate": "depth"}

    bad = open_page({**tiny, "seeds": "99", "band": "wide", "isolate": "colour", "compare": "nope"})
    assert not bad.exception
    text = " ".join(shown(w.value) for w in bad.warning)
    assert "seeds='99' was not used" in text and "band='wide'" in text and "isolate='colour'" in text
    assert "not in this run store: nope" in text and all("\n" not in w.value for w in bad.warning)


def test_settings_valid_only_together_are_read_together() -> None:
    """A field is checked alone, then the whole config: a link with a shorter line and a narrower context is
    kept as it is, and a line longer than the context is refused once, naming the field."""
    scenario = get_scenario("next-token")
    restored = parse_query(scenario, {"context": "16", "line_length": "16"})
    assert restored.values == {"context": 16, "line_length": 16} and not restored.warnings, restored
    refused = parse_query(scenario, {"context": "16", "line_length": "32"})
    assert refused.values == {} and len(refused.warnings) == 1 and "line_length=32 is longer" in refused.warnings[0]
