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


SCENARIO_PACKAGES = sorted(p.parent.name for p in (ROOT / "scenarios").glob("*/__init__.py"))


def scenario_package_of(module: str) -> str | None:
    """`scenarios.<package>…` -> package, for a scenario package; None for the shared contract."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "scenarios" and parts[1] in SCENARIO_PACKAGES else None


def imported_names(path: Path) -> set[str]:
    """Every dotted module a file imports, with `from pkg import name` counted as pkg.name too."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("package", SCENARIO_PACKAGES)
def test_a_scenario_folder_imports_no_other_scenario(package: str) -> None:
    """A scenario's folder imports the shared contract and its own modules, never another scenario's."""
    for path in sorted((ROOT / "scenarios" / package).rglob("*.py")):
        others = {scenario_package_of(name) for name in imported_names(path)} - {None, package}
        assert not others, f"{path.relative_to(ROOT)} imports the scenario folder(s) {sorted(others)}"


def test_the_shared_contract_imports_no_scenario() -> None:
    """The modules at the top of scenarios/ are below every scenario: none imports one."""
    for path in sorted((ROOT / "scenarios").glob("*.py")):
        others = {scenario_package_of(name) for name in imported_names(path)} - {None}
        assert not others, f"{path.relative_to(ROOT)} imports the scenario folder(s) {sorted(others)}"


def test_every_scenario_is_a_folder_and_every_folder_a_scenario() -> None:
    """scenarios/<name>/__init__.py defines exactly one registered Scenario; no helper lies loose."""
    import scenarios
    from scenarios.base import Scenario
    modules = {type(s).__module__ for s in scenarios.registered()}  # the unlisted (watched) too
    assert modules == {f"scenarios.{p}" for p in SCENARIO_PACKAGES}, sorted(modules)
    loose = [p.name for p in (ROOT / "scenarios").glob("_*.py") if p.name != "__init__.py"]
    assert not loose, f"helper modules loose at the top of scenarios/: {loose}"
    for package in SCENARIO_PACKAGES:
        module = __import__(f"scenarios.{package}", fromlist=["_"])
        defined = [c for c in vars(module).values()
                   if isinstance(c, type) and issubclass(c, Scenario) and c.__module__ == module.__name__]
        assert len(defined) == 1, f"scenarios/{package}/__init__.py defines {len(defined)} scenarios"


# Within explorer/, each group imports only the groups listed for it (and the modules at the top):
# runs <- view <- exports <- cli, page. Nothing below imports what is above it.
EXPLORER_GROUPS = {"runs": set(), "view": {"runs"}, "exports": {"runs", "view"},
                   "cli": {"runs", "view", "exports"}, "page": {"runs", "view", "exports"}}


@pytest.mark.parametrize("group", sorted(EXPLORER_GROUPS))
def test_explorer_groups_import_one_way(group: str) -> None:
    allowed = EXPLORER_GROUPS[group] | {group}
    for path in sorted((ROOT / "explorer" / group).rglob("*.py")):
        groups = {name.split(".")[1] for name in imported_names(path)
                  if name.startswith("explorer.") and name.split(".")[1] in EXPLORER_GROUPS}
        assert groups <= allowed, f"{path.relative_to(ROOT)} imports explorer groups {sorted(groups - allowed)}"


def test_the_loop_is_the_floor_of_the_engines() -> None:
    """engines/loop/ (the loop, probes, records) imports no other engine group: every group builds on it."""
    for path in sorted((ROOT / "engines" / "loop").rglob("*.py")):
        other = {name for name in imported_names(path) if name.startswith("engines.")
                 and not name.startswith("engines.loop")}
        assert not other, f"{path.relative_to(ROOT)} imports {sorted(other)}"


# The entry points at the top of explorer/: the command line, the installed app's script, the Python API.
ENTRY_MODULES = ("__main__.py", "app.py", "api.py")
LAZY_WATCH = {"explorer.runs", "explorer.runs.watch"}  # explorer/__init__.py's `__getattr__`: `from explorer import watch`


def test_the_modules_at_the_top_of_explorer_import_no_group() -> None:
    """explorer/*.py (the version, plain text, the glossary's data, the server settings) sit under the groups,
    but for the entry points, which start the command line, the app and a run from Python, and the
    package's lazy `watch`."""
    for path in sorted((ROOT / "explorer").glob("*.py")):
        if path.name in ENTRY_MODULES:
            continue
        names = imported_names(path) - (LAZY_WATCH if path.name == "__init__.py" else set())
        groups = {name.split(".")[1] for name in names
                  if name.startswith("explorer.") and name.split(".")[1] in EXPLORER_GROUPS}
        assert not groups, f"{path.relative_to(ROOT)} imports explorer groups {sorted(groups)}"


def test_explorer_loads_no_torch_until_watch_is_asked_for() -> None:
    """`import explorer` (the page, the CLI) loads no torch; `from explorer import watch` does, and gets `watch`."""
    import subprocess
    import sys
    code = ("import sys, explorer; before = 'torch' in sys.modules; from explorer import watch; "
            "print(before, 'torch' in sys.modules, watch.__module__)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["False", "True", "explorer.runs.watch"], result.stdout + result.stderr[-2000:]


# explorer/runs/worker.py is the worker process's entry: it trains; explorer/runs/watch.py is `watch`, which a
# person's own training script imports (explorer's `__getattr__` loads it on first use, never the page)
WORKER_MODULES = ("__main__", "worker", "watch")
# explorer/exports/tools.py writes TensorBoard event files through torch's SummaryWriter, imported only by
# `tdx export --tensorboard` (the fresh-interpreter test below imports the module and finds no torch).
TORCH_WHEN_ASKED = ("tools",)


@pytest.mark.parametrize("path", [p for p in files("explorer") if p.stem not in WORKER_MODULES + TORCH_WHEN_ASKED]
                         + [ROOT / "app.py"], ids=lambda p: p.name)
def test_ui_modules_import_no_torch(path: Path) -> None:
    """explorer/ (but its worker) and app.py turn records into tables and charts; they hold no torch."""
    assert "torch" not in imported_modules(path), f"{path.relative_to(ROOT)} imports torch"


# explorer/runs/ray_worker.py runs inside Ray's processes (and the Ray driver's): it imports ray, an optional
# extra, and torch only inside its actors. The page never imports it (explorer/runs/ray_backend.py starts the driver).
RAY_MODULES = ("ray_worker",)
UI_MODULES = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                    for p in files("explorer") if p.stem not in WORKER_MODULES + RAY_MODULES)


def test_ui_modules_load_no_torch_in_a_fresh_interpreter() -> None:
    """The UI process draws controls and figures from every scenario without importing torch:
    scenario modules import their engines inside `phases`, when a run starts."""
    import subprocess
    import sys
    code = ("import sys; import app_modules; mods = " + repr(UI_MODULES) +
            "; [__import__(m) for m in mods]; import scenarios; scenarios.all_scenarios(); "
            "print('torch' in sys.modules, 'ray' in sys.modules)").replace("import app_modules; ", "")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    torch, ray = result.stdout.split()
    assert torch == "False", "importing the UI modules and the scenario registry loaded torch"
    assert ray == "False", "importing the UI modules loaded ray (only the Ray driver's process may)"


def test_importing_a_module_sets_no_thread_count() -> None:
    """No module sets torch's thread count at import: whoever trains does (engines.loop.runtime)."""
    offenders = [p.relative_to(ROOT) for p in files("engines") + files("scenarios") + files("explorer")
                 if "set_num_threads" in p.read_text() and p.name != "runtime.py"]
    assert not offenders, offenders


@pytest.mark.parametrize("path", files("engines") + files("scenarios") + files("explorer") + files("tests"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_files_stay_under_300_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= 300, f"{path.relative_to(ROOT)} has {lines} lines; split it (STYLE.md: ~300)"


TEMPLATE = "vanishing_gradients"  # the scenario a newcomer copies: glue over the engines
TEMPLATE_LINES = 180
# A scenario's whole folder is its honest cost (its module, figures, claims, launch helpers).
FOLDER_LINES = 950


def folder_lines(package: str) -> int:
    return sum(len(p.read_text().splitlines()) for p in (ROOT / "scenarios" / package).rglob("*.py"))


def test_the_template_scenario_is_glue() -> None:
    """The folder a newcomer copies is a Config, its arms, its claims and its figures: ≤ 180 lines in all."""
    lines = folder_lines(TEMPLATE)
    assert lines <= TEMPLATE_LINES, f"scenarios/{TEMPLATE}/ has {lines} lines"


@pytest.mark.parametrize("package", SCENARIO_PACKAGES)
def test_a_scenario_folder_stays_within_its_budget(package: str) -> None:
    """Past the budget a folder is doing an engine's job (STYLE.md): move the work into engines/."""
    lines = folder_lines(package)
    assert lines <= FOLDER_LINES, f"scenarios/{package}/ has {lines} lines (budget {FOLDER_LINES})"
