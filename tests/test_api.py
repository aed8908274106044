"""`explorer.run(id, **settings)`: the frame, the figures and the explanation, shown by a notebook;
a progress bar when tqdm is there and none when not; docstrings and py.typed for type checkers."""
import inspect
import sys
from pathlib import Path

import pytest
from plotly.offline import get_plotlyjs_version

import explorer
from explorer import api
from explorer.runs.store import RunStore
from scenarios import ConfigError, all_scenarios

ROOT = Path(__file__).resolve().parent.parent
TINY = {"depth": 4, "width": 16, "steps": 12}


def test_run_returns_records_figures_and_explanation_and_serves_a_stored_run(capsys) -> None:
    """The same settings again are read from the run store; the notebook views render the explanation
    as markdown and every figure as HTML, with plotly.js inside once."""
    result = explorer.run("vanishing-gradients", **TINY)
    assert result.status == "finished" and not result.served_from_store and result.run_id
    assert set(result.frame.columns) >= {"arm", "step", "metric", "value"} and len(result.frame) > 0
    assert list(result.figures) == ["loss", "grad_heatmap", "grad_profile", "backprop_profile", "activation_std"]
    assert "100%" in capsys.readouterr().err, "tqdm drew a bar to the end"
    again = explorer.run("vanishing-gradients", progress=False, **TINY)
    assert again.served_from_store and again.run_id == result.run_id and again.frame.equals(result.frame)
    markdown = again.explanation._repr_markdown_()
    assert markdown.startswith("**") and "$10^{" in markdown, markdown
    assert again._repr_markdown_().startswith("**Vanishing gradients**: finished")
    html = again.figures._repr_html_()
    assert html.count('class="plotly-graph-div"') == len(again.figures), "every figure"
    assert html.count(f"plotly.js v{get_plotlyjs_version()}") == 1, "plotly.js once, offline"


def test_a_bad_setting_is_refused_before_anything_trains_and_store_false_stores_nothing(capsys) -> None:
    with pytest.raises(ConfigError, match="depth must be an integer from 2 to 64"):
        explorer.run("vanishing-gradients", depth=100)
    with pytest.raises(KeyError, match="unknown scenario"):
        explorer.run("no-such-scenario")
    assert RunStore().count() == 0
    result = explorer.run("vanishing-gradients", store=False, **TINY)
    assert result.run_id is None and RunStore().count() == 0


def test_without_tqdm_a_run_draws_no_bar(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # `from tqdm.auto import tqdm` raises ImportError
    result = explorer.run("vanishing-gradients", store=False, **TINY)
    assert result.status == "finished" and capsys.readouterr().err == ""


def test_the_api_and_every_scenario_class_say_what_they_are() -> None:
    """Docstrings on the public functions; a scenario class's is its question first; py.typed shipped."""
    assert explorer.run is api.run and explorer.scenarios() == {s.id: s.question for s in all_scenarios()}
    for name in api.__all__:
        assert inspect.getdoc(getattr(api, name)), f"explorer.api.{name} has no docstring"
    for scenario in all_scenarios():
        assert type(scenario).__doc__.startswith(scenario.question), scenario.id
    for package in ("explorer", "scenarios", "engines"):
        assert (ROOT / package / "py.typed").is_file(), package
