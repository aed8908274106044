"""Everything a person touches: pages, controls, the live view, the run manager, the run
store, exports, the command line (`python -m explorer`, `tdx`) and the Python API:

    import explorer
    result = explorer.run("vanishing-gradients", depth=12)   # .frame, .figures, .explanation
    explorer.scenarios()                                       # id -> question

    from explorer import watch                                 # a person's own training loop
    run = watch(model, optimizer, name="my-run")              # run.log(loss=loss) per step, run.finish()

Importing the package is cheap and loads no torch (the page's process never does): `run` loads the
scenarios (and torch, when it trains) when called; `watch` lives in explorer/runs/watch.py, which
imports torch, and is loaded on first use, here.
"""
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"  # the one place the version is written: pyproject.toml, --version and the footer read it
__all__ = ["__version__", "run", "scenarios", "watch", "WatchError"]

if TYPE_CHECKING:
    from explorer.api import run, scenarios


def __getattr__(name: str) -> Any:
    """`explorer.run`, `explorer.scenarios` and `explorer.watch`, imported on first use (the CLI's `--version`
    imports nothing)."""
    if name in ("run", "scenarios", "Result"):
        from explorer import api
        return getattr(api, name)
    if name in ("watch", "WatchError"):
        from explorer.runs import watch as module
        return getattr(module, name)
    raise AttributeError(f"module 'explorer' has no attribute {name!r}")
