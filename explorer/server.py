"""How the web app is served: the server settings and the command `tdx app` runs.

`streamlit run app.py` in a checkout reads .streamlit/config.toml; an installed package has no
checkout, so `tdx app` passes the same settings (`SETTINGS`, kept equal to the file by a test) as
Streamlit's command-line flags, which outrank every config file, and runs the app script that
ships inside the package (explorer/app.py). What the settings hold: the server listens on
localhost only, answers local Host names only (Streamlit checks its websocket against
`server.allowedHosts`, explorer/page/hosts.py every request), and keeps Streamlit's XSRF check.
"""
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

APP_SCRIPT = Path(__file__).resolve().with_name("app.py")

SETTINGS: dict[str, dict[str, Any]] = {
    "global": {"disableWidgetStateDuplicationWarning": True},
    "server": {
        "address": "localhost",
        "allowedHosts": ["localhost", "*.localhost", "127.0.0.1", "::1"],
        "enableXsrfProtection": True,
        "headless": True,
        "runOnSave": False,
        "fileWatcherType": "none",
    },
    "runner": {"postScriptGC": False},
    "browser": {"gatherUsageStats": False},
    "client": {"toolbarMode": "viewer"},
}


def flags(settings: dict[str, dict[str, Any]]) -> list[str]:
    """Settings as `streamlit run` flags: `--server.address=localhost`; a list repeats its flag."""
    out: list[str] = []
    for section, options in settings.items():
        for name, value in options.items():
            for item in value if isinstance(value, list) else [value]:
                text = str(item).lower() if isinstance(item, bool) else str(item)
                out.append(f"--{section}.{name}={text}")
    return out


def streamlit_command(port: int | None = None, address: str | None = None,
                      allowed_hosts: Sequence[str] = ()) -> list[str]:
    """The command that serves the app: `python -m streamlit run <explorer/app.py>` with `SETTINGS`,
    the port and address given, and any Host names to accept besides the local ones."""
    server = {**SETTINGS["server"], "allowedHosts": [*SETTINGS["server"]["allowedHosts"], *allowed_hosts]}
    if address:
        server["address"] = address
    if port:
        server["port"] = port
    return [sys.executable, "-m", "streamlit", "run", str(APP_SCRIPT), *flags({**SETTINGS, "server": server})]
