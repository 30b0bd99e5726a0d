"""Creating and starting one hardened sandbox container (every flag it gets, and the line that says what
it enforced), and turning a failed engine call into an error that names the engine."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
from pathlib import Path

from ...errors import SandboxError
from ..policy import Limits
from . import client as docker_client
from .cleanup import (
    LABEL,
    LABEL_CREATE,
    LABEL_HOST,
    LABEL_PID,
    LABEL_POOL,
    _creating,
    _endpoint_of,
    _heal_later,
    _live,
    _live_lock,
    _lost,
    _remove,
)
from . import gvisor_orphans, podman
from .runtime import RUNC, Runtime

UID = 1000
WORKDIR = "/skill"  # the skill, read-only
WORKSPACE = "/work"  # the run's writable working directory (a tmpfs of Limits.workspace_size)
OUTPUT_DIR = "/output"
HOME_SEED = "/opt/ipyskills/home"
RUN_ENV = {"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "IPYSKILLS_OUTPUT": OUTPUT_DIR, "MPLBACKEND": "Agg"}
# ^ every run's environment (over the image's), before the request's own variables
SKILL_COPY_CAP = 64 * 1024**2  # a skill copied to a remote engine lives in a tmpfs charged to its memory
POOLED_SKILL_TMPFS = 2 * SKILL_COPY_CAP + 1024**2  # a pooled container does not know its skill's size yet
DEADLINE_GRACE = 2.0  # the launcher ends a run this long after the host's timeout, if the host has not
# What does not hold the same way under gVisor (measured; the README's gVisor table), said on every such run.
GVISOR_CAVEATS = ("; not the same under gVisor: pids held by RLIMIT_NPROC inside gVisor, memory that climbs past "
                  "the limit ends the script (exit 1) without being reported as out of memory (one allocation "
                  "far past it is killed and reported, as on runc), the CPU limit is not seen "
                  "from inside (busy processes measured up to 1.65 CPUs)")
GVISOR_THREADS = 256  # host threads gVisor's sentry and gofer may use beyond the script's pids (measured: 400
# guest processes fit in a 512 limit and not in 256)
SHM_SIZE = 16 * 1024**2  # /dev/shm: a small noexec tmpfs (charged to the container's memory)
SECCOMP_PROFILE = Path(__file__).parent / "seccomp.json"  # passed on every run (see the file's comment)
# A container without a network is created with networking disabled, not only in network mode "none": then
# the engine makes no network sandbox for it, which halved `docker start` here (156 -> 68 ms median); the
# container still gets its own network namespace with only `lo` (runc and runsc make it). Docker then
# leaves /etc/hosts empty, so "localhost" would not resolve: this file is mounted there instead, read-only.
# Local Docker engines only (the file must be on the engine's machine; Podman keeps network mode "none").
HOSTS_FILE = Path(__file__).parent / "hosts"
_LAUNCHER_SOURCE = (Path(__file__).parent / "launcher.py").read_text()
_PRESTARTED_SOURCE = (Path(__file__).parent / "prestarted.py").read_text()
PRESTART = True  # warm containers start the script's interpreter ahead of the job (benchmarks turn it off)
_seccomp_json: dict[bool, str] = {}
_image_seen: dict[tuple, float] = {}  # (endpoint, image) -> monotonic time of the last positive check


def seccomp_profile(gvisor: bool = False) -> str:
    """The shipped seccomp profile as compact JSON (the engine API takes the profile's content). For gVisor
    it is applied inside gVisor's kernel (runsc --oci-seccomp), whose filter answers EPERM where the profile
    says ENOSYS: for clone3 that stops the C library from falling back to clone (no thread could start),
    so that rule is left out there; namespaces made through clone3 would be gVisor's own, not the host's."""
    if gvisor not in _seccomp_json:
        profile = json.loads(SECCOMP_PROFILE.read_text())
        if gvisor:
            profile["syscalls"] = [rule for rule in profile["syscalls"] if rule["names"] != ["clone3"]]
        _seccomp_json[gvisor] = json.dumps(profile, separators=(",", ":"))
    return _seccomp_json[gvisor]


def create_container(client, image: str, limits: Limits, *, skill_dir: Path | None = None,
                     skill_bytes: int = 0, pooled: bool = False, idle_exit: float | None = None,
                     runtime: Runtime = RUNC) -> str:
    """Create (not start) a hardened sandbox container; returns its id. The skill is bind-mounted
    read-only from `skill_dir`, or (skill_dir None) gets a tmpfs the launcher unpacks the copy into.
    `runtime`: runc, or gVisor (every flag below applies inside its sandbox too)."""
    import docker.errors
    from docker.types import LogConfig, Mount

    tmpfs = {
        "/tmp": f"rw,noexec,nosuid,nodev,size={limits.tmp_size}",
        OUTPUT_DIR: f"rw,noexec,nosuid,nodev,size={output_size(limits)},uid={UID},gid={UID},mode=0700",
        WORKSPACE: f"rw,noexec,nosuid,nodev,size={limits.workspace_size},uid={UID},gid={UID},mode=0700",
    }
    engine = podman.engine_of(client)
    podman.check(client, engine, runtime.gvisor)  # refuses what Podman cannot enforce, before anything exists
    mounts = []
    if skill_dir is None:
        size = POOLED_SKILL_TMPFS if pooled else skill_bytes * 2 + 1024**2
        # exec: a skill may run its own helper programs, as it can from a read-only mount
        tmpfs[WORKDIR] = f"rw,exec,nosuid,nodev,size={size},uid={UID},gid={UID},mode=0755"
    else:
        # A Mount, not a 'src:dst:ro' bind string, so a colon in the host path is not a separator.
        mounts.append(Mount(target=WORKDIR, source=str(skill_dir), type="bind", read_only=True))
    no_network_sandbox = not limits.network and docker_client.is_local(client) and not engine.podman
    if no_network_sandbox:
        mounts.append(Mount(target="/etc/hosts", source=str(HOSTS_FILE), type="bind", read_only=True))
    command = ["python3", "-I", "-S", "-c", _LAUNCHER_SOURCE]
    if idle_exit is not None:
        command += ["--idle-exit", f"{idle_exit:g}"]
    if pooled and PRESTART:  # the interpreter a run of a Python script needs, started while the container waits
        command += ["--prestart", json.dumps({
            "source": _PRESTARTED_SOURCE, "env": RUN_ENV, "cwd": WORKSPACE, "home_seed": HOME_SEED,
            "nproc": limits.pids if runtime.gvisor else None})]
    token = secrets.token_hex(8)
    labels = {LABEL: "1", LABEL_PID: str(os.getpid()), LABEL_HOST: socket.gethostname(), LABEL_CREATE: token}
    if pooled:
        labels[LABEL_POOL] = "1"
    api = client.api
    with _live_lock:
        _creating.add(token)
    try:
        # The low-level call: the high-level one inspects the new container again, a wasted round trip.
        host_config = dict(
            cap_drop=["ALL"],
            security_opt=["no-new-privileges:true", f"seccomp={seccomp_profile(runtime.gvisor)}"],
            read_only=True, shm_size=SHM_SIZE,
            # The container removes itself when it stops, so a run whose owner died (the launcher then
            # exits: stdin closed, or its deadline passed) leaves nothing behind.
            auto_remove=True,
            tmpfs=tmpfs, mounts=mounts or None,
            network_mode="bridge" if limits.network else "none",
            mem_limit=limits.memory, memswap_limit=limits.memory,
            # gVisor: the engine's limit bounds gVisor's own threads (its sandbox dies at the limit), the
            # launcher's RLIMIT_NPROC the script's processes; so the engine's gets room for gVisor's
            pids_limit=limits.pids + GVISOR_THREADS if runtime.gvisor else limits.pids,
            nano_cpus=int(limits.cpus * 1e9), ipc_mode="private",
            runtime=runtime.engine_name if runtime.gvisor else None,  # runc: the engine's default runtime
            log_config=LogConfig(type="none"),  # output is read live; the engine keeps none of it
        )
        podman.adjust(host_config, engine)  # Podman's spellings of the same flags (podman.py)
        host_config = api.create_host_config(**host_config)
        config = api.create_container_config(
            image, command=command, user=f"{UID}:{UID}", working_dir=WORKDIR, environment={},
            stdin_open=True, tty=False, detach=True, labels=labels, host_config=host_config,
            network_disabled=no_network_sandbox,
        )
        config["StdinOnce"] = True  # the container's stdin closes when the owner's attach stream does
        created = api.create_container_from_config(config)
        container_id = created["Id"]
    except docker.errors.ImageNotFound:
        with _live_lock:
            _creating.discard(token)
        _image_seen.pop((_endpoint_of(client), image), None)
        raise SandboxError(f"the sandbox image {image} is not present: build the "
                           "image: ipyskills sandbox build [--offline]") from None
    except BaseException as exc:
        # The engine may have made the container even though the reply never came: find it by its token.
        with _live_lock:
            _creating.discard(token)
            _lost[token] = client
        _heal_later(client)
        if isinstance(exc, Exception):
            raise _engine_failure(client, exc, "create the sandbox container") from None
        raise  # KeyboardInterrupt, SystemExit: the healer removes what was made
    with _live_lock:
        _creating.discard(token)
        _live[container_id] = client
    return container_id


def start_attached(client, container_id: str):
    """Attach to the container's stdin/stdout/stderr, then start it; returns the attach socket.
    On failure the container is removed (a container that never started does not remove itself: AutoRemove
    acts when it stops) and SandboxError raised."""
    sock = None
    try:
        sock = client.api.attach_socket(
            container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        client.api.start(container_id)
        return sock
    except BaseException as exc:
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()
        left = []
        if _remove(client, container_id) and docker_client.is_local(client):
            left = gvisor_orphans.reap(container_id)  # a failed runsc start leaves its shim (gvisor_orphans.py)
        if isinstance(exc, Exception):
            error = _engine_failure(client, exc, "start the sandbox container")
            raise SandboxError(str(error) + gvisor_orphans.unended_note(left)) from None
        raise


def _engine_failure(client, exc: Exception, doing: str) -> SandboxError:
    """What a failed engine call becomes, naming the engine: refused, stuck (timed out), not answering,
    or an unexpected error inside the client library."""
    import docker.errors

    engine, detail = docker_client.engine_name(client), docker_client.short(exc)
    if isinstance(exc, docker.errors.APIError):
        return SandboxError(f"the Docker engine at {engine} refused to {doing}: {exc.explanation or exc}")
    if docker_client.is_timeout(exc):
        return SandboxError(f"the Docker engine at {engine} did not {doing} in time ({detail}): it is overloaded "
                            "or stuck (a hung runc); the run's container is removed once it answers: try again, "
                            "and check the engine (`docker ps`) if it keeps happening")
    if isinstance(exc, docker_client.engine_errors()):
        return docker_client.unreachable(engine, exc, doing)
    return SandboxError(f"talking to the Docker engine at {engine} failed trying to {doing} "
                        f"({type(exc).__name__}: {detail}); try again")


def isolation_line(limits: Limits, copy: bool, pooled: bool = False, runtime: Runtime = RUNC,
                   engine: podman.Engine = podman.DOCKER) -> str:
    """What the run's container enforced. The same settings give the same words whether the skill was
    mounted or copied in (both are read-only to the script); a warm container only adds "(warm pool)"
    after "docker", saying where the container came from, not what it enforced. Under gVisor the script's
    system calls go to gVisor's kernel, and every item after it still applies inside that sandbox."""
    network = "network bridge (asked for)" if limits.network else "network none"
    where = "docker (warm pool)" if pooled else "docker"
    if engine.podman:  # the Docker API served by Podman
        where += f" API, {engine.describe()}"
    enforced = podman.limits_words(engine, limits) or (
        f"{limits.memory // 1024**2} MiB (no swap), {limits.pids} pids, {limits.cpus:g} CPU")
    if runtime.gvisor:
        where += f", {runtime.describe()} kernel, not the host's; inside it"
    return (f"{where}: uid {UID}, no capabilities, no-new-privileges, read-only root, {network}, "
            f"{enforced}, /tmp noexec {limits.tmp_size // 1024**2} MiB, "
            f"/dev/shm noexec {SHM_SIZE // 1024**2} MiB, "
            f"seccomp ipyskills profile, ends itself {DEADLINE_GRACE:g} s after the timeout, "
            f"skill read-only at {WORKDIR}, workspace {WORKSPACE} "
            f"{limits.workspace_size // 1024**2} MiB (working directory)"
            + (GVISOR_CAVEATS if runtime.gvisor else ""))


def output_size(limits: Limits) -> int:
    """The output folder holds more than is returned, so over-cap files can still be listed."""
    return max(64 * 1024**2, 2 * limits.artifact_cap)


def trailer_cap(limits: Limits) -> int:
    # tar headers and padding: at most 3 blocks of 512 bytes per file, plus the listing itself.
    return limits.artifact_cap + limits.artifact_files * 2048 + 1024**2
