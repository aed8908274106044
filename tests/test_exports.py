"""Exports from the page: safe names `<scenario>-<hash>-<figure>.<ext>`, the README's command that
reproduces the run, and a zip holding every figure (PNG, SVG, HTML), the CSV and the config."""
import io
import json
import shlex
import zipfile

import pandas as pd
import plotly.graph_objects as go
import pytest
from plotly.offline import get_plotlyjs

from explorer.cli.main import build_parser, parse_sets
from explorer.exports.bundle import bundle_files, cli_command, config_hash, figure_pieces, stem, zip_bytes
from explorer.exports.files import plotlyjs_name, standalone_html, write_figures
from explorer.runs.handle import RunHandle
from explorer.view.content import View, build_view
from scenarios import get_scenario
from scenarios.base import COLUMNS

SCENARIO = get_scenario("vanishing-gradients")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_names_are_scenario_hash_figure_and_escaped() -> None:
    config = SCENARIO.validate({"depth": 30}).model_dump(mode="json")
    assert stem(SCENARIO, config) == f"vanishing-gradients-{config_hash(config)}"
    assert config_hash(config) != config_hash({**config, "depth": 31}) and len(config_hash(config)) == 8
    pieces = figure_pieces(["loss", "../../etc/passwd", "a b", "a-b", "a b"])
    assert pieces["../../etc/passwd"] == "etc-passwd"
    assert all(set(p) <= set("abcdefghijklmnopqrstuvwxyz0123456789-_") for p in pieces.values())
    assert len(set(pieces.values())) == len(pieces), "names that escape alike do not overwrite each other"


def test_the_readme_command_reproduces_the_config() -> None:
    config = SCENARIO.validate({"depth": 30, "contrast": "tanh + xavier", "residual": True, "lr": 0.02, "seed": 4})
    command = cli_command(SCENARIO, config.model_dump(mode="json"), out="OUT")
    argv = shlex.split(command)
    assert argv[:5] == ["python", "-m", "explorer", "run", SCENARIO.id]
    args = build_parser().parse_args(argv[3:])
    assert SCENARIO.validate(parse_sets(args.set)) == config
    assert args.out == "OUT" and args.format == "png,svg,html"
    assert "width" not in command, "only the settings that differ from the defaults"


def tiny_view() -> tuple[dict, View]:
    config = SCENARIO.validate(SCENARIO.tiny)
    handle = RunHandle.of_result(SCENARIO, config, SCENARIO.run(config))
    return config.model_dump(mode="json"), build_view(SCENARIO, handle, [])


def test_the_bundle_holds_csv_config_readme_and_html_figures() -> None:
    config, view = tiny_view()
    files = bundle_files(SCENARIO, config, view, [("this run", cli_command(SCENARIO, config))], formats=("html",))
    prefix = stem(SCENARIO, config)
    assert len(view.figures) > 1
    assert set(files) == {f"{prefix}-{name}.html" for name in view.figures} | {
        f"{prefix}-metrics.csv", f"{prefix}-config.json", "README.txt", plotlyjs_name()}
    assert json.loads(files[f"{prefix}-config.json"]) == config
    metrics = pd.read_csv(io.BytesIO(files[f"{prefix}-metrics.csv"]))
    assert list(metrics.columns) == COLUMNS and len(metrics) == len(view.data)
    html = files[f"{prefix}-loss.html"].decode()
    assert "<html" in html and f'src="{plotlyjs_name()}"' in html and len(html) < 200_000, \
        f"{len(html)} bytes: the figures share one plotly.js beside them"
    assert files[plotlyjs_name()].decode() == get_plotlyjs()
    alone = standalone_html(files[f"{prefix}-loss.html"]).decode()
    assert plotlyjs_name() not in alone and get_plotlyjs() in alone, "a single download opens on its own"
    readme = files["README.txt"].decode()
    assert f"load plotly.js from {plotlyjs_name()}" in readme
    assert "python -m explorer run vanishing-gradients --set depth=4" in readme and prefix + "-loss.html" in readme

    archive = zipfile.ZipFile(io.BytesIO(zip_bytes(files, prefix)))
    assert sorted(archive.namelist()) == sorted(f"{prefix}/{name}" for name in files)


@pytest.mark.slow
def test_png_and_svg_come_from_one_kaleido_call() -> None:
    config, view = tiny_view()
    files = bundle_files(SCENARIO, config, view, [], formats=("png", "svg"))
    prefix = stem(SCENARIO, config)
    for name in view.figures:
        assert files[f"{prefix}-{name}.png"][:8] == PNG_MAGIC, name
        assert b"<svg" in files[f"{prefix}-{name}.svg"][:400], name


@pytest.mark.parametrize("mode, count, shared", [("auto", 1, False), ("auto", 3, True), ("embed", 3, False),
                                                 ("file", 1, True)])
def test_html_figures_share_one_plotlyjs_file_when_there_are_several(tmp_path, mode, count, shared) -> None:
    figures = {f"f{i}": go.Figure(go.Scatter(y=[i, 1])) for i in range(count)}
    paths = write_figures(figures, tmp_path, formats=("html",), plotlyjs=mode)
    sizes = {p.name: p.stat().st_size for p in paths}
    assert (plotlyjs_name() in sizes) is shared, sizes
    plotlyjs_copies = (sum(sizes.values()) - 100_000 * count) / len(get_plotlyjs())
    assert round(plotlyjs_copies) == (1 if shared else count), sizes
    for i in range(count):
        html = (tmp_path / f"f{i}.html").read_text()
        assert (f'src="{plotlyjs_name()}"' in html) is shared and (len(html) > 1_000_000) is not shared


def test_a_figure_named_by_user_input_cannot_escape_the_folder(tmp_path) -> None:
    paths = write_figures({"../../evil name": go.Figure()}, tmp_path, formats=("html",))
    assert [p.parent for p in paths] == [tmp_path] and paths[0].name == "evil-name.html"


def _download_rows(scenario_id: str, titles: dict[str, str]) -> None:
    from explorer.page.export_panel import download_buttons
    from scenarios import get_scenario
    files = {f"s-{name}.{fmt}": b"x" for name in titles for fmt in ("png", "svg", "html")}
    files.update({"s-metrics.csv": b"a", "s-config.json": b"{}"})
    download_buttons(get_scenario(scenario_id), {"files": files, "stem": "s", "zip": b"z", "problem": None,
                                                 "figures": list(titles), "titles": titles})


def test_the_export_rows_name_each_figure_by_its_title_not_its_id() -> None:
    """The Export panel listed `gap_vs_n`, `early_stopping`: each row now reads as the chart's title."""
    from streamlit.testing.v1 import AppTest
    titles = {"gap_vs_n": "“Generalisation gap against examples”", "loss": "“Training loss”"}
    at = AppTest.from_function(_download_rows, args=("generalization", titles)).run()
    shown = [m.value for m in at.markdown]
    assert shown == list(titles.values()), shown
