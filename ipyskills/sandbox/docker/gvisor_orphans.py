"""Processes a gVisor container leaves on this machine when its start fails, and their removal.

Measured with this runsc (Debian 0.0~20240729) on Docker 20.10: when `runsc start` fails (the image has no
`python3` to exec, say), the engine's clean-up asks runsc to delete the container, and that fails
("failed to delete filestore file .../.gvisor.filestore.<id>: no such file or directory"). The engine then
forgets the container, but containerd keeps its task (STOPPED), runsc keeps its state, and the container's
`containerd-shim-runc-v2 -id <id>` process stays, holding them: one stray process per failed start, for
good. (An earlier run of the same runsc left `runsc-sandbox` and `runsc-gofer` running as well.) Ending
the shim is what clears it: containerd notices, runs the shim's own delete (which now succeeds) and drops
the task; runsc's state and the bundle go with it.

`reap(id)` does that right after a failed start, for a container the engine no longer has; `orphans()` and
`reap_orphans()` find such processes of dead containers for `ipyskills sandbox cleanup`. Only processes of
the engine's gVisor runtime are touched: a shim or runsc process whose container id the engine does not
know, whose bundle's options.json names the engine's `ipyskills-runsc` runtime. The shim runs as the
engine's user (root for a rootful engine), so a user who is not may see these processes but not end them;
the error of the failed run then says so, and `sudo ipyskills sandbox cleanup` removes them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from .runtime import GVISOR_RUNTIME

PROC = Path("/proc")
_ID = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
TERM_WAIT = 5.0  # seconds the shim gets to go after SIGTERM (measured: under 1 s) before SIGKILL
DOCKER_STATE_DIR = Path("/var/run/docker/runtime-runc/moby")  # runsc's --root under Docker's default exec root
ORPHAN_AGE = 10.0  # seconds a process of an unknown container must have lived to count as an orphan


@dataclass(frozen=True)
class Leftover:
    pid: int
    name: str  # containerd-shim-runc-v2, runsc, runsc-sandbox, runsc-gofer
    container_id: str
    bundle: str  # the container's bundle folder ("" when not known)

    def describe(self) -> str:
        return f"{self.name} (pid {self.pid}) of container {self.container_id[:12]}"


def _cmdline(pid: int) -> list[str]:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _name(args: list[str]) -> str:
    return os.path.basename(args[0]) if args else ""


def _container_id(name: str, args: list[str]) -> str:
    """The container a shim (`-id ID`) or a runsc process (ID in its arguments or paths) belongs to."""
    if name.startswith("containerd-shim"):
        for flag, value in zip(args, args[1:]):
            if flag in ("-id", "--id") and _ID.fullmatch(value):
                return value
        return ""  # a shim serving several containers (not Docker's) is never one of these
    found = {m.group(0) for a in args[1:] for m in _ID.finditer(a)}
    return found.pop() if len(found) == 1 else ""


def _bundle(pid: int, name: str, args: list[str]) -> str:
    for arg in args:
        if arg.startswith("--bundle="):
            return arg.split("=", 1)[1]
    if name.startswith("containerd-shim"):  # the shim runs in its bundle folder
        try:
            return os.readlink(PROC / str(pid) / "cwd")
        except OSError:
            return ""
    return ""


def _holds(name: str, args: list[str]) -> bool:
    """A process that holds a container: its shim (not the shim's `delete` command, which is containerd
    clearing it up), runsc's sandbox and gofer. Short runsc commands (`runsc ... delete`, `state`, `wait`)
    and the runtime's wrapper script are not: they end by themselves."""
    if name.startswith("containerd-shim"):
        return args[-1:] != ["delete"]
    return name in ("runsc-sandbox", "runsc-gofer")


def _related(name: str, args: list[str]) -> bool:
    return (name.startswith(("containerd-shim", "runsc"))
            or (len(args) > 1 and os.path.basename(args[1]) == GVISOR_RUNTIME))  # /bin/sh <the wrapper>


def processes(container_id: str | None = None, everything: bool = False) -> list[Leftover]:
    """The processes holding containers on this machine (of one container, or of any), as far as /proc
    shows; with `everything`, also the short-lived shim and runsc commands and the runtime's wrapper."""
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        args = _cmdline(pid)
        name = _name(args)
        if not (_related(name, args) if everything else _holds(name, args)):
            continue
        cid = _container_id(name, args)
        if not cid or (container_id is not None and cid != container_id):
            continue
        found.append(Leftover(pid, name, cid, _bundle(pid, name, args)))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0:1] != ["Z"]  # a zombie has ended


def _end(leftovers: list[Leftover], wait: float) -> list[Leftover]:
    """SIGTERM the shims first (containerd then clears the task, and runsc's sandbox and gofer go with it),
    then SIGKILL whatever is still there. Returns what could not be ended (no permission, or it lingered)."""
    denied = []
    order = sorted(leftovers, key=lambda p: not p.name.startswith("containerd-shim"))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        sent = False
        for item in order:
            if item in denied or not _alive(item.pid):
                continue
            if sig == signal.SIGTERM and not item.name.startswith("containerd-shim"):
                continue  # the shim's delete ends these; killed below if they outlive it
            try:
                os.kill(item.pid, sig)
                sent = True
            except ProcessLookupError:
                pass
            except PermissionError:
                denied.append(item)
        deadline = time.monotonic() + (wait if sent else 0.0)
        while time.monotonic() < deadline and any(_alive(p.pid) for p in order if p not in denied):
            time.sleep(0.05)
    return [p for p in order if _alive(p.pid)]


def reap(container_id: str, wait: float = TERM_WAIT) -> list[Leftover]:
    """End the shim and runsc processes of `container_id`, a gVisor container whose start failed and that
    the engine has removed. Returns the ones still running (this user may not end them)."""
    found = processes(container_id)
    # A start that failed in `runsc create` (the sandbox killed at its memory limit) leaves no process,
    # only the two files, in the state folder of Docker's default exec root.
    return _end_and_tidy(found, wait, {(container_id, DOCKER_STATE_DIR)})


def _end_and_tidy(found: list[Leftover], wait: float, state_dirs: set = frozenset()) -> list[Leftover]:
    """_end, then the files runsc keeps for each container none of whose processes is left."""
    state_dirs = {*state_dirs, *((p.container_id, d) for p in found if (d := _state_dir(p)) is not None)}
    left = _end(found, wait)
    for container_id, folder in state_dirs:
        if os.path.isdir(folder) and not any(p.container_id == container_id for p in left):
            _remove_state_files(folder, container_id)
    return left


def _state_dir(item: Leftover) -> Path | None:
    """runsc's state folder for the container: options.json's root plus the containerd namespace."""
    if not item.name.startswith("containerd-shim") or not item.bundle:
        return None
    try:
        root = json.loads((Path(item.bundle) / "options.json").read_text()).get("root")
    except (OSError, ValueError):
        return None
    args = _cmdline(item.pid)
    namespace = next((v for f, v in zip(args, args[1:]) if f in ("-namespace", "--namespace")), "")
    return Path(root) / namespace if root and namespace and "/" not in namespace else None


def _remove_state_files(folder: Path, container_id: str) -> None:
    """The empty lock file and the stale socket runsc keeps for the container after its delete (a
    container that ran leaves none): removed once its state file is gone."""
    if os.path.exists(folder / f"{container_id}_sandbox:{container_id}.state"):
        return
    for name in (f"{container_id}_sandbox:{container_id}.lock", f"runsc-{container_id}.sock"):
        try:
            (folder / name).unlink()
        except OSError:
            pass


def _started_ago(pid: int) -> float:
    try:
        ticks = int((PROC / str(pid) / "stat").read_text().rpartition(")")[2].split()[19])
        uptime = float((PROC / "uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return uptime - ticks / os.sysconf("SC_CLK_TCK")


def _of_runtime(bundle: str, docker_root: str) -> bool:
    """The bundle's container ran under this engine's gVisor runtime (Docker 20.10 writes the runtime's
    wrapper as <DockerRootDir>/runtimes/<name> and names it in options.json)."""
    try:
        options = json.loads((Path(bundle) / "options.json").read_text())
    except (OSError, ValueError):
        return False
    binary = str(options.get("binary_name", ""))
    return os.path.basename(binary) == GVISOR_RUNTIME and (not docker_root or binary.startswith(docker_root + "/"))


def orphans(client) -> list[Leftover]:
    """gVisor shim and runsc processes of containers this engine no longer has (older than ORPHAN_AGE, so
    a container being created or removed right now is not one). Empty for an engine on another machine."""
    import docker.errors

    from . import client as docker_client

    if not docker_client.is_local(client):
        return []
    try:
        docker_root = str(client.info().get("DockerRootDir") or "")
    except docker_client.engine_errors():
        return []
    found, known = [], {}
    for item in processes():
        if _started_ago(item.pid) < ORPHAN_AGE or not _of_runtime(item.bundle, docker_root):
            continue
        if item.container_id not in known:
            try:
                client.api.inspect_container(item.container_id)
                known[item.container_id] = True
            except docker.errors.NotFound:
                known[item.container_id] = False
            except docker_client.engine_errors():
                return []  # the engine does not answer: nothing can be judged an orphan now
        if not known[item.container_id]:
            found.append(item)
    return found


def reap_orphans(client, wait: float = TERM_WAIT) -> tuple[list[Leftover], list[Leftover]]:
    """(ended, still running) for the orphans() of this engine."""
    found = orphans(client)
    left = _end_and_tidy(found, wait) if found else []
    return [p for p in found if p not in left], left


def unended_note(left: list[Leftover]) -> str:
    if not left:
        return ""
    return (f"; gVisor left {len(left)} process(es) of it that this user may not end "
            f"({', '.join(p.describe() for p in left)}): `sudo ipyskills sandbox cleanup` removes them")
