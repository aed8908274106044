"""Packaging: one version, the dependencies declared once (pyproject = requirements), a `tdx` command."""
import ast
import re
import sys
import tomllib
from pathlib import Path

from explorer import __version__

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# Imported directly but installed by another dependency (and pinned through it).
THROUGH = {"starlette": "streamlit (its server since 1.5x)"}
DISTRIBUTION = {"torch": "torch", "streamlit": "streamlit", "plotly": "plotly", "kaleido": "kaleido",
                "pandas": "pandas", "numpy": "numpy", "pydantic": "pydantic", "peft": "peft"}


def requirement_lines(name: str) -> list[str]:
    lines = [line.strip() for line in (ROOT / name).read_text().splitlines()]
    return [line for line in lines if line and not line.startswith(("#", "-r"))]


def test_pyproject_declares_exactly_the_pinned_requirements() -> None:
    assert PYPROJECT["project"]["dependencies"] == requirement_lines("requirements.txt")
    assert PYPROJECT["project"]["optional-dependencies"]["dev"] == requirement_lines("requirements-dev.txt")


def test_the_version_is_written_once() -> None:
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "explorer.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    assert "__version__" in (ROOT / "app.py").read_text(), "the footer shows it"


def test_tdx_is_the_cli_and_the_license_is_mit() -> None:
    assert PYPROJECT["project"]["scripts"] == {"tdx": "explorer.cli.main:main"}
    from explorer.cli.main import main
    assert callable(main)
    assert (ROOT / "LICENSE").read_text().startswith("MIT License") and PYPROJECT["project"]["license"] == "MIT"


def test_every_third_party_import_is_declared() -> None:
    """numpy is imported by scenarios: it must be a dependency of its own, not one by accident."""
    local = {"explorer", "scenarios", "engines", "app", "bench", "tests"}
    declared = {re.split(r"[=<>!~ ]", line)[0].lower() for line in requirement_lines("requirements.txt")}
    found: dict[str, str] = {}
    for package in ("explorer", "scenarios", "engines"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in local:
                        found.setdefault(top, str(path.relative_to(ROOT)))
    missing = {top: where for top, where in found.items()
               if top not in THROUGH and DISTRIBUTION.get(top, top).lower() not in declared}
    assert not missing, f"imported but not in requirements.txt / pyproject.toml: {missing}"
