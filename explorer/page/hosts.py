"""The server answers local names only, and no other site may frame its pages.

The server binds to localhost, but a page on another site can still reach it through DNS
rebinding: its name is made to resolve to 127.0.0.1, and the browser then sends that page's
requests — the websocket that drives a session included — with `Host: evil.example`.
Streamlit's own `server.allowedHosts` (explorer/server.py, .streamlit/config.toml) checks the
websocket only; Starlette's `TrustedHostMiddleware`, handed to Streamlit's `st.App` in app.py,
applies the same list to every request: HTTP gets 400, a websocket upgrade is refused before it
opens.

The list is Streamlit's option, so one setting covers both checks: serving on a LAN name is
`tdx app --address 0.0.0.0 --allowed-host my-host`. An empty list means the local names below;
`*` accepts any Host; a pattern `*.name` accepts subnames.

Framing: another site could show the app in a hidden frame and have a visitor click Run, Stop
or Delete through it (clickjacking). Every response says that only the app's own origin may
frame it, in both the modern header (CSP `frame-ancestors`) and the older one browsers still read.
"""
import ipaddress
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware

LOCAL_HOSTS = ("localhost", "*.localhost", "127.0.0.1", "::1")  # names a browser never rebinds
FRAME_HEADERS = ((b"content-security-policy", b"frame-ancestors 'self'"), (b"x-frame-options", b"SAMEORIGIN"))
Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable, Callable], Awaitable[None]]


def trusted_patterns(allowed: Sequence[str]) -> list[str]:
    """Streamlit's host list as Starlette matches a Host header: an IPv6 literal in the brackets a
    Host header writes it in (`[::1]`), and each name also with a fully qualified name's final dot."""
    patterns: list[str] = []
    for pattern in (p.strip().lower() for p in allowed):
        try:
            if isinstance(ipaddress.ip_address(pattern), ipaddress.IPv6Address):
                pattern = f"[{pattern}]"
        except ValueError:
            pass
        patterns.append(pattern)
        if pattern != "*" and not pattern.endswith((".", "]")):
            patterns.append(pattern + ".")
    return patterns


def allowed_hosts() -> tuple[str, ...]:
    """Streamlit's `server.allowedHosts`, or the local names when it is empty."""
    import streamlit as st
    return tuple(st.get_option("server.allowedHosts") or LOCAL_HOSTS)


class LocalHostsOnly(TrustedHostMiddleware):
    """Starlette's Host check over Streamlit's list (read when the server builds its middleware,
    once the options are loaded); a refused name is never redirected."""

    def __init__(self, app: ASGIApp, allowed: Sequence[str] | None = None) -> None:
        super().__init__(app, trusted_patterns(allowed or allowed_hosts()), www_redirect=False)


class SameOriginFrames:
    """ASGI middleware: every HTTP response may be framed by the app's own origin only."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def framed(message: dict) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in dict(FRAME_HEADERS)]
                message = {**message, "headers": [*kept, *FRAME_HEADERS]}
            await send(message)

        await self.app(scope, receive, framed)


def server_middleware() -> list[Middleware]:
    """The middleware list for `st.App(..., middleware=...)`: framing headers on every answer,
    refusals included, then the Host check."""
    return [Middleware(SameOriginFrames), Middleware(LocalHostsOnly)]
