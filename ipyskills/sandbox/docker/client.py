"""Finding and talking to the Docker engine: DOCKER_HOST, docker contexts, a cached client."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ...errors import SandboxError

DEFAULT_TIMEOUT = 60  # seconds for one API call; runs raise it above their own timeout
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
        raise SandboxError(f"no Docker engine answers ({short(exc)}): start the Docker engine "
                           "(e.g. `sudo dockerd &` or `sudo systemctl start docker`) or set DOCKER_HOST") from None
    one_pool_per_socket(client)
    return client


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


def engine_errors() -> tuple:
    """What talking to an engine can raise: docker-py's own errors, requests' and socket errors."""
    import docker.errors
    import requests

    return (docker.errors.DockerException, requests.exceptions.RequestException, OSError)


def short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]
