"""The Docker backend: one fresh hardened container per run, removed on every path.

The container's command is a small launcher (launcher.py) that receives the job on stdin after start:
argv, environment, stdin bytes and, for a remote engine or a pooled container, the skill files. The script
writes straight to the container's stdout/stderr, which we read through an attach socket (the log driver is
off, so a flood is never stored by the engine) and cap with OutputBuffer. When the script exits, the
launcher sends its report (exit code, OOM kills, then the files under the output folder as a tar) between
two copies of a per-run secret marker, while the container still runs (tmpfs contents vanish when it
stops).

Per run the engine sees: create, attach, start, then one removal, which runs in a background thread once
the result is known (the container is no longer needed, so the caller does not wait for it). The exit
code and OOM kills come from the launcher's report; wait and inspect are only used when the report never
came. With a warm pool (pool.py) even create, attach and start happen ahead of time.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import queue
import secrets
import select
import socket
import ssl
import struct
import tarfile
import threading
import time
from collections import OrderedDict
from pathlib import Path

from ...errors import RunInterrupted, SandboxError
from ...settings import DEFAULT_IMAGE
from .. import signals
from ..owners import pid_alive
from ..policy import Limits
from ..result import Artifact, ExecuteResult, OutputBuffer, artifacts_note, printable_path
from . import client as docker_client
from ...settings import check_runtime
from .runtime import RUNC, Runtime
from .runtime import choose as choose_runtime

LABEL = "ipyskills.sandbox"
LABEL_PID = "ipyskills.pid"
LABEL_HOST = "ipyskills.host"
LABEL_POOL = "ipyskills.pool"  # "1" on containers started ahead of time by the warm pool
LABEL_CREATE = "ipyskills.create"  # a token per create call, to find a container whose create reply was lost
UID = 1000
WORKDIR = "/skill"  # the skill, read-only
WORKSPACE = "/work"  # the run's writable working directory (a tmpfs of Limits.workspace_size)
OUTPUT_DIR = "/output"
HOME_SEED = "/opt/ipyskills/home"
SKILL_COPY_CAP = 64 * 1024**2  # a skill copied to a remote engine lives in a tmpfs charged to its memory
SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", ".ipynb_checkpoints"}
POOLED_SKILL_TMPFS = 2 * SKILL_COPY_CAP + 1024**2  # a pooled container does not know its skill's size yet
IMAGE_CHECK_TTL = 60.0  # seconds a positive image check is trusted (a failed create also clears it)
DEADLINE_GRACE = 2.0  # the launcher ends a run this long after the host's timeout, if the host has not
ENGINE_GRACE = 30.0  # seconds past its timeout by which a run's engine calls must be done (see run())
UNREPORTED_WAIT = 10.0  # seconds to wait for a container whose launcher never reported to be gone
REMOVING_WAIT = 5.0  # seconds to wait for a container the engine is already removing to be gone
# What does not hold the same way under gVisor (measured; the README's gVisor table), said on every such run.
GVISOR_CAVEATS = ("; not the same under gVisor: pids held by RLIMIT_NPROC inside gVisor, a memory overrun ends "
                  "the script (exit 1) without being reported as out of memory, the CPU limit is not seen "
                  "from inside (busy processes measured up to 1.65 CPUs)")
GVISOR_SETTLE = 5.0  # seconds a finished gVisor container gets to go by itself before it is forced
GVISOR_THREADS = 256  # host threads gVisor's sentry and gofer may use beyond the script's pids (measured: 400
# guest processes fit in a 512 limit and not in 256)
SHM_SIZE = 16 * 1024**2  # /dev/shm: a small noexec tmpfs (charged to the container's memory)
SECCOMP_PROFILE = Path(__file__).parent / "seccomp.json"  # passed on every run (see the file's comment)
_LAUNCHER_SOURCE = (Path(__file__).parent / "launcher.py").read_text()
_seccomp_json: str | None = None


def seccomp_profile() -> str:
    """The shipped seccomp profile as compact JSON (the engine API takes the profile's content)."""
    global _seccomp_json
    if _seccomp_json is None:
        _seccomp_json = json.dumps(json.loads(SECCOMP_PROFILE.read_text()), separators=(",", ":"))
    return _seccomp_json

_live: dict[str, object] = {}  # container id -> client, for the atexit sweep
_live_lock = threading.Lock()
_creating: set[str] = set()  # create tokens of calls in progress (their containers are not strays yet)
_lost: dict[str, object] = {}  # create token -> client, for creates that failed after maybe creating one
_unremoved: dict[str, object] = {}  # container id -> client, for removals that failed (retried by the healer)
_clients: dict[tuple, object] = {}  # (pid, endpoint, purpose) -> docker client, reused across runs
_image_seen: dict[tuple, float] = {}  # (endpoint, image) -> monotonic time of the last positive check
_shared_lock = threading.Lock()


class DockerBackend:
    """Runs one script per fresh container. `skill_transfer` is "auto" (bind-mount read-only when the
    engine is on this machine, else copy), "mount" or "copy". With `pool_size` > 0, runs whose limits
    match `pool_limits` (default: Limits()) take a container from a warm pool (pool.py) when one is ready;
    the others, and every run while the pool is empty, get a fresh container."""

    name = "docker"

    def __init__(self, image: str = DEFAULT_IMAGE, client=None, skill_transfer: str = "auto",
                 pool_size: int = 0, pool_limits: Limits | None = None, pool_max: int | None = None,
                 runtime: str = "runc"):
        if skill_transfer not in ("auto", "mount", "copy"):
            raise SandboxError(f"skill_transfer must be auto, mount or copy, got {skill_transfer!r}")
        self.runtime = check_runtime(runtime)  # "runc", "runsc" (gVisor) or "auto" (runtime.py)
        self.image = image or DEFAULT_IMAGE
        if client is not None:
            docker_client.bounded_calls(client)  # a client made elsewhere: bound its calls within runs too
        self._client = client
        self._probe = client
        self.skill_transfer = skill_transfer
        self.pool_size = pool_size
        self.pool_max = pool_max  # the most the pool grows to for a burst (None: pool.MAX_SIZE)
        self.pool_limits = pool_limits or Limits()
        signals.install()  # SIGTERM/SIGHUP end runs and drain the pool, from the backend's setup on

    # -- readiness -------------------------------------------------------------------------------------
    def probe_client(self):
        if self._probe is None:
            self._probe = shared_client(probe=True)  # short timeout: readiness must answer fast
        return self._probe

    def client(self):
        if self._client is None:
            self._client = shared_client()
        return self._client

    def readiness(self) -> tuple[bool, str]:
        """(True, description) when the engine answers and the image is present, else (False, what to do)."""
        try:
            probe = self.probe_client()
        except SandboxError as exc:  # connect() has already said where and why
            return False, str(exc)
        try:
            probe.ping()
        except docker_client.engine_errors() as exc:
            return False, str(docker_client.unreachable(docker_client.engine_name(probe), exc))
        seen_key = (_endpoint_of(probe), self.image)
        seen = _image_seen.get(seen_key)
        if seen is not None and time.monotonic() - seen < IMAGE_CHECK_TTL:
            return True, f"Docker engine ready, image {self.image}"
        try:
            from .image import image_info

            info = image_info(probe, self.image)
        except docker_client.engine_errors() as exc:
            return False, f"the Docker engine did not answer an image query ({docker_client.short(exc)})"
        if info is None:
            return False, (f"the sandbox image {self.image} is not present: build the image: "
                           "ipyskills sandbox build [--offline]")
        _image_seen[seen_key] = time.monotonic()
        return True, f"Docker engine ready, image {self.image} ({info['id']})"

    def ensure_ready(self) -> None:
        ready, reason = self.readiness()
        if not ready:
            raise SandboxError(reason)

    # -- running ---------------------------------------------------------------------------------------
    def run(self, request) -> ExecuteResult:
        # Every engine call of the run (create, attach, start, inspect, removal) times out by the run's
        # timeout plus ENGINE_GRACE, so a stuck engine (a hung runc) ends it with a SandboxError then.
        with docker_client.calls_end_by(time.monotonic() + request.limits.timeout + ENGINE_GRACE):
            return self._run(request)

    def _run(self, request) -> ExecuteResult:
        limits: Limits = request.limits
        argv = request.argv_at(WORKDIR)  # raises SandboxError for an unknown interpreter before anything starts
        check_stdin_size(request.stdin, limits)
        inputs_tar = request.inputs.tar(UID) if request.inputs else b""
        in_workspace = getattr(request, "workdir", "workspace") != "skill"
        begun = time.monotonic()
        client = self.client()
        # The ceiling of one call; run() bounds each call by the run's own deadline as well.
        client.api.timeout = max(docker_client.DEFAULT_TIMEOUT, int(limits.timeout) + 30)
        image = request.image or self.image
        runtime = choose_runtime(client, self.runtime, limits.network)
        pool = self.pool(client, image) if self.pool_size > 0 else None
        skill_tar = None  # made before a container is taken, so a failure here leaves nothing to remove
        use_pool = pool is not None and pool.serves(image, limits, runtime)
        if use_pool:
            try:
                skill_tar = cached_skill_tar(Path(request.skill_dir))
            except SandboxError:
                use_pool = False  # too large to copy in; a fresh container can still mount it
        warm = pool.take() if use_pool else None
        copy = warm is not None or self._copy_skill(client)
        if not copy:
            skill_tar = b""
        elif skill_tar is None:
            skill_tar = cached_skill_tar(Path(request.skill_dir))
        marker = "\0\0ipyskills-end-" + secrets.token_hex(16) + "\0\0"
        job = {
            "argv": argv,
            "env": {"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "IPYSKILLS_OUTPUT": OUTPUT_DIR,
                    "MPLBACKEND": "Agg", **request.env},
            "cwd": WORKSPACE if in_workspace else WORKDIR, "skill_dir": WORKDIR,
            "stdin": len(request.stdin), "skill_tar": len(skill_tar), "output": OUTPUT_DIR,
            "workspace": WORKSPACE if in_workspace else None, "inputs_dir": WORKSPACE,
            "inputs_tar": len(inputs_tar), "home_seed": HOME_SEED, "marker": marker,
            "artifact_cap": limits.artifact_cap, "artifact_files": limits.artifact_files,
            "deadline": limits.timeout + DEADLINE_GRACE,
            "nproc": limits.pids if runtime.gvisor else None,
        }
        # Sent part by part: stdin (up to limits.stdin_cap) is never copied into a joined payload.
        payload = [json.dumps(job).encode() + b"\n", skill_tar, inputs_tar, request.stdin]
        container_id = warm.id if warm is not None else None
        try:
            if warm is not None:
                sock, started = warm.sock, time.monotonic()
            else:
                skill_dir = None if copy else Path(request.skill_dir).resolve()
                container_id = create_container(client, image, limits, skill_dir=skill_dir,
                                                skill_bytes=len(skill_tar), runtime=runtime)
                sock, started = start_attached(client, container_id), time.monotonic()
            result = self._exchange(client, container_id, sock, payload, marker.encode(), limits, started,
                                    request)
        except BaseException as exc:
            removed = True
            if container_id is not None:
                removed = _remove(client, container_id)  # interrupted or failed: remove now, before anything else
            if isinstance(exc, RunInterrupted):
                exc.removed = removed
                exc.result.isolation = isolation_line(limits, copy, pooled=warm is not None, runtime=runtime)
                raise
            if isinstance(exc, KeyboardInterrupt):  # before the script's output began
                partial = ExecuteResult(exit_code=None, stdout="", stderr="",
                                        duration_ms=(time.monotonic() - begun) * 1000.0, backend=self.name,
                                        interrupted=True)
                raise RunInterrupted(partial, removed) from None
            raise
        else:
            # The result is known; its removal need not delay it. Not redundant with AutoRemove: this call
            # usually reaches the engine before the launcher has exited (measured: 19 of 20 runs), so it
            # is what removes the container, and the engine does one removal either way. AutoRemove is
            # for an owner that died (SIGKILL) with nobody left to call; this one also covers engines
            # that ignore AutoRemove (API < 1.25, some Docker-compatible engines) and a launcher that
            # reported but did not exit, and it takes the id off the tracked list.
            remove_later(client, container_id, settle=GVISOR_SETTLE if runtime.gvisor else 0.0)
        finally:
            if pool is not None:
                pool.refill()  # after the run, so refilling does not compete with it
        result.isolation = isolation_line(limits, copy, pooled=warm is not None, runtime=runtime)
        return result

    def pool(self, client, image: str):
        """The warm pool for this engine and image (started lazily; see pool.py)."""
        from .pool import pool_for

        runtime = choose_runtime(client, self.runtime, self.pool_limits.network)
        return pool_for(client, image, self.pool_limits, self.pool_size, self.pool_max, runtime=runtime)

    def _copy_skill(self, client) -> bool:
        if self.skill_transfer == "auto":
            return not docker_client.is_local(client)
        return self.skill_transfer == "copy"

    def _exchange(self, client, container_id: str, sock, payload: list, marker: bytes, limits: Limits,
                  started: float, request=None) -> ExecuteResult:
        """Send the job to the launcher, read the output and the report until the deadline."""
        raw = getattr(sock, "_sock", sock)
        listen = getattr(request, "listener", lambda _stream: None)
        stdout = OutputBuffer(limits.output_cap, listen("stdout"))
        stderr = OutputBuffer(limits.output_cap, listen("stderr"))
        reader = _StreamReader(stdout, stderr, marker, trailer_cap(limits))
        with contextlib.suppress(OSError, AttributeError):
            # The socket came with the timeout of the call that attached it (a warm one: long before);
            # the sender's sendall must be able to wait for a slow reader until the run's end.
            raw.settimeout(limits.timeout + DEADLINE_GRACE)
        try:
            deadline = time.monotonic() + limits.timeout
            sender = threading.Thread(target=_send, args=(raw, payload), daemon=True)
            sender.start()
            try:
                timed_out = not reader.pump(raw, deadline)
            except KeyboardInterrupt:
                stdout.listener = stderr.listener = None  # what is held back is kept, not shown again
                with contextlib.suppress(Exception):
                    reader._flush()
                raise RunInterrupted(ExecuteResult(
                    exit_code=None, stdout=stdout.text(), stderr=stderr.text(),
                    duration_ms=(time.monotonic() - started) * 1000.0, backend=self.name, interrupted=True,
                    stdout_truncated=stdout.truncated, stderr_truncated=stderr.truncated)) from None
            wall_ms = (time.monotonic() - started) * 1000.0
        finally:
            with contextlib.suppress(OSError):
                raw.shutdown(socket.SHUT_RDWR)  # wakes the sender if it is blocked in sendall; close would not
            with contextlib.suppress(OSError):
                sock.close()
        summary = reader.summary()
        if summary.get("deadline") is True:  # the launcher's own deadline ended the run first
            timed_out = True
        if timed_out:
            _remove(client, container_id)  # host-enforced: kill and remove right away
            exit_code, oom = None, False
        elif reader.complete and isinstance(summary.get("exit"), int):
            exit_code = summary["exit"]
            kills = summary.get("oom_kills")
            oom = kills > 0 if isinstance(kills, int) else (exit_code == 137 and summary.get("signal") == 9)
        else:  # the launcher never reported: ask the engine how the container ended
            exit_code, oom = _unreported_end(client, container_id, started)
        artifacts = reader.artifacts(limits)
        error = summary.get("artifacts_error")
        return ExecuteResult(
            exit_code=exit_code,
            stdout=stdout.text(), stderr=stderr.text(),
            duration_ms=summary.get("duration_ms") or wall_ms,
            timed_out=timed_out, oom_killed=oom and not timed_out,
            stdout_truncated=stdout.truncated, stderr_truncated=stderr.truncated,
            backend=self.name, artifacts=artifacts,
            artifacts_truncated=bool(reader.artifacts_note or error), artifacts_note=reader.artifacts_note,
            artifacts_error=str(error)[:500] if error else "",
        )


def _unreported_end(client, container_id: str, started: float) -> tuple[int | None, bool]:
    """(exit code, OOM-killed) of a container whose launcher never sent its report, when that is the
    run's own end: its memory limit killed the launcher (e.g. when files in its tmpfs mounts, charged to
    its memory, leave the launcher the largest process), or the report was cut short and the exit code is
    still the script's. Raises SandboxError naming the engine when the engine went
    away or ended the container: an engine stopped or restarted mid-run kills its containers (exit 137,
    no OOM) or drops the attach stream (the launcher then exits 125), and none of that is the script's
    result, nor an out-of-memory kill."""
    import docker.errors

    engine = docker_client.engine_name(client)
    state, oom_events = {}, []
    try:
        # The container removes itself once it stops (AutoRemove): inspect it while it is still there,
        # wait until it is gone, and ask the engine's event log whether it ran out of memory (that
        # answer outlives the container).
        with contextlib.suppress(docker.errors.NotFound):
            state = client.api.inspect_container(container_id).get("State", {})
        try:
            exit_status = client.api.wait(container_id, timeout=UNREPORTED_WAIT, condition="removed")
        except docker.errors.NotFound:
            exit_status = {}
        else:
            _forget(container_id)
        since = time.time() - (time.monotonic() - started) - 60  # the engine's clock may differ a little
        oom_events = list(client.api.events(since=since, until=time.time(), decode=True,
                                            filters={"container": container_id, "event": "oom"}))
    except Exception as exc:  # noqa: BLE001 - engine gone, timed out, connection dropped: all the same here
        raise SandboxError(f"the Docker engine at {engine} stopped answering during the run "
                           f"({docker_client.short(exc)}); the script's result is lost: run it again once "
                           "the engine answers") from None
    exit_code = exit_status.get("StatusCode", state.get("ExitCode") if not state.get("Running") else None)
    if state.get("OOMKilled") or oom_events:
        return 137 if exit_code is None else exit_code, True
    if exit_code in (None, 125, 137):
        how = {125: "dropped its connection to the sandbox container",
               137: "killed the sandbox container"}.get(exit_code, "lost the sandbox container")
        raise SandboxError(f"the Docker engine at {engine} {how} before the run reported (the engine stopped or "
                           "restarted, or the container was stopped from outside); the script's result is "
                           "lost: run it again")
    return exit_code, False


def shared_client(probe: bool = False):
    """One docker client per engine endpoint, reused by every run (and a short-timeout one for probes)."""
    base_url, tls = docker_client.engine_endpoint()
    # A forked child must not share the connections; two contexts naming one host with other certificates
    # are two clients.
    identity = None if tls is None else (getattr(tls, "cert", None), getattr(tls, "ca_cert", None),
                                         getattr(tls, "verify", None))
    key = (os.getpid(), base_url, identity, probe)
    with _shared_lock:
        client = _clients.get(key)
        first = client is None and not probe
        if client is None:
            client = docker_client.connect(timeout=3 if probe else docker_client.DEFAULT_TIMEOUT)
            _clients[key] = client
    if first:
        _on_first_start(client)
    return client


def _on_first_start(client) -> None:
    """The first time this process runs something on an engine: remove (in the background) containers
    whose owner process is gone."""
    threading.Thread(target=_cleanup_quietly, args=(client,), name="ipyskills-startup-cleanup",
                     daemon=True).start()


def _cleanup_quietly(client) -> None:
    with contextlib.suppress(Exception):  # best effort; `ipyskills sandbox cleanup` says what went wrong
        cleanup(client)


def _endpoint_of(client) -> str:
    # The engine as named by DOCKER_HOST: docker-py's base_url is "http+docker://localhost" for every unix
    # socket, which would make two local engines (a private one, the shared one) one.
    return docker_client.engine_name(client)


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
    mounts = []
    if skill_dir is None:
        size = POOLED_SKILL_TMPFS if pooled else skill_bytes * 2 + 1024**2
        # exec: a skill may run its own helper programs, as it can from a read-only mount
        tmpfs[WORKDIR] = f"rw,exec,nosuid,nodev,size={size},uid={UID},gid={UID},mode=0755"
    else:
        # A Mount, not a 'src:dst:ro' bind string, so a colon in the host path is not a separator.
        mounts.append(Mount(target=WORKDIR, source=str(skill_dir), type="bind", read_only=True))
    command = ["python3", "-I", "-S", "-c", _LAUNCHER_SOURCE]
    if idle_exit is not None:
        command += ["--idle-exit", f"{idle_exit:g}"]
    token = secrets.token_hex(8)
    labels = {LABEL: "1", LABEL_PID: str(os.getpid()), LABEL_HOST: socket.gethostname(), LABEL_CREATE: token}
    if pooled:
        labels[LABEL_POOL] = "1"
    api = client.api
    with _live_lock:
        _creating.add(token)
    try:
        # The low-level call: the high-level one inspects the new container again, a wasted round trip.
        host_config = api.create_host_config(
            cap_drop=["ALL"], security_opt=["no-new-privileges:true", f"seccomp={seccomp_profile()}"],
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
        config = api.create_container_config(
            image, command=command, user=f"{UID}:{UID}", working_dir=WORKDIR, environment={},
            stdin_open=True, tty=False, detach=True, labels=labels, host_config=host_config,
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
        _remove(client, container_id)
        if isinstance(exc, Exception):
            raise _engine_failure(client, exc, "start the sandbox container") from None
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


def isolation_line(limits: Limits, copy: bool, pooled: bool = False, runtime: Runtime = RUNC) -> str:
    """What the run's container enforced. The same settings give the same words whether the skill was
    mounted or copied in (both are read-only to the script); a warm container only adds "(warm pool)"
    after "docker", saying where the container came from, not what it enforced. Under gVisor the script's
    system calls go to gVisor's kernel, and every item after it still applies inside that sandbox."""
    network = "network bridge (asked for)" if limits.network else "network none"
    where = "docker (warm pool)" if pooled else "docker"
    if runtime.gvisor:
        where += f", {runtime.describe()} kernel, not the host's; inside it"
    return (f"{where}: uid {UID}, no capabilities, no-new-privileges, read-only root, {network}, "
            f"{limits.memory // 1024**2} MiB (no swap), {limits.pids} pids, {limits.cpus:g} CPU, "
            f"/tmp noexec {limits.tmp_size // 1024**2} MiB, /dev/shm noexec {SHM_SIZE // 1024**2} MiB, "
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


def check_stdin_size(stdin, limits: Limits) -> None:
    if len(stdin) > limits.stdin_cap:
        raise SandboxError(f"stdin is {len(stdin):,} bytes, over the {limits.stdin_cap:,} byte cap for one run; "
                           "write large data to a file the skill reads, or raise stdin_cap (Settings.stdin_cap, "
                           "IPYSKILLS_STDIN_CAP)")


def _send(raw, payload) -> None:
    try:
        for part in payload:
            if len(part):
                raw.sendall(part)
    except OSError:
        pass  # the container ended before reading everything (e.g. the script exited early)


class _MarkerSplitter:
    """Passes one stream's bytes on to `out` until the marker, holding back only what could be its start."""

    def __init__(self, out: OutputBuffer, marker: bytes):
        self.out, self.marker = out, marker
        self._pending = b""

    def feed(self, data: bytes) -> bytes | None:
        """Write the part before the marker; once it is found, return what follows it (else None)."""
        data = self._pending + data
        at = data.find(self.marker)
        if at >= 0:
            self.out.write(data[:at])
            self._pending = b""
            return data[at + len(self.marker):]
        # Only an end that could be the marker's start is held back (usually nothing: the marker starts
        # with NULs), so output reaches live listeners line by line, not some 50 bytes late.
        keep = next((k for k in range(min(len(data), len(self.marker) - 1), 0, -1)
                     if data.endswith(self.marker[:k])), 0)
        self.out.write(data[:len(data) - keep])
        self._pending = data[len(data) - keep:]
        return None

    def flush(self) -> None:
        if self._pending:
            self.out.write(self._pending)
            self._pending = b""


class _StreamReader:
    """Demultiplexes Docker's attach stream into capped stdout/stderr, and splits off the report: the
    launcher ends stderr with the marker and sends marker, report, marker on stdout."""

    def __init__(self, stdout: OutputBuffer, stderr: OutputBuffer, marker: bytes, cap: int):
        self.marker, self.cap = marker, cap
        self._out = _MarkerSplitter(stdout, marker)
        self._err = _MarkerSplitter(stderr, marker)
        self.stderr_done = False
        self.trailer: bytearray | None = None
        self.trailer_done = False
        self.trailer_overflow = False
        self._tail = b""  # the last bytes of an overflowing trailer, where its end marker may start
        self.artifacts_note = ""  # set by artifacts(): what was left out and why

    @property
    def complete(self) -> bool:
        """Both streams have ended with the marker: everything the run printed and reported is here."""
        return self.stderr_done and self.trailer_done

    def pump(self, raw, deadline: float) -> bool:
        """Read until the report is complete or the stream closes (True), or the deadline passes (False)."""
        buf = bytearray()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._flush()  # what the script printed before the timeout is kept
                return False
            pending = getattr(raw, "pending", lambda: 0)()  # TLS may hold decrypted bytes select cannot see
            ready = pending or select.select([raw], [], [], min(remaining, 1.0))[0]
            if not ready:
                continue
            try:
                chunk = raw.recv(1 << 18)
            except (TimeoutError, BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                continue  # TLS: only part of a record has arrived yet
            except OSError:
                chunk = b""
            if not chunk:
                self._flush()
                return True
            buf += chunk
            offset = 0
            while len(buf) - offset >= 8:
                kind, size = buf[offset], struct.unpack(">I", buf[offset + 4:offset + 8])[0]
                if len(buf) - offset - 8 < size:
                    break
                self._frame(kind, bytes(buf[offset + 8:offset + 8 + size]))
                offset += 8 + size
            del buf[:offset]
            if self.complete:
                return True

    def _frame(self, kind: int, data: bytes) -> None:
        if kind == 2:
            if not self.stderr_done and self._err.feed(data) is not None:
                self.stderr_done = True  # anything after the marker is not the script's
            return
        if self.trailer_done:
            return
        if self.trailer is not None:
            self._trailer_add(data)
            return
        rest = self._out.feed(data)
        if rest is not None:
            self.trailer = bytearray()
            self._trailer_add(rest)

    def _trailer_add(self, data: bytes) -> None:
        window = self._tail + data
        at = window.find(self.marker)
        if at >= 0:
            self.trailer_done = True
            data = window[len(self._tail):at] if at >= len(self._tail) else b""
            if at < len(self._tail) and not self.trailer_overflow:  # it began in bytes kept: drop them
                del self.trailer[len(self.trailer) - (len(self._tail) - at):]
        else:
            self._tail = window[-(len(self.marker) - 1):]
        if self.trailer_overflow or len(self.trailer) + len(data) > self.cap:
            self.trailer_overflow = True
            return
        self.trailer += data

    def _flush(self) -> None:
        self._out.flush()
        if not self.stderr_done:
            self._err.flush()

    def summary(self) -> dict:
        if self.trailer is None:
            return {}
        line, _, _ = bytes(self.trailer).partition(b"\n")
        try:
            data = json.loads(line)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    def artifacts(self, limits: Limits) -> list[Artifact]:
        summary = self.summary()
        listed = summary.get("files") or []
        omitted = summary.get("omitted") if isinstance(summary.get("omitted"), dict) else {}
        omitted = dict(omitted)
        if len(listed) > limits.artifact_files:
            omitted["more_files"] = omitted.get("more_files", 0) + len(listed) - limits.artifact_files
        if self.trailer_overflow:
            omitted["overflow_files"] = sum(1 for e in listed if isinstance(e, dict) and e.get("returned"))
        self.artifacts_note = artifacts_note(omitted, files_cap=limits.artifact_files,
                                             bytes_cap=limits.artifact_cap)
        if not listed:
            return []
        body = bytes(self.trailer).partition(b"\n")[2]
        contents: dict[str, bytes] = {}
        if not self.trailer_overflow:
            try:
                with tarfile.open(fileobj=io.BytesIO(body), mode="r:") as tar:
                    for member in tar:
                        if member.isfile():
                            contents[member.name] = tar.extractfile(member).read()
            except tarfile.TarError:
                contents = {}
        result, total = [], 0
        for entry in listed[:limits.artifact_files]:
            path, size = str(entry.get("path", "")), int(entry.get("size", 0))
            data = contents.get(path)
            if data is not None and total + len(data) <= limits.artifact_cap:
                total += len(data)
            else:
                data = None
            result.append(Artifact(path=printable_path(path), size=size, data=data))
        return result


def _skill_files(root: Path):
    """(path, resolved path, stat) of each file a copy of the skill holds, in a stable order: regular
    files, and symlinks only when they stay inside the skill. Raises SandboxError when it is too large."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            real = path.resolve()
            if not real.is_file() or (real != root and root not in real.parents):
                continue  # a link leaving the skill, a socket, a device: never sent
            st = real.stat()
            total += st.st_size
            if total > SKILL_COPY_CAP:
                raise SandboxError(f"the skill folder {root} holds more than {SKILL_COPY_CAP // 1024**2} MiB; "
                                   "move large data out of it or run against a local Docker engine")
            yield path, real, st


def tar_skill(root: Path) -> bytes:
    """The skill folder as a tar: regular files and folders; symlinks only when they stay inside it."""
    root = root.resolve()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:", format=tarfile.PAX_FORMAT) as tar:
        for path, real, _st in _skill_files(root):
            info = tar.gettarinfo(str(real), arcname=str(path.relative_to(root)))
            info.uid = info.gid = UID
            info.uname = info.gname = ""
            with open(real, "rb") as fh:
                tar.addfile(info, fh)
    return buf.getvalue()


_TAR_CACHE_ENTRIES = 8
TAR_CACHE_BYTES = 96 * 1024**2  # the cached tars together hold at most this much; larger ones are not kept
_tar_cache: OrderedDict[Path, tuple[tuple, bytes]] = OrderedDict()  # root -> (signature, tar)
_tar_cache_lock = threading.Lock()


def cached_skill_tar(root: Path) -> bytes:
    """tar_skill, reused while no file in the skill changed (same names, sizes, mtimes and modes), so
    repeated runs of a skill only stat its files."""
    root = root.resolve()
    signature = tuple((str(path), str(real), st.st_size, st.st_mtime_ns, st.st_mode)
                      for path, real, st in _skill_files(root))
    with _tar_cache_lock:
        hit = _tar_cache.get(root)
        if hit is not None and hit[0] == signature:
            _tar_cache.move_to_end(root)
            return hit[1]
    data = tar_skill(root)
    with _tar_cache_lock:
        _tar_cache.pop(root, None)
        if len(data) <= TAR_CACHE_BYTES:
            _tar_cache[root] = (signature, data)
        while len(_tar_cache) > _TAR_CACHE_ENTRIES or tar_cache_bytes() > TAR_CACHE_BYTES:
            _tar_cache.popitem(last=False)
    return data


def tar_cache_bytes() -> int:
    """Bytes the skill tar cache holds now."""
    return sum(len(data) for _sig, data in _tar_cache.values())


def _remove(client, container_id: str) -> bool:
    """Force-remove a container; never raises. False when it could not be removed now: it stays
    registered, and the healer thread retries in the background once the engine answers. True when it is
    gone, or the engine is already removing it (the healer then checks that it went)."""
    import docker.errors

    if docker_client.out_of_time():  # the caller's deadline has passed: the healer tries it instead
        return _removal_failed(client, container_id)
    try:
        client.api.remove_container(container_id, force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if "already in progress" not in str(exc):
            return _removal_failed(client, container_id)
        # The engine is removing it already (AutoRemove, or its own clean-up after a restart): wait a
        # moment until it is gone. An engine's removal can fail and leave the container "Dead", so one
        # not seen gone stays on the list, and the healer removes it.
        try:
            client.api.wait(container_id, timeout=REMOVING_WAIT, condition="removed")
        except docker.errors.NotFound:
            pass
        except Exception:  # noqa: BLE001 - still there, or the engine stopped answering
            _removal_failed(client, container_id)
            return True
    except Exception:  # noqa: BLE001 - engine gone, connection lost, urllib3 trouble: retried later
        return _removal_failed(client, container_id)
    _forget(container_id)
    return True


def _forget(container_id: str) -> None:
    """The container is gone: nothing needs to remove it any more."""
    with _live_lock:
        _live.pop(container_id, None)
        _unremoved.pop(container_id, None)


def _removal_failed(client, container_id: str) -> bool:
    with _live_lock:
        _live.setdefault(container_id, client)
        _unremoved[container_id] = client
    _heal_later(client)
    return False


# -- self-healing: removals that failed, creates whose reply was lost, strays of this process ---------
HEAL_FIRST_DELAY = 0.5  # seconds before the first retry; doubles up to HEAL_MAX_DELAY
HEAL_MAX_DELAY = 5.0
_healer: threading.Thread | None = None
_heal_clients: dict[str, object] = {}  # endpoint -> a client of that engine
_heal_wake = threading.Event()


def _heal_later(client) -> None:
    """Start (or wake) the background healer: once the engine answers again it retries failed removals,
    removes containers of lost creates, and sweeps this process's untracked containers."""
    global _healer
    with _remover_lock:
        _heal_clients[_endpoint_of(client)] = client
        if os.getpid() == _main_pid and (_healer is None or not _healer.is_alive()):
            _healer = threading.Thread(target=_heal_loop, name="ipyskills-container-healer", daemon=True)
            _healer.start()
    _heal_wake.set()


def _heal_loop() -> None:
    delay = HEAL_FIRST_DELAY
    while True:
        _heal_wake.wait(delay)
        _heal_wake.clear()
        with _remover_lock:
            clients = list(_heal_clients.values())
        healed = all(heal(client) for client in clients)
        with _live_lock:
            pending = bool(_unremoved or _lost)
        if healed and not pending:
            with _remover_lock:
                if not _heal_wake.is_set():
                    global _healer
                    _healer = None
                    _heal_clients.clear()
                    return
            continue
        delay = HEAL_FIRST_DELAY if healed else min(HEAL_MAX_DELAY, delay * 2)


def heal(client, everything: bool = False) -> bool:
    """One healing pass on one engine: retry failed removals, remove containers of lost creates and
    containers labelled with this process's pid that nothing tracks (with `everything`, all of this
    process's containers). Returns False when the engine does not answer."""
    endpoint = _endpoint_of(client)
    try:
        client.api.ping()
        ours = client.api.containers(all=True, filters={"label": [f"{LABEL}=1", f"{LABEL_PID}={os.getpid()}"]})
    except Exception:  # noqa: BLE001 - still down; try again later
        return False
    with _live_lock:
        retry = [cid for cid, c in _unremoved.items() if _endpoint_of(c) == endpoint]
        tracked, creating = set(_live), set(_creating)
        lost = {t for t, c in _lost.items() if _endpoint_of(c) == endpoint}
    results = [_remove(client, cid) for cid in retry]  # every one tried, not only up to the first failure
    ok = all(results)
    for container in ours:
        cid, labels = container.get("Id", ""), container.get("Labels") or {}
        token = labels.get(LABEL_CREATE)
        if everything or token in lost or (cid not in tracked and token not in creating):
            ok = _remove(client, cid) and ok
    if ok:
        with _live_lock:
            for token in lost:
                _lost.pop(token, None)
    return ok


_removals: queue.Queue = queue.Queue()
_remover: threading.Thread | None = None
_remover_lock = threading.Lock()


def remove_later(client, container_id: str, settle: float = 0.0) -> None:
    """Remove a finished run's container in a background thread (it stays in the atexit sweep's list
    until it is gone). `settle`: first wait up to that long for it to go by itself (AutoRemove after the
    launcher exits), for gVisor, where a forced removal racing the sandbox's own exit stalled 30-60 s
    (measured after runs that forked: 1 in 4 under load; waiting first, it went in 0.1-0.2 s, 8 of 8)."""
    global _remover
    with _live_lock:
        if container_id not in _live:
            return  # already removed (e.g. right away at a timeout) or known gone
    with _remover_lock:
        if _remover is None or not _remover.is_alive():
            _remover = threading.Thread(target=_remove_queued, name="ipyskills-container-remover", daemon=True)
            _remover.start()
    _removals.put((client, container_id, settle))


def _remove_queued() -> None:
    while True:
        client, container_id, settle = _removals.get()
        try:
            if settle and _went_by_itself(client, container_id, settle):
                _forget(container_id)
                continue
            _remove(client, container_id)  # engine errors leave it to the atexit sweep and `sandbox cleanup`
        finally:
            _removals.task_done()


def _went_by_itself(client, container_id: str, wait: float) -> bool:
    import docker.errors

    try:
        client.api.wait(container_id, timeout=wait, condition="removed")
        return True
    except docker.errors.NotFound:
        return True
    except Exception:  # noqa: BLE001 - still there after `wait`, or the engine did not answer: force it
        return False


def flush_removals(timeout: float = 30.0) -> bool:
    """Wait until every queued removal has been tried; False if that took longer than `timeout`."""
    deadline = time.monotonic() + timeout
    while _removals.unfinished_tasks:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


_main_pid = os.getpid()  # a forked child owns none of these containers


def end_all(timeout: float = 10.0) -> None:
    """Remove every container this process made: queued removals, in-flight and pooled ones, and any
    other container labelled with this pid (lost creates). At exit, and on SIGTERM/SIGHUP."""
    if os.getpid() != _main_pid:
        return
    with docker_client.calls_end_by(time.monotonic() + timeout):  # a stuck engine must not hold the exit
        _end_all(timeout)


def _end_all(timeout: float) -> None:
    flush_removals(timeout=timeout)
    with _live_lock:
        pending = list(_live.items())
        endpoints = {_endpoint_of(c): c for c in [*_live.values(), *_lost.values(), *_unremoved.values()]}
    with _shared_lock:
        endpoints.update({_endpoint_of(c): c for key, c in _clients.items() if key[0] == _main_pid and not key[3]})
    for container_id, client in pending:
        _remove(client, container_id)
    for client in endpoints.values():
        heal(client, everything=True)


@atexit.register
def _remove_live_containers() -> None:
    # The process is on its way out, often because of a Ctrl-C: one more Ctrl-C (an impatient user
    # pressing it again) must neither cut this bounded clean-up short nor print a traceback.
    if threading.current_thread() is threading.main_thread():
        import signal

        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    end_all()


def labelled_containers(client, all_owners: bool = False) -> list:
    """Our containers that no live process on this machine owns (or all of them with all_owners)."""
    containers = client.containers.list(all=True, filters={"label": f"{LABEL}=1"}, ignore_removed=True)
    if all_owners:
        return containers
    host = socket.gethostname()
    return [c for c in containers if not _owner_alive(c.labels, host)]


def _owner_alive(labels: dict, host: str) -> bool:
    if labels.get(LABEL_HOST) != host:
        return True  # another machine's process cannot be checked from here; only --all removes it
    try:
        pid = int(labels.get(LABEL_PID, ""))
    except ValueError:
        return False
    return pid == os.getpid() or pid_alive(pid)


def cleanup(client=None, all_owners: bool = False) -> list[str]:
    """Remove stray sandbox containers; returns their short ids."""
    client = client or docker_client.connect()
    try:
        strays = labelled_containers(client, all_owners)
    except docker_client.engine_errors() as exc:
        raise docker_client.unreachable(docker_client.engine_name(client), exc) from None
    removed = []
    for container in strays:
        _remove(client, container.id)
        removed.append(container.short_id)
    return removed
