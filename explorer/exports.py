"""Writing a run to files: config.json, metrics.csv, summary.json and every figure.

Figures are exported from the same `scenario.figures(frame, config)` the page draws.
HTML embeds plotly.js, so a file opens offline; PNG and SVG go through kaleido, which
drives the system's Chrome/Chromium (one browser start for all figures).
"""
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

IMAGE_FORMATS = ("png", "svg")
WIDTH, HEIGHT = 1000, 600


def safe_name(text: str) -> str:
    """A file-name piece from any text: letters, digits, '-', '_' only."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "figure"


def write_figures(figures: dict[str, go.Figure], out: Path, formats: tuple[str, ...] = ("html", "png")) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if "html" in formats:
        for name, figure in figures.items():
            path = out / f"{safe_name(name)}.html"
            figure.write_html(path, include_plotlyjs=True, full_html=True)
            written.append(path)
    images = [(figure, out / f"{safe_name(name)}.{fmt}", fmt)
              for fmt in formats if fmt in IMAGE_FORMATS for name, figure in figures.items()]
    if images:  # one call: kaleido starts Chromium once for every image of every format
        figs, paths, fmts = (list(column) for column in zip(*images))
        pio.write_images(figs, paths, format=fmts, width=WIDTH, height=HEIGHT)
        written += paths
    return written


def write_run(out: Path, config: dict[str, Any], frame: pd.DataFrame, summary: dict[str, Any],
              figures: dict[str, go.Figure], formats: tuple[str, ...] = ("html", "png")) -> list[Path]:
    """Everything a run produced, in `out`. Returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    frame[["arm", "step", "metric", "value"]].to_csv(out / "metrics.csv", index=False)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return [out / "config.json", out / "metrics.csv", out / "summary.json"] + write_figures(figures, out, formats)
