"""Writing a run to files: config.json, metrics.csv, summary.json and every figure.

config.json and summary.json name their scenario (`"scenario": id`, and the run's id in the
summary): a folder of results says what made it, and `run --config config.json` refuses to read
another scenario's settings.

Figures are exported from the same `scenario.figures(frame, config)` the page draws.
An HTML figure needs plotly.js (4.8 MB) to open offline: `embed` puts it inside each file,
`file` writes it once as `plotly-<version>.min.js` beside the figures, which load it from
there (several figures are then not N x 4.8 MB; keep the folder together). `auto`, the
default, is `file` when more than one HTML figure is written. PNG and SVG go through
kaleido, which drives the system's Chrome/Chromium (one browser start for all figures).
"""
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs, get_plotlyjs_version

IMAGE_FORMATS = ("png", "svg")
PLOTLYJS_MODES = ("auto", "embed", "file")
WIDTH, HEIGHT = 1000, 600


def plotlyjs_name() -> str:
    """The shared plotly.js file's name; the version in it, so a reused folder never mixes two."""
    return f"plotly-{get_plotlyjs_version()}.min.js"


def shared_plotlyjs(mode: str, html_figures: int) -> bool:
    """Whether HTML figures load plotly.js from one file beside them (`auto`: when more than one)."""
    if mode not in PLOTLYJS_MODES:
        raise ValueError(f"plotly.js mode {mode!r} is not one of {', '.join(PLOTLYJS_MODES)}")
    return mode == "file" or (mode == "auto" and html_figures > 1)


def standalone_html(html: bytes) -> bytes:
    """An HTML figure written with the shared file, with plotly.js put inside (opens on its own)."""
    tag = f'<script charset="utf-8" src="{plotlyjs_name()}"></script>'.encode()
    return html.replace(tag, b"<script>" + get_plotlyjs().encode() + b"</script>", 1)


def safe_name(text: str) -> str:
    """A file-name piece from any text: letters, digits, '-', '_' only."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "figure"


def write_figures(figures: Mapping[str, go.Figure], out: Path, formats: tuple[str, ...] = ("html", "png"),
                  plotlyjs: str = "auto") -> list[Path]:
    """Each figure in each format; with a shared plotly.js, its file first in the list."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if "html" in formats:
        include: str | bool = True
        if shared_plotlyjs(plotlyjs, len(figures)):
            include = plotlyjs_name()
            (out / include).write_text(get_plotlyjs(), encoding="utf-8")  # rewritten: never a stale copy
            written.append(out / include)
        for name, figure in figures.items():
            path = out / f"{safe_name(name)}.html"
            figure.write_html(path, include_plotlyjs=include, full_html=True)
            written.append(path)
    images = [(figure, out / f"{safe_name(name)}.{fmt}", fmt)
              for fmt in formats if fmt in IMAGE_FORMATS for name, figure in figures.items()]
    if images:  # one call: kaleido starts Chromium once for every image of every format
        figs, paths, fmts = (list(column) for column in zip(*images))
        pio.write_images(figs, paths, format=fmts, width=WIDTH, height=HEIGHT)
        written += paths
    return written


def write_run(out: Path, scenario: str, config: dict[str, Any], frame: pd.DataFrame, summary: dict[str, Any],
              figures: Mapping[str, go.Figure], formats: tuple[str, ...] = ("html", "png"),
              plotlyjs: str = "auto", run_id: str | None = None) -> list[Path]:
    """Everything a run of `scenario` produced, in `out`. Returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps({"scenario": scenario, **config}, indent=2, sort_keys=True) + "\n")
    frame[["arm", "step", "metric", "value"]].to_csv(out / "metrics.csv", index=False)
    named = {"scenario": scenario, "run_id": run_id, **summary}
    (out / "summary.json").write_text(json.dumps(named, indent=2, default=str) + "\n")
    return [out / "config.json", out / "metrics.csv", out / "summary.json"] + write_figures(figures, out, formats, plotlyjs)
