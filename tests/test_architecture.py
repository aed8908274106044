"""The layering promise: app -> explorer -> scenarios -> engines, never backwards."""
import ast
from pathlib import Path

import pytest

from scenarios import SHARED_MODULES

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
    shared = SHARED_MODULES | {"__init__"}
    scenario_modules = {p.stem for p in files("scenarios") if not p.stem.startswith("_")} - shared
    for path in files("scenarios"):
        if path.stem in shared or path.stem.startswith("_"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("scenarios."):
                other = node.module.split(".")[1]
                assert other not in scenario_modules, f"{path.name} imports scenario {other}"


WORKER_MODULES = ("__main__", "worker")  # explorer/worker.py is the worker process's entry: it trains


@pytest.mark.parametrize("path", [p for p in files("explorer") if p.stem not in WORKER_MODULES] + [ROOT / "app.py"],
                         ids=lambda p: p.name)
def test_ui_modules_import_no_torch(path: Path) -> None:
    """explorer/ (but its worker) and app.py turn records into tables and charts; they hold no torch."""
    assert "torch" not in imported_modules(path), f"{path.relative_to(ROOT)} imports torch"


UI_MODULES = sorted(f"explorer.{p.stem}" for p in (ROOT / "explorer").glob("*.py") if p.stem not in WORKER_MODULES)


def test_ui_modules_load_no_torch_in_a_fresh_interpreter() -> None:
    """The UI process draws controls and figures from every scenario without importing torch:
    scenario modules import their engines inside `phases`, when a run starts."""
    import subprocess
    import sys
    code = ("import sys; import app_modules; mods = " + repr(UI_MODULES) +
            "; [__import__(m) for m in mods]; import scenarios; scenarios.all_scenarios(); "
            "print('torch' in sys.modules)").replace("import app_modules; ", "")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "False", "importing the UI modules and the scenario registry loaded torch"


def test_importing_a_module_sets_no_thread_count() -> None:
    """No module sets torch's thread count at import: whoever trains does (engines.runtime)."""
    offenders = [p.relative_to(ROOT) for p in files("engines") + files("scenarios") + files("explorer")
                 if "set_num_threads" in p.read_text() and p.name != "runtime.py"]
    assert not offenders, offenders


@pytest.mark.parametrize("path", files("engines") + files("scenarios") + files("explorer") + files("tests"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_files_stay_under_300_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= 300, f"{path.relative_to(ROOT)} has {lines} lines; split it (STYLE.md: ~300)"


@pytest.mark.parametrize("path", [p for p in files("scenarios") if not p.stem.startswith("_")
                                  and p.stem not in SHARED_MODULES | {"__init__"}],
                         ids=lambda p: p.name)
def test_a_scenario_module_is_glue(path: Path) -> None:
    """A scenario that reuses the engines is a Config, its arms and its claims: ≤ 180 lines
    (figures may live in its private `_<name>_figures.py`)."""
    lines = len(path.read_text().splitlines())
    assert lines <= 180, f"{path.name} has {lines} lines"
