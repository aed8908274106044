"""The layering promise: app -> explorer -> scenarios -> engines, never backwards."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", files("engines"), ids=lambda p: p.name)
def test_engines_import_no_ui(path: Path) -> None:
    """engines/ is pure PyTorch: no streamlit, no plotly, nothing above it."""
    bad = imported_modules(path) & {"streamlit", "plotly", "explorer", "scenarios"}
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


@pytest.mark.parametrize("path", files("scenarios"), ids=lambda p: p.name)
def test_scenarios_import_no_streamlit(path: Path) -> None:
    """scenarios/ never imports streamlit or the explorer above it."""
    bad = imported_modules(path) & {"streamlit", "explorer"}
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_scenarios_import_no_other_scenario() -> None:
    """A scenario module imports the shared contract and helpers, never another scenario.
    Modules named `_something.py` are private helpers (figures, text), not scenarios."""
    shared = {"base", "plotting", "__init__"}
    scenario_modules = {p.stem for p in files("scenarios") if not p.stem.startswith("_")} - shared
    for path in files("scenarios"):
        if path.stem in shared or path.stem.startswith("_"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("scenarios."):
                other = node.module.split(".")[1]
                assert other not in scenario_modules, f"{path.name} imports scenario {other}"


@pytest.mark.parametrize("path", files("explorer") + [ROOT / "app.py"], ids=lambda p: p.name)
def test_ui_modules_import_no_torch(path: Path) -> None:
    """explorer/ and app.py turn records into tables and charts; they hold no torch."""
    assert "torch" not in imported_modules(path), f"{path.relative_to(ROOT)} imports torch"
