"""Exports from the page: safe names `<scenario>-<hash>-<figure>.<ext>`, the README's command that
reproduces the run, and a zip holding every figure (PNG, SVG, HTML), the CSV and the config."""
import io
import json
import shlex
import zipfile

import pandas as pd
import plotly.graph_objects as go
import pytest

from explorer.bundle import bundle_files, cli_command, config_hash, figure_pieces, stem, zip_bytes
from explorer.cli import build_parser, parse_sets
from explorer.runs import RunHandle
from explorer.view import View, build_view
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
    assert set(files) == {f"{prefix}-{name}.html" for name in view.figures} | {
        f"{prefix}-metrics.csv", f"{prefix}-config.json", "README.txt"}
    assert json.loads(files[f"{prefix}-config.json"]) == config
    metrics = pd.read_csv(io.BytesIO(files[f"{prefix}-metrics.csv"]))
    assert list(metrics.columns) == COLUMNS and len(metrics) == len(view.data)
    html = files[f"{prefix}-loss.html"].decode()
    assert "<html" in html and len(html) > 1_000_000, "plotly.js is embedded, so the file opens offline"
    readme = files["README.txt"].decode()
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


def test_a_figure_named_by_user_input_cannot_escape_the_folder(tmp_path) -> None:
    from explorer.exports import write_figures
    paths = write_figures({"../../evil name": go.Figure()}, tmp_path, formats=("html",))
    assert [p.parent for p in paths] == [tmp_path] and paths[0].name == "evil-name.html"
