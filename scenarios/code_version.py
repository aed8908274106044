"""A scenario's code version: the hash of the code its results depend on.

A stored run is served again only while its code version is current, so the hash must cover
everything that can change a record: the scenario's whole folder, the shared contract at the top
of `scenarios/`, and every engine module the scenario reaches. Engines are found from the source,
transitively: the modules named by `import` and `from … import` statements, and the module names
written as strings (a rank process is started as `python -m engines.distributed.worker`, which no
import statement names). An engine the scenario never reaches is left out, so editing it keeps
the scenario's stored runs current.

The versions of the libraries that compute the records (torch, peft) are hashed too: after an
upgrade, a run trained under the old torch is never served as current. They are read from the
installed packages' metadata, so the UI process imports neither.
"""
import ast
import functools
import hashlib
import re
import sys
from importlib import metadata
from pathlib import Path

SCENARIOS = Path(__file__).resolve().parent
ROOT = SCENARIOS.parent
_MODULE_NAME = re.compile(r"engines(\.\w+)+")
LIBRARIES = ("torch", "peft")


def module_file(name: str) -> Path | None:
    """The file of a dotted module under the repository (a package's `__init__.py`), if it exists."""
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _named_modules(path: Path) -> set[str]:
    """Every `engines…` module a file names: imported, imported from, or written as a string."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)  # `from pkg import module`
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_NAME.fullmatch(node.value):
            names.add(node.value)
    return {name for name in names if name == "engines" or name.startswith("engines.")}


def engine_files(sources: list[Path]) -> list[Path]:
    """The engine modules `sources` reach, transitively, with the package `__init__`s on their way."""
    found: set[Path] = set()
    todo = list(sources)
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _named_modules(path):
            parts = name.split(".")
            for depth in range(1, len(parts) + 1):  # engines, engines.loop, engines.loop.training
                file = module_file(".".join(parts[:depth]))
                if file is not None and file not in found:
                    found.add(file)
                    todo.append(file)
    return sorted(found)


def code_files(package: str) -> list[Path]:
    """The files a scenario package's results depend on: the shared contract, its folder, its engines."""
    folder = Path(sys.modules[package].__file__).resolve().parent
    own = sorted(folder.rglob("*.py"))
    shared = sorted(SCENARIOS.glob("*.py"))
    return shared + own + engine_files(shared + own)


@functools.cache
def library_versions() -> str:
    """`torch==2.13.0+cpu peft==0.21.2`: the installed versions of the libraries records depend on."""
    versions = []
    for name in LIBRARIES:
        try:
            versions.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} absent")
    return " ".join(versions)


@functools.cache
def code_version(package: str) -> str:
    """Hashed once per process: it describes the code this process imported, and its libraries."""
    digest = hashlib.sha256(library_versions().encode())
    for path in code_files(package):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]
