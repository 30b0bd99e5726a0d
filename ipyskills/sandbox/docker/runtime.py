"""The container runtime a run uses: runc (the host's kernel, behind our seccomp profile) or gVisor's runsc
(a user-space kernel between the script and the host's).

The setting `runtime` is "runc", "runsc" or "auto" (gVisor when the engine offers it). ipyskills registers
its own runtime entry, `ipyskills-runsc`, in the engine's daemon.json rather than relying on one named
`runsc`: its arguments matter. `--network=none` is required (this runsc refuses to start a container with
network mode none otherwise), so every gVisor run is network-off; a run that asks for the network gets
runc under "auto" and a clear refusal under "runsc". `--platform=systrap` is the platform that works in
VMs (kvm hangs in a nested VM). `--oci-seccomp` makes gVisor apply the container's seccomp profile (ours)
to the script's system calls inside its kernel too; without it runsc ignores the profile (the script saw
seccomp mode 0, and `unshare(CLONE_NEWUSER)` succeeded where runc answers EPERM).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ...errors import SandboxError
from ...settings import check_runtime
from . import client as docker_client

GVISOR_RUNTIME = "ipyskills-runsc"  # the runtime name registered in daemon.json
GVISOR_ARGS = ("--network=none", "--platform=systrap", "--oci-seccomp")
DAEMON_JSON = Path("/etc/docker/daemon.json")
BACKPORTS_LIST = Path("/etc/apt/sources.list.d/ipyskills-backports.list")
INFO_TTL = 30.0  # seconds the engine's runtime list is trusted before it is asked again

_offered: dict[str, tuple[float, dict]] = {}  # engine endpoint -> (when, {runtime name: its config})
_offered_lock = threading.Lock()


@dataclass(frozen=True)
class Runtime:
    """What a container is created with: `engine_name` for the engine API, and how the run describes it."""

    engine_name: str  # "runc" or GVISOR_RUNTIME
    platform: str = ""  # gVisor's platform (systrap), "" for runc

    @property
    def gvisor(self) -> bool:
        return self.engine_name != "runc"

    def describe(self) -> str:
        return f"gVisor ({self.platform or 'default platform'})" if self.gvisor else "runc"


RUNC = Runtime("runc")


def offered(client) -> dict:
    """The runtimes the engine offers ({name: {"path": ..., "runtimeArgs": [...]}}), cached for INFO_TTL."""
    endpoint = docker_client.engine_name(client)  # base_url is the same for every unix socket
    with _offered_lock:
        hit = _offered.get(endpoint)
        if hit is not None and time.monotonic() - hit[0] < INFO_TTL:
            return hit[1]
    runtimes = client.info().get("Runtimes") or {}
    with _offered_lock:
        _offered[endpoint] = (time.monotonic(), runtimes)
    return runtimes


def forget_offered() -> None:
    with _offered_lock:
        _offered.clear()


def choose(client, wanted: str, network: bool) -> Runtime:
    """The runtime for one run: `wanted` from the settings, the engine's offer, and whether the run asked
    for the network (which gVisor runs here never have)."""
    check_runtime(wanted)
    if wanted == "runc":
        return RUNC
    config = offered(client).get(GVISOR_RUNTIME)
    if config is None:
        if wanted == "auto":
            return RUNC
        raise SandboxError(f"runtime runsc (gVisor) was asked for, but the Docker engine offers no "
                           f"{GVISOR_RUNTIME} runtime: set it up once with `sudo ipyskills sandbox gvisor` "
                           "(installs runsc and registers it), or use runtime runc or auto")
    if network:
        if wanted == "auto":
            return RUNC
        raise SandboxError("a gVisor run here has no network (the runtime is registered with --network=none, "
                           "which this runsc needs for network-off containers): run without --network, or "
                           "with runtime runc or auto (which uses runc for runs that ask for the network)")
    args = config.get("runtimeArgs") or []
    platform = next((a.split("=", 1)[1] for a in args if a.startswith("--platform=")), "")
    return Runtime(GVISOR_RUNTIME, platform)
