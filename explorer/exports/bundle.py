"""The page's exports: every figure as PNG, SVG and standalone HTML, the metrics as CSV, the
config as JSON, and one zip of all of it with a README.txt holding the command that
reproduces the run.

Names are `<scenario>-<short config hash>-<figure>.<ext>`. Every piece goes through
`safe_name`, and the hash is hex, so nothing in a file name comes from user input unescaped.
A bundle of more than one HTML figure ships plotly.js once, as `plotly-<version>.min.js`
beside them (explorer/exports/files.py), instead of 4.8 MB inside each; a single figure's own
download is made standalone again (`standalone_html`).
"""
import hashlib
import io
import json
import shlex
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from explorer.exports.files import plotlyjs_name, safe_name, write_figures
from explorer.runs.store import canonical
from explorer.view.content import View
from scenarios.base import Scenario

FIGURE_FORMATS = ("png", "svg", "html")
MIME = {"png": "image/png", "svg": "image/svg+xml", "html": "text/html", "csv": "text/csv",
        "json": "application/json", "txt": "text/plain", "zip": "application/zip"}


def config_hash(config: dict[str, Any]) -> str:
    """Eight hex digits of the canonical config: the same settings always give the same names."""
    return hashlib.sha256(canonical(config).encode()).hexdigest()[:8]


def stem(scenario: Scenario, config: dict[str, Any]) -> str:
    return f"{safe_name(scenario.id)}-{config_hash(config)}"


def cli_command(scenario: Scenario, config: dict[str, Any], out: str | None = None) -> str:
    """`python -m explorer run <id> --set k=v ...` for every field that differs from its default."""
    defaults = scenario.validate({}).model_dump(mode="json")
    parts = ["python", "-m", "explorer", "run", scenario.id]
    for name, value in config.items():
        if defaults.get(name) != value:
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            parts += ["--set", f"{name}={text}"]
    if out:
        parts += ["--out", out, "--format", ",".join(FIGURE_FORMATS)]
    return " ".join(shlex.quote(part) for part in parts)


def figure_pieces(names: list[str]) -> dict[str, str]:
    """Figure name -> its file-name piece; two names that escape alike get a number, never collide."""
    pieces: dict[str, str] = {}
    for name in names:
        piece, n = safe_name(name), 2
        while piece in pieces.values():
            piece, n = f"{safe_name(name)}-{n}", n + 1
        pieces[name] = piece
    return pieces


def figure_files(figures: Mapping[str, go.Figure], prefix: str, formats: tuple[str, ...] = FIGURE_FORMATS,
                 plotlyjs: str = "auto") -> dict[str, bytes]:
    """`<prefix>-<figure>.<ext>` -> bytes (and the shared plotly.js under its own name, which the
    HTML files load); PNG and SVG from one kaleido (Chromium) start."""
    pieces = figure_pieces(list(figures))
    renamed = {pieces[name]: figure for name, figure in figures.items()}
    with tempfile.TemporaryDirectory(prefix="explorer-export-") as tmp:
        paths = write_figures(renamed, Path(tmp), formats, plotlyjs)
        return {(path.name if path.name == plotlyjs_name() else f"{prefix}-{path.name}"): path.read_bytes()
                for path in paths}


def readme_text(scenario: Scenario, config: dict[str, Any], commands: list[tuple[str, str]],
                notes: list[str], files: list[str]) -> str:
    lines = [f"{scenario.title} — {scenario.question}", ""]
    if scenario.listed:
        lines += ["Exported from the Training Dynamics Explorer. To reproduce with the command line,", ""]
    else:
        lines += ["Exported from the Training Dynamics Explorer: a run watched in your own training script",
                  "(from explorer import watch). Only that script trains it again; to print it from the run store,", ""]
    for what, command in commands:
        lines += [f"  # {what}", f"  {command}", ""]
    if scenario.listed:
        lines += ["The command trains the run again (or serves it from your run store) and writes the same",
                  "config, metrics and figures to the --out folder.", ""]
    lines += ["Config: " + json.dumps(config, sort_keys=True), ""]
    if notes:
        lines += ["What the figures show:"] + [f"  - {note}" for note in notes] + [""]
    if plotlyjs_name() in files:
        lines += [f"The HTML figures load plotly.js from {plotlyjs_name()} beside them: keep the folder together.",
                  ""]
    lines += ["Files:"] + [f"  {name}" for name in files]
    return "\n".join(lines) + "\n"


def bundle_files(scenario: Scenario, config: dict[str, Any], view: View, commands: list[tuple[str, str]],
                 formats: tuple[str, ...] = FIGURE_FORMATS, plotlyjs: str = "auto") -> dict[str, bytes]:
    """Every export of one page view, by file name (README.txt included). `plotlyjs`: `auto`
    (one shared plotly.js file for more than one figure), `embed` (inside each) or `file`."""
    prefix = stem(scenario, config)
    files = figure_files(view.figures, prefix, formats, plotlyjs)
    files[f"{prefix}-metrics.csv"] = view.data.to_csv(index=False).encode()
    files[f"{prefix}-config.json"] = (json.dumps(config, indent=2, sort_keys=True) + "\n").encode()
    files["README.txt"] = readme_text(scenario, config, commands, view.notes, sorted(files)).encode()
    return files


def zip_bytes(files: dict[str, bytes], folder: str) -> bytes:
    """One zip with every file inside `folder/` (so unzipping makes one folder)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            archive.writestr(f"{safe_name(folder)}/{name}", files[name])
    return buffer.getvalue()
