"""Helpers for the local backend tests: real skill folders on disk, one-call runs, an ordinary user (uid
1000, as on Binder) with a venv of its own, and probes of what this kernel lets a process do."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import textwrap
from contextlib import contextmanager
from pathlib import Path

import pytest

from ipyskills.sandbox.local.backend import LocalBackend
from ipyskills.sandbox.policy import Limits
from ipyskills.sandbox.request import RunRequest

AS_ROOT = os.geteuid() == 0
REPO = str(Path(__file__).resolve().parents[2])
USER_UID = 1000
SKILL_MD = "---\nname: {name}\ndescription: A skill used by the sandbox tests.\n---\nBody.\n"


class SkillFactory:
    """Makes skill folders under the system temp dir (reachable by uid 65534, like a real install would
    be) and removes them afterwards."""

    def __init__(self):
        self.made: list[Path] = []

    def __call__(self, files: dict[str, str | bytes], name: str = "attack") -> Path:
        base = Path(tempfile.mkdtemp(prefix="ipyskills-test-"))
        os.chmod(base, 0o755)
        self.made.append(base)
        skill = base / name
        skill.mkdir(mode=0o755)
        (skill / "SKILL.md").write_text(SKILL_MD.format(name=name))
        for rel, content in files.items():
            path = skill / rel
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
            os.chmod(path, 0o755 if rel.endswith(".sh") else 0o644)
        return skill

    def cleanup(self):
        for base in self.made:
            shutil.rmtree(base, ignore_errors=True)


def run(skill: Path, script: str, args=(), stdin: bytes = b"", env=None, **limits):
    request = RunRequest(
        skill_name=skill.name,
        skill_dir=skill,
        script=script,
        args=list(args),
        stdin=stdin,
        limits=Limits(**{"timeout": 20, **limits}),
        env=dict(env or {}),
    )
    return LocalBackend().run(request)


class RunDirs:
    """Records the run folders the local backend creates in this process (other processes on the machine
    may be running it too), so a test can check that every one of them is gone."""

    def __init__(self, monkeypatch):
        from ipyskills.sandbox.local import backend as local_backend

        self.made: list[str] = []
        real = tempfile.mkdtemp

        def recording_mkdtemp(*args, **kwargs):
            path = real(*args, **kwargs)
            if os.path.basename(path).startswith("ipyskills-local-"):
                self.made.append(path)
            return path

        monkeypatch.setattr(local_backend.tempfile, "mkdtemp", recording_mkdtemp)

    def left_behind(self) -> list[str]:
        return [p for p in self.made if os.path.lexists(p)]


def pids_alive(pids) -> list[int]:
    """Those of `pids` that still exist and are not zombies."""
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if state != "Z":
            alive.append(pid)
    return alive


# -- an ordinary user ------------------------------------------------------------------------------------

def ensure_user(uid: int = USER_UID) -> None:
    """An account with `uid` (created when none exists, so a fresh CI machine gets one too)."""
    try:
        pwd.getpwuid(uid)
    except KeyError:
        subprocess.run(["useradd", "-m", "-u", str(uid), f"ipyskills-test-{uid}"], check=True)


@contextmanager
def user_venv(extra_paths=(), uid: int = USER_UID):
    """The python of a venv made by `uid` from /usr/bin/python3 in a temp folder of its own (removed
    afterwards), with this checkout (like an editable install) and `extra_paths` on its path."""
    if not AS_ROOT or not os.path.exists("/usr/bin/python3"):
        import pytest

        pytest.skip("needs root (to act as an ordinary user) and /usr/bin/python3")
    ensure_user(uid)
    base = Path(tempfile.mkdtemp(prefix=f"ipyskills-test-venv-{uid}-", dir="/tmp"))
    try:
        os.chown(base, uid, uid)
        venv = base / "venv"
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True, user=uid,
                       group=uid, extra_groups=[], cwd="/")
        site = next(venv.glob("lib/python3*/site-packages"))
        (site / "ipyskills-repo.pth").write_text("".join(f"{p}\n" for p in (REPO, *extra_paths)))
        yield venv / "bin" / "python"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_user(uid: int = USER_UID, **extra) -> dict:
    """subprocess keyword arguments that run a program as `uid`, with a plain environment."""
    env = {"PATH": "/usr/bin:/bin", "HOME": pwd.getpwuid(uid).pw_dir, **extra.pop("env", {})}
    return {"user": uid, "group": uid, "extra_groups": [], "cwd": "/", "env": env, **extra}


RUN_DRIVER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from ipyskills.sandbox.local.backend import LocalBackend
    from ipyskills.sandbox.policy import Limits
    from ipyskills.sandbox.request import RunRequest
    skill, script, args, limits = json.loads(sys.argv[1])
    result = LocalBackend().run(RunRequest(skill_name=Path(skill).name, skill_dir=Path(skill), script=script,
                                           args=args, limits=Limits(**limits)))
    print(json.dumps({"stdout": result.stdout, "stderr": result.stderr, "isolation": result.isolation,
                      "exit_code": result.exit_code}))
""")


def run_elsewhere(prefix: list[str], skill: Path, script: str, args=(), timeout=90, **popen) -> dict:
    """Run the backend in another process (`prefix` is the python, maybe behind a launcher), as another
    user or under a stricter kernel policy; returns the result's stdout, stderr, isolation and exit_code."""
    spec = json.dumps([str(skill), script, list(args), {"timeout": 30}])
    done = subprocess.run([*prefix, "-c", RUN_DRIVER, spec], capture_output=True, text=True, check=False,
                          timeout=timeout, **popen)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# -- what the kernel allows ------------------------------------------------------------------------------

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000

_TRY_UNSHARE = textwrap.dedent("""
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    flags = int(sys.argv[1]) | (0x10000000 if os.geteuid() != 0 else 0)  # unprivileged: through a user ns
    print("" if libc.unshare(flags) == 0 else os.strerror(ctypes.get_errno()))
""")


def namespace_refusal(flags: int, prefix=("/usr/bin/python3",), **popen) -> str:
    """'' when a process started with `prefix` (as a user given in `popen`) may unshare `flags` (through a
    user namespace when not root), else the kernel's refusal (e.g. 'Operation not permitted')."""
    done = subprocess.run([*prefix, "-c", _TRY_UNSHARE, str(flags)], capture_output=True, text=True,
                          check=True, timeout=30, **popen)
    return done.stdout.strip()


def landlock_abi(prefix=None, **popen) -> int:
    """The kernel's Landlock ABI as the backend's helper finds it: here, or in a process started with
    `prefix` (a launcher that takes a python)."""
    import importlib.util

    helper = Path(REPO) / "ipyskills" / "sandbox" / "local" / "isolation.py"
    if prefix:
        code = f"import runpy; print(runpy.run_path({str(helper)!r})['landlock_abi']())"
        done = subprocess.run([*prefix, "-c", code], capture_output=True, text=True, check=True, timeout=30, **popen)
        return int(done.stdout)
    spec = importlib.util.spec_from_file_location("ipyskills_local_isolation", helper)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.landlock_abi()


# A launcher for "a kernel without Landlock": a seccomp filter that answers the three Landlock system
# calls (444-446 on x86_64 and aarch64) with ENOSYS, as a kernel built without Landlock does.
NO_LANDLOCK = textwrap.dedent("""
    import ctypes, os, sys
    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]
    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]
    code = (Filter * 5)(
        Filter(0x20, 0, 0, 0),                  # load the system call number
        Filter(0x35, 0, 2, 444),                # below 444: allow
        Filter(0x25, 1, 0, 446),                # above 446: allow
        Filter(0x06, 0, 0, 0x00050000 | 38),    # landlock_*: ENOSYS
        Filter(0x06, 0, 0, 0x7FFF0000),         # allow
    )
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(38, 1, 0, 0, 0)  # no-new-privileges, which an unprivileged seccomp filter needs
    if libc.prctl(22, 2, ctypes.byref(Program(5, code)), 0, 0) != 0:
        sys.exit("seccomp: " + os.strerror(ctypes.get_errno()))
    os.execv(sys.argv[1], sys.argv[1:])
""")


def without_landlock(python: str) -> list[str]:
    """A command prefix that starts `python` where Landlock is missing (see NO_LANDLOCK)."""
    return [python, "-c", NO_LANDLOCK, python]


# A launcher for "root without some namespaces": a user namespace that maps every uid (so the backend
# can still switch to a run uid of its own) whose quota for the named kinds of namespace is 0. The
# quota is a setting of that namespace only; the host is untouched.
NO_NAMESPACES = textwrap.dedent("""
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    kinds, program = sys.argv[1].split(","), sys.argv[2:]
    ready_r, ready_w = os.pipe()
    mapped_r, mapped_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        if libc.unshare(0x10000000) != 0:
            os._exit(90)
        os.write(ready_w, b"x")
        os.read(mapped_r, 1)  # the parent writes the id maps (a process cannot map uids it does not hold)
        for kind in kinds:
            with open(f"/proc/sys/user/max_{kind}_namespaces", "w") as fh:
                fh.write("0")
        os.execv(program[0], program)
    os.read(ready_r, 1)
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{pid}/{name}", "w") as fh:
            fh.write("0 0 4294967295\\n")
    os.write(mapped_w, b"x")
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
""")


def without_namespaces(kinds: str, python: str) -> list[str]:
    """A command prefix that starts `python` as root in a user namespace where `kinds` (e.g. 'mnt' or
    'net,pid,mnt') cannot be created."""
    return [python, "-c", NO_NAMESPACES, kinds, python]


def assert_network_blocked_where_possible(iso: str, connected: bool, seen: list, refusal: str, abi: int) -> None:
    """A run without --network: blocked by a network namespace wherever this kernel lets the run's user
    make one (`refusal` == ''), else by the backend's seccomp filter (no socket but AF_UNIX), with
    Landlock's TCP rules on top where it has them (ABI 4); only where the filter is refused too may the
    line say NOT blocked, and then the connection really went through."""
    import time

    if not refusal:
        assert "network: none (" in iso, iso
    elif "network: none, no socket but AF_UNIX can be made (seccomp filter" in iso:
        assert ("TCP connect and bind also denied by Landlock" in iso) == (abi >= 4), iso
    elif abi >= 4:
        assert "network: TCP connect and bind denied (Landlock" in iso, iso
        assert "network other than TCP, e.g. UDP" in iso
    else:
        assert "network: NOT blocked" in iso, iso
        assert connected  # the truth behind "NOT blocked"
        return
    assert not connected
    time.sleep(0.3)
    assert seen == []


def _index_reachable() -> bool:
    import urllib.request

    try:
        urllib.request.urlopen("https://pypi.org/simple/six/", timeout=10).close()
        return True
    except OSError:  # URLError and timeouts are OSErrors
        return False


needs_index = pytest.mark.skipif(not _index_reachable(), reason="no package index reachable from this host")
