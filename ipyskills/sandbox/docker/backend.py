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

import contextlib
import io
import json
import os
import secrets
import socket
import tarfile
import threading
import time
from collections import OrderedDict
from pathlib import Path

from ...errors import ConfigError, RunInterrupted, SandboxError
from ...settings import DEFAULT_IMAGE, check_runtime
from .. import signals
from ..policy import Limits
from ..result import ExecuteResult, OutputBuffer
from . import cleanup as _cleanup
from . import client as docker_client
from .cleanup import (  # noqa: F401 (LABEL*, cleanup, flush_removals: re-exported for callers of the backend)
    LABEL,
    LABEL_HOST,
    LABEL_PID,
    _endpoint_of,
    _forget,
    _remove,
    cleanup,
    flush_removals,
    remove_later,
)
from .containers import (  # WORKSPACE: callers (sdist) import it from here too
    DEADLINE_GRACE,
    HOME_SEED,
    OUTPUT_DIR,
    RUN_ENV,
    SKILL_COPY_CAP,
    UID,
    WORKDIR,
    WORKSPACE,
    _image_seen,
    create_container,
    isolation_line,
    start_attached,
    trailer_cap,
)
from .podman import check as podman_check
from .podman import engine_of
from .runtime import choose as choose_runtime
from .stream import _send, _StreamReader

SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", ".ipynb_checkpoints"}
IMAGE_CHECK_TTL = 60.0  # seconds a positive image check is trusted (a failed create also clears it)
ENGINE_GRACE = 30.0  # seconds past its timeout by which a run's engine calls must be done (see run())
UNREPORTED_WAIT = 10.0  # seconds to wait for a container whose launcher never reported to be gone
GVISOR_SETTLE = 5.0  # seconds a finished gVisor container gets to go by itself before it is forced

_clients: dict[tuple, object] = {}  # (pid, endpoint, purpose) -> docker client, reused across runs
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
        try:  # a Podman engine that cannot enforce the limits is not ready (podman.py)
            podman_check(probe, engine_of(probe), gvisor=self.runtime == "runsc")
        except SandboxError as exc:
            return False, str(exc)
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
            "env": {**RUN_ENV, **request.env},
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
                exc.result.isolation = isolation_line(limits, copy, pooled=warm is not None, runtime=runtime,
                                        engine=engine_of(client))
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
        result.isolation = isolation_line(limits, copy, pooled=warm is not None, runtime=runtime,
                                        engine=engine_of(client))
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
        _cleanup.engine_started(client)
    return client


def check_stdin_size(stdin, limits: Limits) -> None:
    if len(stdin) > limits.stdin_cap:
        raise SandboxError(f"stdin is {len(stdin):,} bytes, over the {limits.stdin_cap:,} byte cap for one run; "
                           "write large data to a file the skill reads, or raise stdin_cap (Settings.stdin_cap, "
                           "IPYSKILLS_STDIN_CAP)")


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


def warm(settings=None, wait: float = 0.0):
    """Start the warm pool for `settings` (default: `Settings.from_env()`) now rather than on the first
    run; with `wait`, block up to that many seconds until it is full. Raises SandboxError when Docker is
    not ready and ConfigError when the pool is turned off (pool_size 0). Returns the pool.ContainerPool."""
    from ...settings import Settings

    settings = settings if settings is not None else Settings.from_env()
    if settings.pool_size <= 0:
        raise ConfigError("the warm pool is off (pool_size is 0): set pool_size to 1 or more "
                          "(IPYSKILLS_POOL_SIZE, or %config IPySkills.pool_size = 2)")
    backend = DockerBackend(image=settings.image, pool_size=settings.pool_size, pool_max=settings.pool_max,
                            runtime=settings.runtime, pool_limits=Limits.from_settings(settings))
    backend.ensure_ready()
    pool = backend.pool(backend.client(), backend.image)
    pool.warm(wait)
    if wait and pool.last_error and not pool.idle_ids():
        raise SandboxError(f"the warm pool could not start a container: {pool.last_error}")
    return pool
