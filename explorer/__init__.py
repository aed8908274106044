"""Everything a person touches: pages, controls, the live view, the run manager, the run
store, exports and the command line (`python -m explorer`), and `watch`, which attaches the
explorer to a person's own training loop (`from explorer import watch`).

Importing `explorer` loads no torch (the page's process never does): `watch` lives in
explorer/runs/watch.py, which imports torch, and is loaded on first use, here."""

__version__ = "0.1.0"  # the one place the version is written: pyproject.toml, --version and the footer read it


def __getattr__(name: str):
    if name in ("watch", "WatchError"):
        from explorer.runs import watch as module
        return getattr(module, name)
    raise AttributeError(f"module 'explorer' has no attribute {name!r}")
