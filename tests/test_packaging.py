"""Packaging: one version; pyproject's compatible ranges start at requirements.txt's lock, which is
complete and is what the suite runs against; a `tdx` command."""
import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from explorer import __version__

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# Imported directly but installed by another dependency (and locked through it).
THROUGH = {"starlette": "streamlit (its server since 1.5x)"}
# Imported when present, never required: the code runs the same without them.
OPTIONAL = {"tqdm": "explorer.run's progress bar"}
DISTRIBUTION = {"torch": "torch", "streamlit": "streamlit", "plotly": "plotly", "kaleido": "kaleido",
                "pandas": "pandas", "numpy": "numpy", "pydantic": "pydantic", "peft": "peft"}
# The CUDA build of torch's own runtime libraries: the CPU lock leaves them out (README, requirements.txt).
CUDA_RUNTIME = re.compile(r"nvidia-.*|triton|cuda-.*")


def requirement_lines(name: str) -> list[str]:
    lines = [line.strip() for line in (ROOT / name).read_text().splitlines()]
    return [line for line in lines if line and not line.startswith(("#", "-r"))]


def lock(name: str = "requirements.txt") -> dict[str, str]:
    pins = {}
    for line in requirement_lines(name):
        name, sep, version = line.partition("==")
        assert sep and re.fullmatch(r"[A-Za-z0-9._-]+", name) and version, f"not an exact pin: {line!r}"
        pins[canonicalize_name(name)] = version
    return pins


def test_pyproject_ranges_start_at_the_locked_versions() -> None:
    """Each dependency is a range (>= the locked version, < a next release), never `==`, and every one is locked."""
    pins = lock()
    for line in PYPROJECT["project"]["dependencies"]:
        requirement = Requirement(line)
        bounds = {spec.operator: spec.version for spec in requirement.specifier}
        assert set(bounds) == {">=", "<"}, f"{line}: a compatible range, >= and <"
        locked = pins.get(canonicalize_name(requirement.name))
        assert locked == bounds[">="], f"{line}: its lower end is the lock's {locked}, which the suite runs against"
        assert Version(locked) in requirement.specifier, line
    assert PYPROJECT["project"]["optional-dependencies"]["dev"] == requirement_lines("requirements-dev.txt")


def test_requirements_is_a_complete_lock_and_is_what_is_installed() -> None:
    """Every package the locked ones require (their markers read for this machine) is locked too, and the
    installed version of each is the locked one (torch's local build label aside: 2.13.0+cpu)."""
    pins, missing, differs = lock(), {}, {}
    for name, version in pins.items():
        installed = metadata.version(name)
        if Version(installed).public != Version(version).public:
            differs[name] = (version, installed)
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
                continue
            needed = canonicalize_name(requirement.name)
            if needed not in pins and not CUDA_RUNTIME.fullmatch(needed):
                missing[needed] = name
    assert not missing, f"required but not locked (package: by whom): {missing}"
    assert not differs, f"locked vs installed: {differs}"


def test_the_cluster_extra_is_a_range_from_its_lock_which_completes_the_main_lock() -> None:
    """`[cluster]` (ray) is a compatible range from requirements-cluster.txt's pin; that file locks ray and what it
    pulls in beyond requirements.txt, each as installed; requirements-dev.txt includes it (so CI runs the Ray tests)."""
    pins, cluster = lock(), lock("requirements-cluster.txt")
    for line in PYPROJECT["project"]["optional-dependencies"]["cluster"]:
        requirement = Requirement(line)
        bounds = {spec.operator: spec.version for spec in requirement.specifier}
        assert set(bounds) == {">=", "<"} and cluster.get(canonicalize_name(requirement.name)) == bounds[">="], line
    assert "-r requirements-cluster.txt" in (ROOT / "requirements-dev.txt").read_text()
    assert not set(cluster) & set(pins), f"locked twice: {sorted(set(cluster) & set(pins))}"
    missing, differs = {}, {}
    for name, version in cluster.items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            differs[name] = (version, "not installed")
            continue
        if installed != version:
            differs[name] = (version, installed)
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            needed = canonicalize_name(requirement.name)
            if (not requirement.marker or requirement.marker.evaluate({"extra": ""})) and needed not in pins | cluster:
                missing[needed] = name
    assert not missing, f"required but not locked (package: by whom): {missing}"
    assert not differs, f"locked vs installed (pip install -r requirements-cluster.txt): {differs}"


def test_the_version_is_written_once() -> None:
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "explorer.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    assert "__version__" in (ROOT / "explorer" / "page" / "main.py").read_text(), "the footer shows it"


def test_tdx_is_the_cli_and_the_license_is_mit() -> None:
    assert PYPROJECT["project"]["scripts"] == {"tdx": "explorer.cli.main:main"}
    from explorer.cli.main import main
    assert callable(main)
    assert (ROOT / "LICENSE").read_text().startswith("MIT License") and PYPROJECT["project"]["license"] == "MIT"


def test_every_third_party_import_is_declared() -> None:
    """numpy is imported by scenarios: it must be a dependency of its own, not one by accident."""
    local = {"explorer", "scenarios", "engines", "app", "bench", "tests"}
    extras = PYPROJECT["project"]["optional-dependencies"]["cluster"]  # ray: imported only by the Ray backend's processes
    declared = {canonicalize_name(Requirement(line).name) for line in PYPROJECT["project"]["dependencies"] + extras}
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
               if top not in THROUGH and top not in OPTIONAL and canonicalize_name(DISTRIBUTION.get(top, top)) not in declared}
    assert not missing, f"imported but not a dependency in pyproject.toml: {missing}"
