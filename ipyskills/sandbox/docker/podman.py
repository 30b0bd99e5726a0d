"""Podman as the engine behind the Docker API (`podman system service`, found through DOCKER_HOST): what
it is told differently, and what it cannot enforce.

Measured with rootless Podman 4.3.1 (Debian 12) through docker-py, as uid 1000 on a cgroup v1 host:
- the compat API reads `seccomp=` as a file path ("opening seccomp profile failed: open {...}: file name
  too long"), so the profile goes to the engine as a file on this machine (a local socket only);
- tmpfs options take no uid=/gid= ("unknown mount option uid=1000"); `U` chowns the tmpfs to the
  container's user instead;
- a read-only root gets writable tmpfs on /run, /tmp and /var/tmp (Podman's --read-only-tmpfs, which the
  Docker API cannot turn off); /var/tmp was writable and exec from inside, so /run and /var/tmp get
  read-only empty tmpfs of our own, and /tmp is ours already (noexec, sized);
- memory, pids and CPU limits are accepted and silently not applied ("Resource limits are not supported
  and ignored on cgroups V1 rootless systems"; the script saw memory.limit_in_bytes unlimited and no pids
  cgroup). Podman reports that as an empty `cgroupControllers` list in its own /libpod/info, so a rootless
  engine without memory, pids and cpu delegated is refused, unless IPYSKILLS_PODMAN_NO_LIMITS=1 says to
  run anyway, and then the run's isolation line says those limits are not enforced.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ...errors import SandboxError
from . import client as docker_client

NEEDED_CONTROLLERS = ("memory", "pids", "cpu")  # what Limits' memory, pids and cpus need from the cgroup
NO_LIMITS_ENV = "IPYSKILLS_PODMAN_NO_LIMITS"  # "1": run where Podman cannot enforce them, saying so
INFO_TTL = 300.0  # seconds what an endpoint is (Docker, or Podman and its controllers) is trusted
# Empty read-only tmpfs over the paths Podman's read-only root makes writable (tmpfs size is a ceiling).
SECCOMP_PROFILE = Path(__file__).parent / "seccomp.json"
READ_ONLY_TMPFS = {"/run": "ro,noexec,nosuid,nodev,size=64k", "/var/tmp": "ro,noexec,nosuid,nodev,size=64k"}


@dataclass(frozen=True)
class Engine:
    podman: bool = False
    version: str = ""
    rootless: bool = False
    cgroup: str = ""  # "v1" / "v2" as Podman says it
    controllers: tuple = ()
    info_error: str = ""  # why Podman's own info could not be read

    @property
    def missing(self) -> tuple:
        """The cgroup controllers our limits need that this engine cannot use (rootless only: a rootful
        Podman has every controller)."""
        if not self.podman or not self.rootless:
            return ()
        if self.info_error:
            return NEEDED_CONTROLLERS
        return tuple(c for c in NEEDED_CONTROLLERS if c not in self.controllers)

    def describe(self) -> str:
        return f"podman {self.version}" + (" rootless" if self.rootless else "")


DOCKER = Engine()
_seen: dict[str, tuple[float, Engine]] = {}
_lock = threading.Lock()
_profile_dir: list[str] = []


def engine_of(client) -> Engine:
    """What engine answers on `client` (cached per endpoint for INFO_TTL): Docker, or Podman and how."""
    endpoint = docker_client.engine_name(client)  # base_url is the same for every unix socket
    with _lock:
        hit = _seen.get(endpoint)
        if hit is not None and time.monotonic() - hit[0] < INFO_TTL:
            return hit[1]
    try:
        engine = _ask(client)
    except Exception:  # noqa: BLE001 (an engine that cannot say: the run's own calls will tell what is wrong)
        return DOCKER
    with _lock:
        _seen[endpoint] = (time.monotonic(), engine)
    return engine


def forget() -> None:
    with _lock:
        _seen.clear()


def _ask(client) -> Engine:
    version = client.version()
    components = version.get("Components") if isinstance(version, dict) else None
    component = next((c for c in components or []
                      if isinstance(c, dict) and c.get("Name") == "Podman Engine"), None)
    if component is None:
        return DOCKER
    podman_version = component.get("Version") or version.get("Version") or ""
    api = (component.get("Details") or {}).get("MinAPIVersion") or "4.0.0"
    try:
        # Podman's own info (the Docker-compatible one says MemoryLimit/PidsLimit true regardless)
        reply = client.api._get(f"{client.api.base_url}/v{api}/libpod/info")
        reply.raise_for_status()
        info = reply.json()
        host = info.get("host") or {}
        return Engine(True, podman_version, bool((host.get("security") or {}).get("rootless")),
                      host.get("cgroupVersion", ""), tuple(host.get("cgroupControllers") or ()))
    except Exception as exc:  # noqa: BLE001 (any failure: treated as "cannot tell", i.e. no controllers)
        return Engine(True, podman_version, rootless=True, info_error=f"{type(exc).__name__}: {exc}")


def run_anyway() -> bool:
    return os.environ.get(NO_LIMITS_ENV, "") == "1"


def check(client, engine: Engine, gvisor: bool) -> None:
    """Refuse a run Podman would not confine as promised (before anything is created)."""
    if not engine.podman:
        return
    if gvisor:
        raise SandboxError(f"the engine is {engine.describe()}: ipyskills runs gVisor only under Docker "
                           "(runtime ipyskills-runsc in daemon.json); use runtime runc or auto with Podman")
    if not docker_client.is_local(client):
        raise SandboxError(f"the engine is {engine.describe()} at a remote address: Podman's Docker API "
                           "takes the seccomp profile as a file path on the engine's machine, so ipyskills "
                           "uses Podman only through a local socket (unix://...)")
    if engine.missing and not run_anyway():
        why = (f"its cgroup controllers could not be read ({engine.info_error})" if engine.info_error else
               f"cgroup {engine.cgroup or '?'} gives this user "
               f"{', '.join(engine.controllers) if engine.controllers else 'no controllers'}")
        raise SandboxError(
            f"the engine is {engine.describe()} and cannot enforce the sandbox's "
            f"{', '.join(engine.missing)} limits here ({why}; Podman accepts the limits and ignores them): "
            "use Docker, or rootless Podman on cgroup v2 with the systemd cgroup manager and the memory, "
            "pids and cpu controllers delegated to the user, or rootful Podman; "
            f"or set {NO_LIMITS_ENV}=1 to run anyway, with those limits stated as not enforced")


def adjust(host_config: dict, engine: Engine) -> None:
    """Podman's spellings of the same container (see the module's docstring), in the create_host_config
    keyword arguments before they are made."""
    if not engine.podman:
        return
    host_config["security_opt"] = [f"seccomp={profile_file()}" if opt.startswith("seccomp=") else opt
                                   for opt in host_config["security_opt"]]
    tmpfs = {path: _chown_option(opts) for path, opts in host_config["tmpfs"].items()}
    for path, opts in READ_ONLY_TMPFS.items():
        tmpfs.setdefault(path, opts)
    host_config["tmpfs"] = tmpfs


def _chown_option(opts: str) -> str:
    parts = opts.split(",")
    kept = [p for p in parts if not p.startswith(("uid=", "gid="))]
    return ",".join(kept + ["U"]) if len(kept) != len(parts) else opts


def profile_file() -> str:
    """Our seccomp profile as a file the engine's user can read (a fresh 0755 folder, removed at exit)."""
    with _lock:
        if not _profile_dir or not os.path.exists(os.path.join(_profile_dir[0], "seccomp.json")):
            folder = tempfile.mkdtemp(prefix="ipyskills-seccomp-")
            os.chmod(folder, 0o755)
            target = os.path.join(folder, "seccomp.json")
            shutil.copyfile(SECCOMP_PROFILE, target)  # containers.SECCOMP_PROFILE, the same file
            os.chmod(target, 0o644)
            if not _profile_dir:
                atexit.register(lambda: shutil.rmtree(_profile_dir[0], ignore_errors=True))
            _profile_dir[:] = [folder]
        return os.path.join(_profile_dir[0], "seccomp.json")


def limits_words(engine: Engine, limits) -> str | None:
    """What the isolation line says of memory, pids and CPU when Podman does not enforce some of them
    (None: the usual words apply)."""
    if not engine.missing:
        return None
    return (f"{', '.join(engine.missing)} limits NOT enforced (asked {limits.memory // 1024**2} MiB, "
            f"{limits.pids} pids, {limits.cpus:g} CPU; rootless Podman, cgroup {engine.cgroup or '?'}, "
            f"{NO_LIMITS_ENV}=1)")
