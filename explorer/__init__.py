"""Everything a person touches: pages, controls, the live view, the run manager, the run
store, exports and the command line (`python -m explorer`)."""

__version__ = "0.1.0"  # the one place the version is written: pyproject.toml, --version and the footer read it
