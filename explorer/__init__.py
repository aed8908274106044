"""Everything a person touches: pages, controls, the live view, the run manager, the run
store, exports, the command line (`python -m explorer`, `tdx`) and the Python API:

    import explorer
    result = explorer.run("vanishing-gradients", depth=12)   # .frame, .figures, .explanation
    explorer.scenarios()                                       # id -> question

Importing the package is cheap: `run` loads the scenarios (and torch, when it trains) when called.
"""
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"  # the one place the version is written: pyproject.toml, --version and the footer read it
__all__ = ["__version__", "run", "scenarios"]

if TYPE_CHECKING:
    from explorer.api import run, scenarios


def __getattr__(name: str) -> Any:
    """`explorer.run` and `explorer.scenarios`, imported on first use (the CLI's `--version` imports nothing)."""
    if name in ("run", "scenarios", "Result"):
        from explorer import api
        return getattr(api, name)
    raise AttributeError(f"module 'explorer' has no attribute {name!r}")
