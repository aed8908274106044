"""The server answers local names only: a request whose Host is not one is refused.

The server binds to localhost, but a page on another site can still reach it through DNS
rebinding: its name is made to resolve to 127.0.0.1, and the browser then sends that page's
requests — the websocket that drives a session included — with `Host: evil.example`.
Streamlit's own `server.allowedHosts` (set in .streamlit/config.toml) checks the websocket
only; this ASGI middleware, handed to Streamlit's `st.App` in app.py, applies the same list
to every request: HTTP gets 400, a websocket upgrade is closed (HTTP 403) before it opens.

The list is Streamlit's option, so one setting covers both checks: serving on a LAN name is
`streamlit run app.py --server.address 0.0.0.0 --server.allowedHosts my-host`. An empty
list means the local names below; `*` accepts any Host. A pattern `*.name` accepts subnames.
"""
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

LOCAL_HOSTS = ("localhost", "*.localhost", "127.0.0.1", "::1")  # names a browser never rebinds
Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable, Callable], Awaitable[None]]


def host_allowed(host: str | None, allowed: Sequence[str]) -> bool:
    """Whether a Host header (`name`, `name:port`, `[::1]:port`) names one of `allowed`."""
    if not host:
        return False
    try:
        parts = urlsplit(f"//{host}")
        parts.port  # noqa: B018 -- raises ValueError for a port that is not a number in range
    except ValueError:
        return False
    name = (parts.hostname or "").rstrip(".")
    if not name or parts.username is not None or parts.password is not None or parts.path or parts.query:
        return False
    for pattern in (p.strip().lower().rstrip(".") for p in allowed):
        if pattern == "*" or name == pattern or (pattern.startswith("*.") and name.endswith(pattern[1:])):
            return True
    return False


def allowed_hosts() -> tuple[str, ...]:
    """Streamlit's `server.allowedHosts`, or the local names when it is empty."""
    import streamlit as st
    return tuple(st.get_option("server.allowedHosts") or LOCAL_HOSTS)


class LocalHostsOnly:
    """ASGI middleware: refuse HTTP and websocket requests whose Host is not allowed."""

    def __init__(self, app: ASGIApp, allowed: Sequence[str] | None = None) -> None:
        self.app, self.allowed = app, allowed

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] in ("http", "websocket"):
            host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            if not host_allowed(host, self.allowed or allowed_hosts()):
                await _refuse(scope, send)
                return
        await self.app(scope, receive, send)


async def _refuse(scope: Scope, send: Callable) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})  # before accept: the server answers 403
        return
    body = b"This server answers local names only (Host not allowed).\n"
    await send({"type": "http.response.start", "status": 400,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def local_hosts_only() -> list:
    """The middleware list for `st.App(..., middleware=...)`."""
    from starlette.middleware import Middleware
    return [Middleware(LocalHostsOnly)]
