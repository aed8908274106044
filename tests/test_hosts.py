"""DNS rebinding: the server answers local names only, on HTTP and on the websocket upgrade; no other
site may frame it."""
import asyncio
import concurrent.futures
import os
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from explorer.page.hosts import FRAME_HEADERS, LOCAL_HOSTS, LocalHostsOnly, SameOriginFrames
from explorer.server import SETTINGS

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("host, allowed", [
    ("localhost", True), ("localhost:8501", True), ("LOCALHOST.:8501", True), ("127.0.0.1:8501", True),
    ("[::1]:8501", True), ("app.localhost:8501", True),
    ("evil.example", False), ("evil.example:8501", False), ("localhost.evil.example", False),
    ("127.0.0.2", False), ("192.0.2.2:8501", False), ("", False), (None, False), ("[::2]:8501", False),
    ("localhost:abc", False), ("user@localhost", False), ("localhost/path", False), ("evillocalhost", False),
])
def test_only_local_names_are_allowed(host, allowed) -> None:
    """Starlette's TrustedHostMiddleware over Streamlit's list: the same names pass as before the swap."""
    reached = asgi_call("http", None if host is None else host.encode()) == [{"type": "reached"}]
    assert reached is allowed, host


def test_the_config_lists_the_local_names() -> None:
    """One list: Streamlit checks its websocket against it, explorer/page/hosts.py every request;
    `tdx app` passes the checkout's settings (explorer/server.py) as they are in the file."""
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert tuple(config["server"]["allowedHosts"]) == LOCAL_HOSTS
    assert config["server"]["address"] == "localhost" and config["server"]["enableXsrfProtection"] is True
    assert config == SETTINGS, f"config.toml {config} != explorer/server.py SETTINGS {SETTINGS}"


def test_tdx_app_runs_the_packaged_script_with_the_settings_and_the_port(monkeypatch) -> None:
    """`tdx app --port --address --allowed-host` becomes `streamlit run <explorer/app.py>` with every setting
    as a flag (a list repeats its flag), the port and address passed on, and the extra Host name added."""
    import os

    from explorer.cli.main import main
    ran: list[list[str]] = []
    monkeypatch.setattr(os, "execv", lambda path, argv: ran.append(argv))
    monkeypatch.setattr(os, "name", "posix")
    main(["app", "--port", "8600", "--address", "0.0.0.0", "--allowed-host", "box.lan"])
    argv, = ran
    assert argv[1:4] == ["-m", "streamlit", "run"] and argv[4] == str(ROOT / "explorer" / "app.py"), argv
    flags = argv[5:]
    assert {"--server.port=8600", "--server.address=0.0.0.0", "--server.enableXsrfProtection=true",
            "--server.fileWatcherType=none", "--client.toolbarMode=viewer"} <= set(flags), flags
    assert [f for f in flags if f.startswith("--server.allowedHosts=")] == \
        [f"--server.allowedHosts={h}" for h in (*LOCAL_HOSTS, "box.lan")], flags
    assert main(["app", "--port", "99999"]) == 2, "a port out of range is refused"


@pytest.mark.parametrize("script", ["app.py", "explorer/app.py"])
def test_app_py_is_the_server_with_the_host_check(script: str) -> None:
    """`streamlit run` finds `app` (st.App) in the checkout's app.py and in the package's, built with
    the middleware (which covers every route, the live feed's too)."""
    from streamlit.web.server.app_discovery import discover_asgi_app
    found = discover_asgi_app(ROOT / script)
    assert found.is_asgi_app and found.app_name == "app", found
    assert "st.App(__file__, routes=server_routes(), middleware=server_middleware())" in (ROOT / script).read_text()


def asgi_call(scope_type: str, host: bytes | None) -> list[dict]:
    sent: list[dict] = []
    reached: list[str] = []

    async def inner(scope, receive, send):
        reached.append(scope["type"])

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "websocket.connect"}

    scope = {"type": scope_type, "path": "/", "headers": [] if host is None else [(b"host", host)]}
    call = SameOriginFrames(LocalHostsOnly(inner, LOCAL_HOSTS))(scope, receive, send)
    # A thread of its own: a browser test before this one may leave an event loop running in this one.
    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, call).result()
    return sent if not reached else [{"type": "reached"}]


def test_the_middleware_refuses_http_and_websockets_for_other_hosts() -> None:
    assert asgi_call("http", b"localhost:8501") == [{"type": "reached"}]
    assert asgi_call("websocket", b"127.0.0.1:8501") == [{"type": "reached"}]
    refused = asgi_call("http", b"evil.example:8501")
    assert refused[0]["type"] == "http.response.start" and refused[0]["status"] == 400, refused
    assert set(FRAME_HEADERS) <= set(refused[0]["headers"]), "a refusal may not be framed either"
    refused = asgi_call("websocket", b"evil.example")
    assert refused[0]["type"] == "websocket.http.response.start" and refused[0]["status"] == 400, refused


def status_line(port: int, host: str, path: str = "/", upgrade: bool = False) -> str:
    """The first line of the server's answer to a request with this Host header."""
    headers = [f"GET {path} HTTP/1.1", f"Host: {host}", "Connection: close"]
    if upgrade:
        headers[2:] = ["Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13",
                       "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="]
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(("\r\n".join(headers) + "\r\n\r\n").encode())
        return sock.makefile("rb").readline().decode().strip()


@pytest.fixture
def server(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "EXPLORER_STORE": str(tmp_path / "runs.sqlite3")}
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if status_line(port, f"localhost:{port}", "/_stcore/health").endswith("200 OK"):
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.3)
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)


@pytest.mark.slow
def test_a_started_server_refuses_other_hosts_on_http_and_the_websocket(server) -> None:
    port = server
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
        assert status_line(port, host).endswith("200 OK"), host
        assert " 101 " in status_line(port, host, "/_stcore/stream", upgrade=True), host
    for host in (f"evil.example:{port}", "evil.example", f"localhost.evil.example:{port}"):
        assert " 400 " in status_line(port, host), host
        assert " 400 " in status_line(port, host, "/_stcore/health"), host
        answer = status_line(port, host, "/_stcore/stream", upgrade=True)
        assert " 101 " not in answer and " 400 " in answer, (host, answer)
