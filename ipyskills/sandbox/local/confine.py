"""Host-side plans for the local backend's confinement: what Landlock lets a run read and write, a run-wide
memory cgroup where one can be made, and the removal of run folders whose owner died.

The child side (sandbox/local/isolation.py) applies the plan and reports what held; nothing here is assumed
to have worked.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import re
import subprocess
from pathlib import Path

from ..owners import pid_alive

# What any interpreter or program needs to start and work: system libraries and programs, the dynamic
# loader's cache, time zones, certificates, fonts, name lookups. Missing ones are skipped by the helper.
SYSTEM_READ = (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/timezone",
    "/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/fonts", "/etc/mime.types", "/etc/alternatives",
    "/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/etc/hosts", "/etc/resolv.conf", "/etc/host.conf",
    "/etc/gai.conf", "/etc/matplotlibrc",
    "/sys/devices/system/cpu", "/dev/urandom", "/dev/random",
    # The CPU quota, which joblib/loky (scikit-learn, pydeseq2, datamol...) reads to count CPUs after
    # checking that the file exists: a refused open() raised PermissionError out of every joblib-parallel call.
    "/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us",
)
SYSTEM_READ_GLOBS = ("/etc/python3*",)  # Debian's sitecustomize lives there
DEVICES = ("/dev/null", "/dev/zero", "/dev/full")
RUN_PREFIX = "ipyskills-local-"
_OWNER = re.compile(re.escape(RUN_PREFIX) + r"(\d+)-")


@functools.lru_cache(maxsize=8)
def interpreter_paths(python: str) -> tuple[str, ...]:
    """The prefixes and import path of `python` as it starts for a script (no PYTHONPATH, cwd /), asked
    once per process and interpreter: a venv's folder, its base installation, site-packages and .pth
    entries (an editable install's source folder among them)."""
    code = ("import sys, json; print(json.dumps([sys.executable, sys.prefix, sys.base_prefix, sys.exec_prefix, "
            "sys.base_exec_prefix, *sys.path]))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    found = [os.path.dirname(python)]
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=30, env=env, cwd="/",
                              check=False)
        found += json.loads(done.stdout) if done.returncode == 0 else []
    except (OSError, ValueError, subprocess.TimeoutExpired):
        pass
    found.append(os.path.dirname(os.path.realpath(python)))
    return tuple(found)


def _too_broad(path: str) -> bool:
    """A folder that would open up the user's files: /, and any folder that holds the user's home."""
    home = os.path.realpath(os.path.expanduser("~"))
    real = os.path.realpath(path)
    return real == "/" or home == real or home.startswith(real.rstrip("/") + "/")


def landlock_plan(work: Path, env: dict[str, str], programs: list[str], block_tcp: bool,
                  run_uid: int | None = None) -> dict:
    """Reads: the system folders, each Python's prefixes and import path, PYTHONPATH/NODE_PATH of the run;
    reads and writes: the run folder (skill copy, home, tmp, outputs, workspace), and /dev/shm when it is
    the run's own tmpfs or, without one, when the script runs as `run_uid` (a uid of its own: what it leaves
    in the host's /dev/shm is found by owner and removed after the run)."""
    read = _read_paths(tuple(p for p in programs if p), env.get("PYTHONPATH", ""), env.get("NODE_PATH", ""))
    return {"read": list(read), "write": [str(work)], "devices": list(DEVICES), "block_tcp": block_tcp,
            "run_uid": run_uid}


@functools.lru_cache(maxsize=32)
def _read_paths(programs: tuple[str, ...], pythonpath: str, nodepath: str) -> tuple[str, ...]:
    read: list[str] = list(SYSTEM_READ)
    for pattern in SYSTEM_READ_GLOBS:
        read += sorted(glob.glob(pattern))
    for program in programs:
        read.append(os.path.dirname(program))
        if os.path.basename(program).startswith("python"):
            read += interpreter_paths(program)
    for value in (pythonpath, nodepath):
        read += [p for p in value.split(os.pathsep) if p]
    seen: set[str] = set()
    plan_read = []
    for path in read:
        if path and os.path.isabs(path) and path not in seen and not _too_broad(path):
            seen.add(path)
            plan_read.append(path)
    return tuple(plan_read)


# -- run-wide memory ---------------------------------------------------------------------------------------

class RunCgroup:
    """A cgroup v2 folder for one run with memory.max (and memory.swap.max 0), made under the cgroup this
    process is in when that cgroup delegates the memory controller to us; `error` says why not otherwise.
    A limit of 0 makes none (the confinement steps switched off for a benchmark).

    Only the refusal path is exercised by this project's tests: their machine's memory controller is on
    cgroup v1 (no cgroup2 mounted), where this finds nothing and the isolation line says NOT limited."""

    def __init__(self, limit: int, name: str):
        self.path: str | None = None
        self.error = ""
        if limit <= 0:
            self.error = "not tried"
            return
        try:
            base = _own_cgroup_v2()
            if base is None:
                raise OSError("no cgroup v2 with the memory controller here")
            parent = os.path.join(base, "ipyskills")
            if not os.path.isdir(parent):
                os.mkdir(parent)
            for folder in (base, parent):
                with open(os.path.join(folder, "cgroup.subtree_control")) as fh:
                    if "memory" not in fh.read().split():
                        with open(os.path.join(folder, "cgroup.subtree_control"), "w") as out:
                            out.write("+memory")
            path = os.path.join(parent, name)
            os.mkdir(path)
            self.path = path
            with open(os.path.join(path, "memory.max"), "w") as fh:
                fh.write(str(limit))
            try:
                with open(os.path.join(path, "memory.swap.max"), "w") as fh:
                    fh.write("0")
            except OSError:
                pass
        except OSError as exc:
            self.error = exc.strerror or str(exc)
            self.remove()

    @property
    def procs(self) -> str | None:
        return os.path.join(self.path, "cgroup.procs") if self.path else None

    def oom_killed(self) -> bool:
        if not self.path:
            return False
        try:
            with open(os.path.join(self.path, "memory.events")) as fh:
                return any(line.split()[0] == "oom_kill" and int(line.split()[1]) > 0 for line in fh if line.strip())
        except (OSError, ValueError, IndexError):
            return False

    def remove(self) -> None:
        if self.path:
            try:
                os.rmdir(self.path)
            except OSError:
                pass
            self.path = None


def _own_cgroup_v2() -> str | None:
    """The cgroup v2 folder of this process, when cgroup2 is mounted and offers the memory controller."""
    try:
        with open("/proc/self/cgroup") as fh:
            rel = next((line.strip()[3:] for line in fh if line.startswith("0::")), None)
        with open("/proc/self/mounts") as fh:
            mounts = [line.split()[1] for line in fh if line.split()[2:3] == ["cgroup2"]]
    except OSError:
        return None
    for mount in mounts:
        folder = os.path.join(mount, (rel or "/").lstrip("/"))
        try:
            with open(os.path.join(folder, "cgroup.controllers")) as fh:
                if "memory" in fh.read().split():
                    return folder
        except OSError:
            continue
    return None


# -- leftovers ---------------------------------------------------------------------------------------------

def run_folder_prefix() -> str:
    """The name prefix of this process's run folders: the owner's pid is in the name, so a later process
    can tell a dead owner's folder from a live one's."""
    return f"{RUN_PREFIX}{os.getpid()}-"


def stale_run_folders(roots=None) -> list[str]:
    """Run folders (and run cgroups) whose owner process is gone, in the temp dirs runs are made in."""
    import tempfile

    roots = roots or {os.environ.get("TMPDIR") or tempfile.gettempdir(), "/tmp"}
    found = []
    for root in roots:
        try:
            entries = list(os.scandir(root))
        except OSError:
            continue
        for entry in entries:
            match = _OWNER.match(entry.name)
            if not match or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                if os.geteuid() != 0 and entry.stat(follow_symlinks=False).st_uid != os.geteuid():
                    continue
            except OSError:
                continue
            if not pid_alive(int(match.group(1))):
                found.append(entry.path)
    base = _own_cgroup_v2()
    if base and os.path.isdir(os.path.join(base, "ipyskills")):
        for entry in os.scandir(os.path.join(base, "ipyskills")):
            match = _OWNER.match(entry.name)
            if match and not pid_alive(int(match.group(1))):
                found.append(entry.path)
    return found


def remove_stale(remove_tree) -> list[str]:
    """Remove what `stale_run_folders` finds; returns what is gone."""
    gone = []
    for path in stale_run_folders():
        try:
            if os.path.isfile(os.path.join(path, "cgroup.procs")):
                os.rmdir(path)
            else:
                remove_tree(Path(path))
        except OSError:
            continue
        if not os.path.lexists(path):
            gone.append(path)
    return gone


_swept = False


def remove_stale_once(remove_tree) -> None:
    """At the first run of this process: what dead owners left."""
    global _swept
    if not _swept:
        _swept = True
        remove_stale(remove_tree)

