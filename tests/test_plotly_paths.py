"""Plotly's path parsing, cached (scenarios/plotly_paths.py): the same answers, the same figures."""
import json

import plotly.basedatatypes as basedatatypes
import pytest
from plotly.utils import PlotlyJSONEncoder

from scenarios import get_scenario, plotly_paths
from tests.tiny_runs import tiny_frame

PATHS = ["", "title", "title_text", "xaxis2.title.text", "error_x", "error_x_thickness", "line_color",
         "marker.colorbar.tickfont_size", "annotations[0].text", "_private", "legend_title_text", "a__b_"]


def test_the_cached_parse_answers_as_plotly_does_and_hands_each_caller_its_own_positions() -> None:
    assert plotly_paths.memoize()  # idempotent: the scenarios' import already cached it
    parse = basedatatypes._str_to_dict_path_full
    assert parse.explorer_memoized
    for path in PATHS * 2:  # the second pass answers from the cache
        assert parse(path) == parse.original(path), path
    first, again = parse("xaxis2.title.text")[1], parse("xaxis2.title.text")[1]
    first.append(99)
    assert again != first and parse("xaxis2.title.text")[1] == parse.original("xaxis2.title.text")[1]


def test_a_path_that_is_not_a_string_fails_as_plotly_makes_it_fail() -> None:
    """Plotly's callers catch the error its parser raises for a list or a dict (an overlay on the page
    took that road); the cache's own TypeError for an unhashable key would escape them."""
    parse = basedatatypes._str_to_dict_path_full
    for key in (["xaxis", "title"], {"xaxis": 1}):
        with pytest.raises(Exception) as theirs:
            parse.original(key)
        with pytest.raises(type(theirs.value)):
            parse(key)


@pytest.mark.parametrize("scenario_id", ["dead-relu", "quantization"])
def test_a_scenarios_figures_are_the_same_with_and_without_the_cache(scenario_id, monkeypatch) -> None:
    scenario = get_scenario(scenario_id)
    config, frame = scenario.validate(scenario.tiny), tiny_frame(scenario_id)

    def drawn() -> dict[str, str]:
        return {name: json.dumps(figure.to_plotly_json(), cls=PlotlyJSONEncoder, sort_keys=True)
                for name, figure in scenario.figures(frame, config).items()}

    cached = drawn()
    monkeypatch.setattr(basedatatypes, "_str_to_dict_path_full", basedatatypes._str_to_dict_path_full.original)
    assert drawn() == cached
