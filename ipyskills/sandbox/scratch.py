"""Private scratch folders for provisioning: uv's working folder, build contexts, downloaded sdists.

Not the shared temp dir: a folder under /tmp has parents anyone may write, and uv reads a `uv.toml` or
`pyproject.toml` from its working folder's parents (a planted `/tmp/uv.toml` would choose the index). The
root is in the user's cache (`$IPYSKILLS_CACHE_DIR/scratch`, else `$XDG_CACHE_HOME/ipyskills/scratch`, or
`/var/cache/ipyskills/scratch` for root), mode 0700 and owned by this user, checked on every use. Each
folder is named for its owner's pid (`uv-<pid>-…`), so one left by a process that was killed (kill -9
mid-provisioning) is removed by the next provisioning or `ipyskills sandbox cleanup`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from ..errors import SandboxError
from .owners import pid_alive

_OWNED = re.compile(r"^[a-z]+-(\d+)-")
_swept = False
_sweep_lock = threading.Lock()


def cache_base() -> Path:
    """The user's ipyskills cache folder (sites and scratch live in it)."""
    if os.environ.get("IPYSKILLS_CACHE_DIR"):
        return Path(os.environ["IPYSKILLS_CACHE_DIR"])
    if os.geteuid() == 0:
        return Path("/var/cache/ipyskills")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ipyskills"


def scratch_root() -> Path:
    """The private root (made 0700 when missing); a SandboxError when it is not safely ours."""
    root = cache_base() / "scratch"
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = os.lstat(root)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            raise SandboxError(f"the scratch folder {root} is not a folder owned by this user: remove it, or "
                               "set IPYSKILLS_CACHE_DIR to a folder of your own")
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(root, 0o700)
    except OSError as exc:
        raise SandboxError(f"cannot use the scratch folder {root} ({exc.strerror or exc}): set "
                           "IPYSKILLS_CACHE_DIR to a writable folder of your own") from None
    return root


@contextlib.contextmanager
def scratch_dir(kind: str) -> Iterator[Path]:
    """A fresh private folder `<kind>-<pid>-…` under the scratch root, removed afterwards whatever happens."""
    path = make_scratch_dir(kind)
    try:
        yield path
    finally:
        remove_tree(path)


def make_scratch_dir(kind: str) -> Path:
    """A private folder the caller removes (with `remove_tree`)."""
    root = scratch_root()
    sweep_dead_once(root)
    return Path(tempfile.mkdtemp(prefix=f"{kind}-{os.getpid()}-", dir=root))


def remove_tree(path: Path) -> None:
    """Remove a folder even where a build left read-only folders in it."""
    def writable_then_retry(func, target, _exc):
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(target), 0o700)
            os.chmod(target, 0o700)
        with contextlib.suppress(OSError):
            func(target)

    shutil.rmtree(path, onerror=writable_then_retry)


def dead_owner_folders(root: Path | None = None) -> list[Path]:
    """Scratch folders whose owner process is gone."""
    root = root or cache_base() / "scratch"
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            m = _OWNED.match(entry.name)
            if m and entry.is_dir(follow_symlinks=False) and not pid_alive(int(m.group(1))):
                found.append(Path(entry.path))
    return found


def sweep_dead(root: Path | None = None) -> list[str]:
    """Remove what dead owners left; returns the folders removed."""
    removed = []
    for path in dead_owner_folders(root):
        remove_tree(path)
        if not path.exists():
            removed.append(str(path))
    return removed


def sweep_dead_once(root: Path) -> None:
    global _swept
    with _sweep_lock:
        if _swept:
            return
        _swept = True
    sweep_dead(root)
