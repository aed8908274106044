"""The command line, `python -m explorer` or `tdx`: the commands (`main`), `run` (`run`) and what
they print (`output`)."""
