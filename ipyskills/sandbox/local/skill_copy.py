"""A throw-away, read-only copy of a skill that holds no link leading outside it.

Regular files are copied; a symlink whose target stays inside the skill becomes a copy of that target;
a symlink that leaves the skill (or dangles) is dropped, as are sockets, fifos and devices. Files are
opened with O_NOFOLLOW, so a file swapped for a link during the copy is refused rather than followed.

Read-only how: when the run takes another uid than the copy's owner (root's runs), by ownership: the owner
keeps its write bit (0644/0755, like a skill copied into a Docker container, owned by root, for uid 1000),
so a file a script copies out of the skill with `shutil.copy` (which copies the mode) is one it can then
change. Otherwise (the run is the copy's owner), by mode: 0444/0555.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import SandboxError

SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "__pycache__", ".ipynb_checkpoints",
                          ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox"})
MAX_FILES = 5000
MAX_BYTES = 256 * 1024**2
_CHUNK = 1024 * 1024


@dataclass
class CopyReport:
    files: int = 0
    bytes: int = 0
    dropped: list[str] = field(default_factory=list)  # links and special files left out, '/'-separated


class _Copier:
    def __init__(self, root: Path, max_files: int, max_bytes: int, owner_writable: bool = False):
        self.root = root
        self.dir_mode, self.exec_mode, self.file_mode = (0o755, 0o755, 0o644) if owner_writable else \
            (0o555, 0o555, 0o444)
        self.max_files = max_files
        self.max_bytes = max_bytes
        self.report = CopyReport()

    def _inside(self, real: str) -> bool:
        return real == str(self.root) or real.startswith(str(self.root) + os.sep)

    def copy_dir(self, src: str, dst: str, rel: str, seen: frozenset) -> None:
        os.mkdir(dst, 0o700)
        with os.scandir(src) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                self.copy_entry(entry.path, os.path.join(dst, entry.name), rel + entry.name, seen)
        os.chmod(dst, self.dir_mode)

    def copy_entry(self, src: str, dst: str, rel: str, seen: frozenset) -> None:
        st = os.lstat(src)
        if stat.S_ISLNK(st.st_mode):
            real = os.path.realpath(src)
            if not self._inside(real) or not os.path.exists(real) or real in seen:
                self.report.dropped.append(rel)
                return
            src, st = real, os.stat(real)
        if stat.S_ISDIR(st.st_mode):
            if os.path.basename(rel) in SKIPPED_DIRS:
                return
            self.copy_dir(src, dst, rel + "/", seen | {os.path.realpath(src)})
        elif stat.S_ISREG(st.st_mode):
            self.copy_file(src, dst, rel, st)
        else:
            self.report.dropped.append(rel)

    def copy_file(self, src: str, dst: str, rel: str, st: os.stat_result) -> None:
        self.report.files += 1
        if self.report.files > self.max_files:
            raise SandboxError(
                f"the skill has more than {self.max_files} files, too many to copy for the local backend; "
                "remove generated files from the skill folder or use the Docker backend"
            )
        try:
            fd_in = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise SandboxError(f"cannot copy {rel!r} from the skill: {exc.strerror}") from None
        mode = self.exec_mode if st.st_mode & 0o111 else self.file_mode
        try:
            if not stat.S_ISREG(os.fstat(fd_in).st_mode):
                self.report.dropped.append(rel)
                return
            fd_out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                while chunk := os.read(fd_in, _CHUNK):
                    self.report.bytes += len(chunk)
                    if self.report.bytes > self.max_bytes:
                        raise SandboxError(
                            f"the skill holds more than {self.max_bytes // 1024**2} MiB, too much to copy "
                            "for the local backend; move large data out of the skill folder or use Docker"
                        )
                    os.write(fd_out, chunk)
            finally:
                os.close(fd_out)
        finally:
            os.close(fd_in)
        os.chmod(dst, mode)


def copy_skill(src: Path, dst: Path, max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES,
               owner_writable: bool = False) -> CopyReport:
    """Copy the skill at `src` into the new folder `dst` (which must not exist); everything read-only to a
    run: `owner_writable` only when the run's uid is not the copy's owner (see the module docstring)."""
    root = Path(os.path.realpath(src))
    if not root.is_dir():
        raise SandboxError(f"skill folder {str(src)!r} does not exist or is not a folder")
    copier = _Copier(root, max_files, max_bytes, owner_writable)
    copier.copy_dir(str(root), str(dst), "", frozenset({str(root)}))
    return copier.report
