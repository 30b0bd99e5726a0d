"""Local provisioning: a folder of unpacked wheels per requirement set, first on the run's PYTHONPATH.

A folder rather than a virtual environment, on purpose: the local backend runs scripts with this Python and
the packages it already has (that is its baseline), and a venv would hide them. The folder only adds what
is missing, resolved with everything this Python has pinned as constraints, so nothing it ships is
replaced under it. Folders live in the user's cache (`$XDG_CACHE_HOME/ipyskills/sites`, or
`/var/cache/ipyskills/sites` for root, whose runs use other uids that cannot enter /root), keyed by a hash
of the interpreter, its packages, the index settings and the requested set; one is written under a
temporary name (`.partial-<pid>-…`, removed by the next provisioning once that pid is gone) and renamed when
complete, so a crash never leaves a half-filled folder in use.

Tampering: the folder is made read-only, but a run as the same user could change its modes back. Where
runs cannot write it (root's runs use other uids; Landlock gives a run write access to its own folders
only), it is reused as it is. Elsewhere every file is checked against its wheel's RECORD hashes before
each reuse (and each RECORD against the digest the marker took when the folder was made), and a file that
is changed, added or missing means the folder is made again. That catches a planted module or a changed
file; a run that rewrites files, records and marker together is not caught, and neither is anything else
such a run may write as this user (its home, the kernel's own site-packages): without Landlock or Docker
the local backend is no boundary for the user's own files, and its isolation line says so.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

from ...errors import SandboxError
from ..owners import pid_alive
from ..scratch import cache_base, remove_tree, scratch_dir
from ..wheels import Target, compile_lock, index_fingerprint, install_target, normalize
from . import RESOLVE_POLICY, Progress, Provisioned, Timer, _quiet, missing_from
from .satisfied import all_present
from .budget import Budget
from .budget import check as check_budget
from . import undeclared
from .gpu import cpu_route
from .sdist import engine_builder, resolve_with_sdists

MARKER = ".ipyskills-site.json"  # written last: a folder without it is not used
_lock = threading.Lock()


def cache_root() -> Path:
    return cache_base() / "sites"


def run_interpreter() -> str:
    """The Python a local run starts: this process's interpreter, or the system python3 where the run's user
    cannot execute it (as root a run takes a fresh uid, and an interpreter under /root, a pyenv's say, is out
    of its reach; the run helper then falls back, see LocalBackend.python_fallback). Provisioning resolves
    for this interpreter and against its packages, not necessarily this process's."""
    from ..local.backend import SYSTEM_PATH, _python

    exe = _python()
    if os.geteuid() != 0 or _others_can_run(exe):
        return exe
    return shutil.which("python3", path=SYSTEM_PATH) or exe


def _others_can_run(path: str) -> bool:
    """Whether a user that is neither the owner nor in the group can execute `path`: every folder on the way
    (before and after resolving links) searchable by others, and the file executable by them."""
    real = os.path.realpath(path)
    try:
        for start in {os.path.dirname(os.path.abspath(path)), os.path.dirname(real)}:
            folder = start
            while True:
                if not os.stat(folder).st_mode & stat.S_IXOTH:
                    return False
                parent = os.path.dirname(folder)
                if parent == folder:
                    break
                folder = parent
        return bool(os.stat(real).st_mode & stat.S_IXOTH)
    except OSError:
        return False


# What the interpreter of a run imports, asked of it the way the run starts it: isolated (-I), so neither
# this process's PYTHONPATH nor a user site-packages counts, since a run's environment has neither.
_PRESENT = ("import importlib.metadata as m, json, sys\n"
            "found = {}\n"
            "for d in m.distributions():\n"
            "    name = d.metadata.get('Name')\n"
            "    if name:\n"
            "        found.setdefault(name, d.version)\n"
            "print(json.dumps({'path': sys.path, 'found': found, 'version': sys.version}))\n")
_present_cache: dict[str, tuple[tuple, dict[str, str], str]] = {}


def present_distributions(python: str | None = None) -> dict[str, str]:
    """normalised name -> version of what a local run's interpreter (`run_interpreter()` by default) can
    import. Asked once per interpreter and process, and again when one of its import folders changes."""
    return _present(python or run_interpreter())[0]


def _present(python: str) -> tuple[dict[str, str], str]:
    """(present_distributions, sys.version) of `python`."""
    cached = _present_cache.get(python)
    if cached is not None and cached[0] == _signature(cached[0]):
        return cached[1], cached[2]
    try:
        out = subprocess.run([python, "-I", "-c", _PRESENT], capture_output=True, text=True, timeout=60,
                             check=True, env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C.UTF-8"})
        data = json.loads(out.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise SandboxError(f"cannot ask the Python interpreter {python} what it has installed: {exc}") from None
    found: dict[str, str] = {}
    for name, version in data["found"].items():
        found.setdefault(normalize(name), version)
    _present_cache[python] = (_signature(tuple((p, None) for p in data["path"] if p)), found, data["version"])
    return found, data["version"]


def _signature(entries: tuple) -> tuple:
    """(folder, mtime) of each import folder: an install or removal there changes its folder's mtime."""
    out = []
    for folder, _ in entries:
        try:
            out.append((folder, os.stat(folder).st_mtime_ns))
        except OSError:
            out.append((folder, None))
    return tuple(out)


def ensure_site(specs: list[str], *, reasons: list[str], progress: Progress = _quiet,
                sdist_image: str | None = None, budget=None) -> Provisioned:
    """The folder for `specs` (made now when missing). `sdist_image`: the allow_sdist opt-in; a
    distribution without a wheel is built from its sdist in a throwaway container of that image (so it
    needs a Docker engine even on the local backend: the build code never runs on this machine)."""
    python = run_interpreter()
    present, version = _present(python)
    if all_present(specs, present):  # nothing to add: no index is asked (Binder, offline)
        return Provisioned(installed=[], site="", built=False, verified=False)
    constraints = "".join(f"{name}=={v}\n" for name, v in sorted(present.items()))
    key = hashlib.sha256(json.dumps([python, version, constraints, index_fingerprint(),
                                     sorted(set(specs)), RESOLVE_POLICY]).encode())
    site = cache_root() / key.hexdigest()[:16]
    with _lock:
        remove_dead_partials(site.parent)
        done = _read_marker(site)
        checked = done is not None and done and not runs_cannot_write()
        if checked:
            problem = tampered(site)
            if problem:
                progress(f"dependencies: {site} was changed since it was made ({problem}); making it again")
                _discard(site)
                done = None
        if done is not None:
            return Provisioned(installed=done, site=str(site) if done else "", built=False, verified=checked)
        with scratch_dir("built") as built:
            made = _provision(site, specs, constraints, present, reasons, progress,
                              (built, sdist_image) if sdist_image else None, budget or Budget(), python)
            made.verified = bool(made.site) and not runs_cannot_write()
            return made


def runs_cannot_write() -> bool:
    """True when no run can write the folders: root's runs use other uids, and Landlock confines a run's
    writes to its own folders."""
    if os.geteuid() == 0:
        return True
    from ..local.isolation import landlock_abi

    return landlock_abi() >= 1


def tampered(site: Path) -> str:
    """'' when every file in `site` is one its wheels' RECORD lists, with the hash and size recorded;
    else the first difference found."""
    expected: dict[str, tuple[str, str]] = {}
    try:
        made_with = json.loads((site / MARKER).read_text()).get("records") or {}
        records = sorted(site.glob("*.dist-info/RECORD"))
        if sorted(made_with) != [str(r.relative_to(site)) for r in records]:
            return "its list of installed wheels changed"
        for record in records:
            if _record_hash(str(record)) != made_with[str(record.relative_to(site))]:
                return f"{record.relative_to(site)} was rewritten"
            for line in record.read_text(encoding="utf-8").splitlines():
                path, _, rest = line.partition(",")
                digest, _, size = rest.partition(",")
                expected[os.path.normpath(path)] = (digest, size)
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return "a RECORD file or the folder's marker cannot be read"
    seen = 0
    for dirpath, dirnames, filenames in os.walk(site):
        for name in dirnames:
            if os.path.islink(os.path.join(dirpath, name)):
                return f"a link {os.path.relpath(os.path.join(dirpath, name), site)}"
        for name in filenames:
            rel = os.path.relpath(os.path.join(dirpath, name), site)
            if rel == MARKER:
                continue
            want = expected.get(rel)
            if want is None:
                return f"{rel} is not part of any installed wheel"
            seen += 1
            if rel.endswith(".dist-info/RECORD") or not want[0]:
                continue
            if _record_hash(os.path.join(dirpath, name)) != want[0]:
                return f"{rel} does not match its RECORD hash"
    missing = [p for p in expected if not p.endswith(".pyc") and not os.path.lexists(site / p)]
    return f"{missing[0]} is missing" if missing else ""


def _record_hash(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def _discard(site: Path) -> None:
    aside = Path(tempfile.mkdtemp(prefix=f".partial-{os.getpid()}-", dir=site.parent))
    try:
        os.rename(site, aside / "old")
    except OSError:
        pass
    remove_tree(aside)


def remove_dead_partials(root: Path) -> list[str]:
    """Half-made folders (`.partial-<pid>-…`) whose maker is gone."""
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        m = re.match(r"^\.partial-(\d+)-", entry.name)
        if m and entry.is_dir(follow_symlinks=False) and not pid_alive(int(m.group(1))):
            remove_tree(Path(entry.path))
            removed.append(entry.path)
    return removed


def _read_marker(site: Path) -> list[str] | None:
    try:
        return json.loads((site / MARKER).read_text())["installed"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _provision(site: Path, specs, constraints, present, reasons, progress, sdists, budget,
               python: str) -> Provisioned:
    """`sdists`: (folder for built wheels, image to build in), or None for wheels from the index only.
    `python`: the interpreter the runs start, which the wheels are for."""
    timer = Timer()
    target = Target.for_host(python)
    progress(f"dependencies: resolving {len(specs)} requirement(s) for this Python "
             f"({target.python_version}), wheels only{' (sdists built in a container)' if sdists else ''}: "
             f"{', '.join(specs)}")
    built, image = sdists if sdists is not None else (None, None)

    def resolve(specs, target):
        if built is None:
            return compile_lock(specs, target, constraints=_installable(constraints), log=progress)
        return resolve_with_sdists(specs, target, constraints=_installable(constraints), wheel_dir=built,
                                   builder=engine_builder(image, log=progress), log=progress)

    lock, specs = undeclared.complete(resolve(specs, target), specs, lambda more: resolve(more, target), progress)
    lock, target, gpu_note = cpu_route(lock, target, budget.allow_gpu, log=progress,
                                       resolve=lambda cpu: resolve(specs, cpu))
    new_lock, installed = missing_from(lock, present)
    check_budget(new_lock, installed, budget, progress, gpu_note)
    try:
        site.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(site.parent, 0o755)  # runs as other uids (root's case) must be able to read it
        staging = Path(tempfile.mkdtemp(prefix=f".partial-{os.getpid()}-", dir=site.parent))
    except OSError as exc:
        raise SandboxError(f"cannot create the dependency folder under {site.parent}: {exc.strerror}; set "
                           "IPYSKILLS_CACHE_DIR to a writable folder") from None
    try:
        if installed:
            progress(f"dependencies: installing {len(installed)} distribution(s): {', '.join(installed)}")
            install_target(new_lock, staging, target, log=progress, find_links=str(built) if built else None)
        else:
            progress("dependencies: everything needed is already installed here")
        (staging / ".lock").unlink(missing_ok=True)  # uv's world-writable lock file: no channel between runs
        records = {str(r.relative_to(staging)): _record_hash(str(r)) for r in staging.glob("*.dist-info/RECORD")}
        (staging / MARKER).write_text(json.dumps({"installed": installed, "specs": specs, "records": records}))
        os.chmod(staging, 0o755)
        for dirpath, dirnames, filenames in os.walk(staging):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                if not os.path.islink(path):
                    os.chmod(path, os.stat(path).st_mode | 0o444 | (0o111 if name in dirnames else 0))
        try:
            staging.rename(site)
        except OSError:  # another process finished the same folder first: use theirs
            if _read_marker(site) is None:
                raise
    finally:
        if staging.exists():
            remove_tree(staging)
    progress(f"dependencies: ready in {timer.seconds:.1f} s ({site})")
    return Provisioned(installed=installed, site=str(site) if installed else "", built=bool(installed),
                       seconds=timer.seconds, reasons=reasons)


def host_constraints() -> str:
    """What a local run's Python has, as constraints uv can resolve against (see `_installable`)."""
    present = present_distributions()
    return _installable("".join(f"{name}=={version}\n" for name, version in sorted(present.items())))


def _installable(constraints: str) -> str:
    """Constraints uv can use: drop the entries of distributions that live only here (editable installs,
    local builds), which the registry may not know."""
    keep = [line for line in constraints.splitlines() if "+" not in line.split("==", 1)[-1]]
    return "\n".join(keep) + "\n"
