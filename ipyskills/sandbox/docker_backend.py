"""The Docker backend: one fresh hardened container per run, removed on every path.

The container's command is a small launcher (launcher.py) that receives the job on stdin after start:
argv, environment, stdin bytes and, for a remote engine, the skill files. The script writes straight to
the container's stdout/stderr, which we read through an attach socket (the log driver is off, so a flood
is never stored by the engine) and cap with OutputBuffer. When the script exits, the launcher sends the
files under the output folder as a tar after a per-run secret marker, while the container still runs
(tmpfs contents vanish when it stops).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import secrets
import select
import socket
import struct
import tarfile
import threading
import time
from pathlib import Path

from ..errors import SandboxError
from ..settings import DEFAULT_IMAGE
from . import docker_client
from .policy import Limits
from .result import Artifact, ExecuteResult, OutputBuffer

LABEL = "ipyskills.sandbox"
LABEL_PID = "ipyskills.pid"
LABEL_HOST = "ipyskills.host"
UID = 1000
WORKDIR = "/skill"
OUTPUT_DIR = "/output"
HOME_SEED = "/opt/ipyskills/home"
SKILL_COPY_CAP = 64 * 1024**2  # a skill copied to a remote engine lives in a tmpfs charged to its memory
SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", ".ipynb_checkpoints"}
_LAUNCHER_SOURCE = (Path(__file__).parent / "launcher.py").read_text()

_live: dict[str, object] = {}  # container id -> client, for the atexit sweep
_live_lock = threading.Lock()


class DockerBackend:
    """Runs one script per fresh container. `skill_transfer` is "auto" (bind-mount read-only when the
    engine is on this machine, else copy), "mount" or "copy"."""

    name = "docker"

    def __init__(self, image: str = DEFAULT_IMAGE, client=None, skill_transfer: str = "auto"):
        if skill_transfer not in ("auto", "mount", "copy"):
            raise SandboxError(f"skill_transfer must be auto, mount or copy, got {skill_transfer!r}")
        self.image = image or DEFAULT_IMAGE
        self._client = client
        self._probe = client
        self.skill_transfer = skill_transfer

    # -- readiness -------------------------------------------------------------------------------------
    def probe_client(self):
        if self._probe is None:
            self._probe = docker_client.connect(timeout=3)  # short: readiness must answer fast
        return self._probe

    def client(self):
        if self._client is None:
            self._client = docker_client.connect()
        return self._client

    def readiness(self) -> tuple[bool, str]:
        """(True, description) when the engine answers and the image is present, else (False, what to do)."""
        try:
            probe = self.probe_client()
            probe.ping()
        except (*docker_client.engine_errors(), SandboxError) as exc:
            return False, (f"no Docker engine answers ({docker_client.short(exc)}): start the Docker engine "
                           "(e.g. `sudo dockerd &` or `sudo systemctl start docker`) or set DOCKER_HOST")
        try:
            from .image import image_info

            info = image_info(probe, self.image)
        except docker_client.engine_errors() as exc:
            return False, f"the Docker engine did not answer an image query ({docker_client.short(exc)})"
        if info is None:
            return False, (f"the sandbox image {self.image} is not present: build the image: "
                           "ipyskills sandbox build [--offline]")
        return True, f"Docker engine ready, image {self.image} ({info['id']})"

    def ensure_ready(self) -> None:
        ready, reason = self.readiness()
        if not ready:
            raise SandboxError(reason)

    # -- running ---------------------------------------------------------------------------------------
    def run(self, request) -> ExecuteResult:
        limits: Limits = request.limits
        argv = request.argv  # raises SandboxError for an unknown interpreter before anything starts
        client = self.client()
        client.api.timeout = max(docker_client.DEFAULT_TIMEOUT, int(limits.timeout) + 30)
        copy = self._copy_skill(client)
        skill_tar = tar_skill(Path(request.skill_dir)) if copy else b""
        marker = "\0\0ipyskills-end-" + secrets.token_hex(16) + "\0\0"
        job = {
            "argv": argv,
            "env": {"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "IPYSKILLS_OUTPUT": OUTPUT_DIR,
                    "MPLBACKEND": "Agg", **request.env},
            "cwd": WORKDIR, "stdin": len(request.stdin), "skill_tar": len(skill_tar), "output": OUTPUT_DIR,
            "home_seed": HOME_SEED, "marker": marker,
            "artifact_cap": limits.artifact_cap, "artifact_files": limits.artifact_files,
        }
        payload = json.dumps(job).encode() + b"\n" + skill_tar + bytes(request.stdin)
        container = self._create(client, request, limits, copy, len(skill_tar))
        try:
            return self._attach_and_run(container, payload, marker.encode(), limits, copy)
        finally:
            _remove(client, container.id)

    def _copy_skill(self, client) -> bool:
        if self.skill_transfer == "auto":
            return not docker_client.is_local(client)
        return self.skill_transfer == "copy"

    def _create(self, client, request, limits: Limits, copy: bool, skill_bytes: int):
        import docker.errors
        from docker.types import LogConfig

        tmpfs = {
            "/tmp": f"rw,noexec,nosuid,nodev,size={limits.tmp_size}",
            OUTPUT_DIR: f"rw,noexec,nosuid,nodev,size={output_size(limits)},uid={UID},gid={UID},mode=0700",
        }
        volumes = {}
        if copy:
            # exec: a skill may run its own helper programs, as it can from a read-only mount
            tmpfs[WORKDIR] = f"rw,exec,nosuid,nodev,size={skill_bytes * 2 + 1024**2},uid={UID},gid={UID},mode=0755"
        else:
            volumes[str(Path(request.skill_dir).resolve())] = {"bind": WORKDIR, "mode": "ro"}
        try:
            container = client.containers.create(
                request.image or self.image,
                command=["python3", "-I", "-S", "-c", _LAUNCHER_SOURCE],
                user=f"{UID}:{UID}", working_dir=WORKDIR, environment={},
                stdin_open=True, tty=False, detach=True,
                labels={LABEL: "1", LABEL_PID: str(os.getpid()), LABEL_HOST: socket.gethostname()},
                cap_drop=["ALL"], security_opt=["no-new-privileges:true"], read_only=True,
                tmpfs=tmpfs, volumes=volumes,
                network_mode="bridge" if limits.network else "none",
                mem_limit=limits.memory, memswap_limit=limits.memory, pids_limit=limits.pids,
                nano_cpus=int(limits.cpus * 1e9), ipc_mode="private",
                log_config=LogConfig(type="none"),  # output is read live; the engine keeps none of it
            )
        except docker.errors.ImageNotFound:
            raise SandboxError(f"the sandbox image {request.image or self.image} is not present: build the "
                               "image: ipyskills sandbox build [--offline]") from None
        except docker.errors.APIError as exc:
            raise SandboxError(f"Docker refused to create the sandbox container: {exc.explanation or exc}")
        with _live_lock:
            _live[container.id] = client
        return container

    def _attach_and_run(self, container, payload: bytes, marker: bytes, limits: Limits, copy: bool):
        import docker.errors

        sock = container.client.api.attach_socket(
            container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        raw = getattr(sock, "_sock", sock)
        stdout, stderr = OutputBuffer(limits.output_cap), OutputBuffer(limits.output_cap)
        reader = _StreamReader(stdout, stderr, marker, trailer_cap(limits))
        try:
            started = time.monotonic()
            try:
                container.start()
            except docker.errors.APIError as exc:
                raise SandboxError(f"Docker could not start the sandbox container: {exc.explanation or exc}")
            deadline = time.monotonic() + limits.timeout
            sender = threading.Thread(target=_send, args=(raw, payload), daemon=True)
            sender.start()
            timed_out = not reader.pump(raw, deadline)
            wall_ms = (time.monotonic() - started) * 1000.0
        finally:
            try:
                sock.close()
            except OSError:
                pass
        state = {}
        if timed_out:
            _kill(container)
        else:
            try:
                exit_status = container.wait(timeout=max(5, int(deadline - time.monotonic()) + 5))
                container.reload()
                state = container.attrs.get("State", {})
                state["ExitCode"] = exit_status.get("StatusCode", state.get("ExitCode"))
            except (docker.errors.APIError, OSError) as exc:
                raise SandboxError(f"lost contact with the sandbox container: {docker_client.short(exc)}")
        summary = reader.summary()
        exit_code = None if timed_out else state.get("ExitCode")
        oom = bool(state.get("OOMKilled")) or (exit_code == 137 and summary.get("signal") in (9, None))
        return ExecuteResult(
            exit_code=exit_code,
            stdout=stdout.text(), stderr=stderr.text(),
            duration_ms=summary.get("duration_ms") or wall_ms,
            timed_out=timed_out, oom_killed=oom and not timed_out,
            stdout_truncated=stdout.truncated, stderr_truncated=stderr.truncated,
            backend=self.name, isolation=isolation_line(limits, copy),
            artifacts=reader.artifacts(limits),
        )


def isolation_line(limits: Limits, copy: bool) -> str:
    network = "network bridge (asked for)" if limits.network else "network none"
    skill = "skill copied in, write-protected" if copy else "skill mounted read-only"
    return (f"docker: uid {UID}, no capabilities, no-new-privileges, read-only root, {network}, "
            f"{limits.memory // 1024**2} MiB (no swap), {limits.pids} pids, {limits.cpus:g} CPU, "
            f"/tmp noexec {limits.tmp_size // 1024**2} MiB, {skill}")


def output_size(limits: Limits) -> int:
    """The output folder holds more than is returned, so over-cap files can still be listed."""
    return max(64 * 1024**2, 2 * limits.artifact_cap)


def trailer_cap(limits: Limits) -> int:
    # tar headers and padding: at most 3 blocks of 512 bytes per file, plus the listing itself.
    return limits.artifact_cap + limits.artifact_files * 2048 + 1024**2


def _send(raw, payload: bytes) -> None:
    try:
        raw.sendall(payload)
    except OSError:
        pass  # the container ended before reading everything (e.g. the script exited early)


class _StreamReader:
    """Demultiplexes Docker's attach stream into capped stdout/stderr, and splits off the trailer."""

    def __init__(self, stdout: OutputBuffer, stderr: OutputBuffer, marker: bytes, cap: int):
        self.stdout, self.stderr, self.marker, self.cap = stdout, stderr, marker, cap
        self._pending = b""  # stdout bytes that might be the start of the marker
        self.trailer: bytearray | None = None
        self.trailer_overflow = False

    def pump(self, raw, deadline: float) -> bool:
        """Read until the container closes the stream (True) or the deadline passes (False)."""
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
            except (TimeoutError, BlockingIOError, InterruptedError):
                continue
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

    def _frame(self, kind: int, data: bytes) -> None:
        if kind == 2:
            self.stderr.write(data)
            return
        if self.trailer is not None:
            self._trailer_add(data)
            return
        data = self._pending + data
        at = data.find(self.marker)
        if at >= 0:
            self.stdout.write(data[:at])
            self._pending = b""
            self.trailer = bytearray()
            self._trailer_add(data[at + len(self.marker):])
            return
        keep = len(self.marker) - 1
        self.stdout.write(data[:-keep] if len(data) > keep else b"")
        self._pending = data[-keep:] if len(data) > keep else data

    def _trailer_add(self, data: bytes) -> None:
        if len(self.trailer) + len(data) > self.cap:
            self.trailer_overflow = True
            return
        self.trailer += data

    def _flush(self) -> None:
        if self._pending:
            self.stdout.write(self._pending)
            self._pending = b""

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
        listed = self.summary().get("files") or []
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
            result.append(Artifact(path=path, size=size, data=data))
        return result


def tar_skill(root: Path) -> bytes:
    """The skill folder as a tar: regular files and folders; symlinks only when they stay inside it."""
    root = root.resolve()
    buf = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buf, mode="w:", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                path = Path(dirpath) / name
                real = path.resolve()
                if not real.is_file() or (real != root and root not in real.parents):
                    continue  # a link leaving the skill, a socket, a device: never sent
                total += real.stat().st_size
                if total > SKILL_COPY_CAP:
                    raise SandboxError(f"the skill folder {root} holds more than {SKILL_COPY_CAP // 1024**2} MiB; "
                                       "move large data out of it or run against a local Docker engine")
                info = tar.gettarinfo(str(real), arcname=str(path.relative_to(root)))
                info.uid = info.gid = UID
                info.uname = info.gname = ""
                with open(real, "rb") as fh:
                    tar.addfile(info, fh)
    return buf.getvalue()


def _kill(container) -> None:
    with contextlib.suppress(*docker_client.engine_errors()):  # already exited: removal is what matters
        container.kill()


def _remove(client, container_id: str) -> None:
    import docker.errors

    try:
        client.api.remove_container(container_id, force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker_client.engine_errors():
        return  # stays registered so the atexit sweep tries again; `ipyskills sandbox cleanup` is the backstop
    with _live_lock:
        _live.pop(container_id, None)


@atexit.register
def _remove_live_containers() -> None:
    with _live_lock:
        pending = list(_live.items())
    for container_id, client in pending:
        _remove(client, container_id)


def labelled_containers(client, all_owners: bool = False) -> list:
    """Our containers that no live process on this machine owns (or all of them with all_owners)."""
    containers = client.containers.list(all=True, filters={"label": f"{LABEL}=1"})
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
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup(client=None, all_owners: bool = False) -> list[str]:
    """Remove stray sandbox containers; returns their short ids."""
    client = client or docker_client.connect()
    try:
        strays = labelled_containers(client, all_owners)
    except docker_client.engine_errors() as exc:
        raise SandboxError(f"no Docker engine answers ({docker_client.short(exc)}): start the Docker engine "
                           "(e.g. `sudo dockerd &` or `sudo systemctl start docker`) or set DOCKER_HOST") from None
    removed = []
    for container in strays:
        _remove(client, container.id)
        removed.append(container.short_id)
    return removed
