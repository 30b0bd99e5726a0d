"""Host files and folders staged into a run's workspace (`--input PATH`, `inputs=[...]`), and artifacts
saved back to a host folder (`--save DIR`, `save_to=`).

Staging: each input lands at the top of the workspace under its own base name (a folder with its tree).
Links are not followed out: inside a folder, a symbolic link is taken only when it resolves inside that
folder (as the file it names), otherwise it is left out and counted; the path the caller names may itself
be a link (that is the caller's choice). Only regular files and folders are staged. The total is capped
(`Limits.input_cap`); a missing path, two inputs with the same base name, or a total over the cap is a
SandboxError before anything starts.

Saving: every returned artifact is written under the target folder at its own relative path, confined to
that folder (no absolute names, no `..`, no writing through a link), and never over an existing file: a
clash gets a free name (`report (1).md`) and a note says so, unless `overwrite=True`.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..errors import SandboxError

MAX_INPUT_FILES = 10_000
SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".ipynb_checkpoints"}


@dataclass
class StagedFile:
    rel: str  # '/'-separated path in the workspace
    source: Path | None  # None for a folder
    size: int = 0


@dataclass
class StagedInputs:
    """What goes into the workspace before the script starts."""

    files: list[StagedFile] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # the top-level names, as the script sees them
    skipped: int = 0  # links leaving their folder, sockets, devices: not staged
    total: int = 0

    def __bool__(self) -> bool:
        return bool(self.files)

    def tar(self, uid: int = 1000) -> bytes:
        """The inputs as a tar (folders and regular files, owned by `uid`, writable by it)."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:", format=tarfile.PAX_FORMAT) as tar:
            for f in self.files:
                info = tarfile.TarInfo(f.rel)
                info.uid = info.gid = uid
                if f.source is None:
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                    continue
                info.size, info.mode = f.size, 0o644
                with open(f.source, "rb") as fh:
                    tar.addfile(info, _Exactly(fh, f.size))
        return buf.getvalue()

    def copy_into(self, dest: Path) -> None:
        """Write the inputs under `dest` (the workspace, which exists)."""
        for f in self.files:
            target = dest / f.rel
            if f.source is None:
                target.mkdir(mode=0o755, exist_ok=True)
                continue
            with open(f.source, "rb") as src, open(target, "xb") as out:
                left = f.size
                while left > 0:
                    chunk = src.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    out.write(chunk)
                    left -= len(chunk)


def stage_inputs(paths, cap: int) -> StagedInputs:
    """Check and list the inputs; raises SandboxError saying what to fix."""
    staged = StagedInputs()
    if paths is None:
        return staged
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    seen: dict[str, Path] = {}
    for raw in paths:
        if not isinstance(raw, (str, os.PathLike)):
            raise SandboxError(f"inputs must be file or folder paths, got {raw!r}")
        path = Path(os.path.expanduser(os.fspath(raw)))
        if not path.exists():
            raise SandboxError(f"input {os.fspath(raw)!r} does not exist (looked in {Path.cwd()}); "
                               "give a file or folder path")
        real = path.resolve()
        name = path.name if path.name not in ("", ".", "..") else real.name
        if not name:
            raise SandboxError(f"input {os.fspath(raw)!r} has no name to stage it under; name a folder inside it")
        if name in seen:
            raise SandboxError(f"two inputs would both be staged as {name!r} ({seen[name]} and {path}); "
                               "rename one, or put them in a folder and give the folder")
        seen[name] = path
        staged.names.append(name)
        if real.is_dir():
            _stage_folder(staged, real, name, cap)
        elif real.is_file():
            _add_file(staged, real, name, cap)
        else:
            raise SandboxError(f"input {os.fspath(raw)!r} is not a regular file or folder")
    return staged


def _add_file(staged: StagedInputs, real: Path, rel: str, cap: int) -> None:
    size = real.stat().st_size
    staged.total += size
    if staged.total > cap:
        raise SandboxError(f"the inputs hold more than the {cap:,} byte cap for one run (at {rel!r}); "
                           "give fewer or smaller files, or raise input_cap (inputs are copied into the "
                           "sandbox's workspace)")
    if len(staged.files) >= MAX_INPUT_FILES:
        raise SandboxError(f"the inputs hold more than {MAX_INPUT_FILES:,} files; give a smaller folder")
    staged.files.append(StagedFile(rel, real, size))


def _stage_folder(staged: StagedInputs, root: Path, name: str, cap: int) -> None:
    staged.files.append(StagedFile(name, None))
    for dirpath, dirnames, filenames in os.walk(root):  # os.walk does not descend into linked folders
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        base = Path(dirpath)
        rel_dir = base.relative_to(root).as_posix()
        prefix = name if rel_dir == "." else f"{name}/{rel_dir}"
        for d in list(dirnames):
            if (base / d).is_symlink():
                dirnames.remove(d)
                staged.skipped += 1
                continue
            staged.files.append(StagedFile(f"{prefix}/{d}", None))
        for fname in sorted(filenames):
            full = base / fname
            try:
                st = full.lstat()
                if stat.S_ISLNK(st.st_mode):
                    target = full.resolve()
                    if root not in target.parents or not target.is_file():
                        staged.skipped += 1  # a link out of the folder is never followed
                        continue
                elif not stat.S_ISREG(st.st_mode):
                    staged.skipped += 1
                    continue
            except OSError:
                staged.skipped += 1
                continue
            _add_file(staged, full.resolve(), f"{prefix}/{fname}", cap)


class _Exactly:
    """A file read as exactly `size` bytes (zero-padded if it shrank), so the tar stays well-formed."""

    def __init__(self, fh, size):
        self.fh, self.left = fh, size

    def read(self, n=-1):
        n = self.left if n is None or n < 0 else min(n, self.left)
        data = self.fh.read(n) if n else b""
        data += b"\0" * (n - len(data))
        self.left -= len(data)
        return data


# -- saving artifacts to the host -------------------------------------------------------------------------

def safe_relative(name: str) -> PurePosixPath:
    """An artifact's name as a relative path that stays inside a folder; raises SandboxError otherwise."""
    if not name or "\0" in name:
        raise SandboxError(f"artifact name {name!r} cannot be saved")
    pure = PurePosixPath(name.replace("\\", "/"))
    parts = [p for p in pure.parts if p not in ("", ".")]
    if pure.is_absolute() or not parts or any(p == ".." for p in parts) or ":" in parts[0]:
        raise SandboxError(f"artifact name {name!r} leaves the target folder; not saved")
    return PurePosixPath(*parts)


def free_name(target: Path) -> Path:
    """`target`, or `stem (1).suffix`, `stem (2).suffix`, ... when it exists."""
    if not os.path.lexists(target):
        return target
    stem, suffix = target.stem, target.suffix
    for n in range(1, 10_000):
        candidate = target.with_name(f"{stem} ({n}){suffix}")
        if not os.path.lexists(candidate):
            return candidate
    raise SandboxError(f"no free name next to {target}")


def write_confined(folder: Path, rel: PurePosixPath, data: bytes, overwrite: bool = False) -> tuple[Path, bool]:
    """Write `data` at folder/rel without leaving `folder` (no link followed on the way). Returns the path
    written and whether it had to take another name because the wanted one existed."""
    folder = Path(folder).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    root = folder.resolve()
    parent = root
    for part in rel.parts[:-1]:
        parent = parent / part
        if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
            raise SandboxError(f"cannot save {rel}: {parent} is not a folder of {root}")
        parent.mkdir(exist_ok=True)
    wanted = parent / rel.parts[-1]
    if wanted.is_symlink() or wanted.is_dir():
        target = free_name(wanted) if not overwrite or wanted.is_dir() else None
        if target is None:
            raise SandboxError(f"cannot save {rel}: {wanted} is a link; remove it first")
    else:
        target = wanted if overwrite else free_name(wanted)
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | (os.O_TRUNC if overwrite else os.O_EXCL)
    fd = os.open(target, flags, 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return target, target != wanted
