"""Finding and talking to the Docker engine: DOCKER_HOST, docker contexts, a cached client, engine calls
bounded by the calling run's deadline."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path

from ...errors import SandboxError

DEFAULT_TIMEOUT = 60  # seconds for one API call (within a run: also no later than the run's deadline)
MIN_CALL_TIMEOUT = 1.0  # seconds a call gets even when its deadline has passed (a removal must be tried)
DEFAULT_SOCKET = "unix:///var/run/docker.sock"  # docker-py's default endpoint, as DOCKER_HOST spells it
# Connections kept open to the engine per client: the largest warm pool (8) filling in parallel, plus the
# background remover, plus parallel runs (each holds one attach socket and makes a few calls).
MAX_CONNECTIONS = 32


def engine_endpoint(environ=None) -> tuple[str | None, object]:
    """(base_url, tls) the docker CLI would use: DOCKER_HOST, else DOCKER_CONTEXT or the config's
    currentContext. (None, None) means docker-py's own default (the local socket)."""
    env = os.environ if environ is None else environ
    if env.get("DOCKER_HOST"):
        return env["DOCKER_HOST"], None
    name = env.get("DOCKER_CONTEXT") or _config_context(env)
    if not name or name == "default":
        return None, None
    from docker.context import ContextAPI

    try:
        context = ContextAPI.get_context(name)
    except (*engine_errors(), KeyError, ValueError) as exc:  # a broken context store
        raise SandboxError(f"docker context {name!r} cannot be read ({exc}); run `docker context use default` "
                           "or fix the context") from None
    if context is None:
        raise SandboxError(f"docker context {name!r} does not exist; run `docker context ls` and "
                           "`docker context use <name>`")
    return context.Host, context.TLSConfig


def _config_context(env) -> str | None:
    config_dir = Path(env.get("DOCKER_CONFIG") or Path.home() / ".docker")
    try:
        return json.loads((config_dir / "config.json").read_text()).get("currentContext")
    except (OSError, ValueError, AttributeError):
        return None


def connect(timeout: float = DEFAULT_TIMEOUT, max_connections: int = MAX_CONNECTIONS):
    """A docker-py client for the current endpoint, safe to share between threads (see
    `one_pool_per_socket`). Raises SandboxError when no engine answers."""
    import docker

    try:
        base_url, tls = engine_endpoint()
        if base_url is None:
            client = docker.from_env(timeout=int(timeout), max_pool_size=max_connections)
        else:
            client = docker.DockerClient(base_url=base_url, tls=tls or False, timeout=int(timeout),
                                         max_pool_size=max_connections)
    except docker.errors.DockerException as exc:
        raise unreachable(base_url or DEFAULT_SOCKET, exc) from None
    client.ipyskills_endpoint = base_url or DEFAULT_SOCKET
    one_pool_per_socket(client)
    bounded_calls(client)
    return client


def engine_name(client) -> str:
    """The engine as the user named it (DOCKER_HOST, a context's host, the default socket), for messages."""
    return getattr(client, "ipyskills_endpoint", None) or str(getattr(client.api, "base_url", "the Docker engine"))


_limit = threading.local()  # .deadline: time.monotonic() by which this thread's engine calls must end


@contextlib.contextmanager
def calls_end_by(deadline: float):
    """Engine calls this thread makes inside the block time out no later than `deadline` (a
    time.monotonic() value; each call still gets MIN_CALL_TIMEOUT). A stuck engine (a hung runc, a wedged
    daemon) then ends a run with a SandboxError instead of holding it, or the process's exit, forever."""
    outer = getattr(_limit, "deadline", None)
    _limit.deadline = deadline if outer is None else min(outer, deadline)
    try:
        yield
    finally:
        _limit.deadline = outer


def out_of_time() -> bool:
    """True when this thread is inside `calls_end_by` and its deadline has passed."""
    deadline = getattr(_limit, "deadline", None)
    return deadline is not None and time.monotonic() >= deadline


def bounded_calls(client) -> None:
    """Make every API call of `client` honour the calling thread's `calls_end_by` deadline. docker-py has
    one timeout per client, and some calls pass none at all (attach: a stuck engine holds it forever);
    every request goes through the session's `request`, so the bound goes there (a per-thread value: the
    client is shared by all threads). Outside `calls_end_by` nothing changes (an image build may rightly
    stream for longer than any fixed timeout)."""
    api = client.api
    if getattr(api, "_ipyskills_bounded", False):
        return
    request = api.request

    def bounded_request(method, url, *args, **kwargs):
        deadline = getattr(_limit, "deadline", None)
        if deadline is not None:
            left = max(MIN_CALL_TIMEOUT, deadline - time.monotonic())
            asked = kwargs.get("timeout")  # None means no timeout at all
            kwargs["timeout"] = left if asked is None else min(asked, left)
        return request(method, url, *args, **kwargs)

    api.request = bounded_request
    api._ipyskills_bounded = True


def one_pool_per_socket(client) -> None:
    """Make a unix-socket client keep one connection pool for the socket instead of one per URL.

    docker-py's UnixHTTPAdapter keys its urllib3 pools by the full request URL, and every container has
    its own URLs (/containers/<id>/start, ...). It keeps the 10 most recent pools and closes the one it
    evicts, even while another thread is using it: that thread then fails inside urllib3
    (`AttributeError: 'NoneType' object has no attribute 'qsize'`), and a connection is opened per
    container. With one pool per socket nothing is ever evicted, connections are reused across
    containers, and urllib3's pool (thread-safe, `max_pool_size` connections) is shared by all threads."""
    try:
        from docker.transport.unixconn import UnixHTTPAdapter
    except ImportError:  # pragma: no cover - docker-py always has it
        return
    adapter = getattr(client.api, "_custom_adapter", None)
    if not isinstance(adapter, UnixHTTPAdapter) or getattr(adapter, "_ipyskills_one_pool", False):
        return
    per_url = adapter.get_connection

    def get_connection(url, proxies=None):
        return per_url("http+docker://localhost", proxies)  # the socket is the only thing that matters

    adapter.get_connection = get_connection
    adapter._ipyskills_one_pool = True


def is_local(client) -> bool:
    """True when the engine shares this machine's filesystem (a unix socket), so bind mounts work."""
    base = str(getattr(client.api, "base_url", ""))
    return base.startswith(("http+docker://localhost", "http+unix://"))


def is_timeout(exc: BaseException) -> bool:
    """The engine took longer than the call's timeout (requests' or the socket's)."""
    import requests

    return isinstance(exc, (requests.exceptions.Timeout, TimeoutError)) or "timed out" in str(exc).lower()


def engine_errors() -> tuple:
    """What talking to an engine can raise: docker-py's own errors, requests' and socket errors."""
    import docker.errors
    import requests

    return (docker.errors.DockerException, requests.exceptions.RequestException, OSError)


def unreachable(endpoint: str, exc: Exception, doing: str = "") -> SandboxError:
    """The one wording for "no engine there", with the reason in plain words rather than the nested
    exception text of requests/urllib3."""
    to = f" to {doing}" if doing else ""
    return SandboxError(f"no Docker engine answers at {endpoint} ({plain_reason(exc)}){to}: start the Docker "
                        "engine (e.g. `sudo dockerd &` or `sudo systemctl start docker`) or set DOCKER_HOST")


def plain_reason(exc: Exception) -> str:
    text = str(exc)
    for needle, reason in (("FileNotFoundError", "no socket at that path"),
                           ("No such file or directory", "no socket at that path"),
                           ("Connection refused", "connection refused"),
                           ("PermissionError", "permission denied: add your user to the docker group"),
                           ("Permission denied", "permission denied: add your user to the docker group"),
                           ("timed out", "timed out")):
        if needle in text:
            return reason
    return short(exc)


def short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]
