"""Finding and talking to the Docker engine: DOCKER_HOST, docker contexts, a cached client."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import SandboxError

DEFAULT_TIMEOUT = 60  # seconds for one API call; runs raise it above their own timeout


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


def connect(timeout: float = DEFAULT_TIMEOUT):
    """A docker-py client for the current endpoint. Raises SandboxError when no engine answers."""
    import docker

    try:
        base_url, tls = engine_endpoint()
        if base_url is None:
            return docker.from_env(timeout=int(timeout))
        return docker.DockerClient(base_url=base_url, tls=tls or False, timeout=int(timeout))
    except docker.errors.DockerException as exc:
        raise SandboxError(f"no Docker engine answers ({short(exc)}): start the Docker engine "
                           "(e.g. `sudo dockerd &` or `sudo systemctl start docker`) or set DOCKER_HOST") from None


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
