"""Streamable HTTP on 127.0.0.1, behind a bearer token.

The SDK's Streamable HTTP app (`Server.streamable_http_app`, with its DNS-rebinding protection for
localhost) is wrapped by `BearerGuard`: every HTTP request must carry `Authorization: Bearer <token>`,
compared in constant time; anything else gets 401 before the SDK sees it. The address is always the
loopback one: a client that cannot spawn a process reaches the server on this machine only.

`HTTPServer` runs uvicorn in a background thread (the notebook's `%skills mcp start`); `serve_http` runs
it in the foreground (`ipyskills mcp --http`).
"""

from __future__ import annotations

import hmac
import json
import secrets
import socket
import threading

from ...errors import SkillError

HOST = "127.0.0.1"
PATH = "/mcp"


def new_token() -> str:
    return secrets.token_urlsafe(32)


class BearerGuard:
    """ASGI middleware: HTTP requests without the right bearer token get 401."""

    def __init__(self, app, token: str):
        if not token or len(token) < 16:
            raise SkillError("the MCP bearer token must be at least 16 characters; leave it out to have one "
                             "generated")
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                body = json.dumps({"error": "unauthorized", "error_description":
                                   "this ipyskills MCP server needs 'Authorization: Bearer <token>'"}).encode()
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="ipyskills"'),
                    (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(server, token: str):
    """The ASGI app: the SDK's Streamable HTTP endpoint at /mcp, behind the token."""
    return BearerGuard(server.streamable_http_app(streamable_http_path=PATH, host=HOST), token)


def _bind(port: int) -> socket.socket:
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise SkillError(f"port must be a number from 0 to 65535 (0: any free port), got {port!r}")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise SkillError(f"cannot listen on {HOST}:{port}: {exc.strerror or exc}; pick another port "
                         "(or 0 for any free one)") from None
    sock.listen(64)
    return sock


def _uvicorn(app):
    import uvicorn

    # A stop does not wait for streams a client keeps open (a run still ends at its own deadline).
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False, timeout_graceful_shutdown=3)
    return uvicorn.Server(config)


class HTTPServer:
    """A server running in a background thread until `stop()`."""

    def __init__(self, server, *, port: int = 0, token: str | None = None):
        self.token = token or new_token()
        self.mcp_server = server
        self._sock = _bind(port)
        self.port = self._sock.getsockname()[1]
        self._uvicorn = _uvicorn(http_app(server, self.token))
        self._thread = threading.Thread(target=self._run, name="ipyskills-mcp-http", daemon=True)
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}{PATH}"

    def _run(self):
        try:
            self._uvicorn.run(sockets=[self._sock])
        except BaseException as exc:  # reported by start()
            self._error = exc

    def start(self, timeout: float = 15.0) -> HTTPServer:
        import time

        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._uvicorn.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not self._uvicorn.started:
            self.stop()
            raise SkillError(f"the MCP HTTP server did not start: {self._error or 'timed out'}")
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._uvicorn.should_exit

    def stop(self, timeout: float = 10.0) -> None:
        self._uvicorn.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        try:
            self._sock.close()
        except OSError:
            pass


def serve_http(server, *, port: int, token: str, announce=None) -> None:
    """Serve in the foreground until interrupted; `announce(url)` is called once listening."""
    from .stdio import install_cleanup_on_signals

    install_cleanup_on_signals()
    sock = _bind(port)
    if announce is not None:
        announce(f"http://{HOST}:{sock.getsockname()[1]}{PATH}")
    _uvicorn(http_app(server, token)).run(sockets=[sock])
