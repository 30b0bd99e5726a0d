"""Files of a local run: collecting its artifacts (capped, no link followed out), reading a pipe exactly, and
removing its folders even where the script made them read-only."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from ..result import Artifact, printable_path


def collect_artifacts(out: Path, cap: int, max_files: int, skip: dict | None = None,
                      omitted: dict | None = None) -> list[Artifact]:
    """Regular files under `out` (top folder first, names sorted), at most `max_files`; a file's data is
    returned only while the running total stays within `cap`, otherwise it is listed with data None.
    Walked with directory fds and O_NOFOLLOW, so a link the script planted is never followed. What is left
    out is counted into `omitted` (the keys of result.artifacts_note: more_files, over_cap_files, ...)."""
    artifacts: list[Artifact] = []
    used = 0
    counts = omitted if omitted is not None else {}
    if not out.is_dir():
        return artifacts
    for dirpath, dirnames, filenames, dirfd in os.fwalk(out, follow_symlinks=False):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, out)
        for name in sorted(filenames):
            if len(artifacts) >= max_files:
                if _count_more(name, dirfd, rel_dir, skip, counts):
                    return artifacts
                continue
            try:
                # O_NONBLOCK: opening a fifo must not wait for a writer.
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dirfd)
            except OSError:
                continue  # a symlink, or something we cannot open
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    continue
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if skip and skip.get(rel.replace(os.sep, "/")) == (st.st_size, st.st_mtime_ns):
                    continue  # a staged input the script left as it was
                data = None
                if used + st.st_size <= cap:
                    data = _read_exactly(fd, st.st_size)
                    used += len(data)
                else:
                    counts["over_cap_files"] = counts.get("over_cap_files", 0) + 1
                    counts["over_cap_bytes"] = counts.get("over_cap_bytes", 0) + st.st_size
            finally:
                os.close(fd)
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            artifacts.append(Artifact(path=printable_path(rel.replace(os.sep, "/")), size=st.st_size, data=data))
    return artifacts


WALK_ENTRIES = 100_000  # files past the file cap counted at most (as the Docker launcher's walk cap)


def _count_more(name: str, dirfd: int, rel_dir: str, skip: dict | None, counts: dict) -> bool:
    """Count a regular file past the file cap into `counts`; True once the walk cap says to stop."""
    if counts.get("more_files", 0) >= WALK_ENTRIES:
        counts.update(walk_stopped=True, walk_cap=WALK_ENTRIES)
        return True
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except OSError:
        return False
    rel = name if rel_dir == "." else f"{rel_dir}/{name}"
    if stat.S_ISREG(st.st_mode) and not (skip and skip.get(rel.replace(os.sep, "/")) == (st.st_size, st.st_mtime_ns)):
        counts["more_files"] = counts.get("more_files", 0) + 1
        counts["more_bytes"] = counts.get("more_bytes", 0) + st.st_size
    return False


def _read_exactly(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def remove_tree(path: Path) -> None:
    """Delete a run folder whatever the script did to its permissions."""
    if not os.path.lexists(path):
        return

    def make_writable(func, failed_path, _exc):
        parent = os.path.dirname(failed_path)
        try:
            os.chmod(parent, 0o700)
            os.chmod(failed_path, 0o700) if os.path.isdir(failed_path) else None
            func(failed_path)
        except OSError:
            pass

    _open_dirs(path)
    shutil.rmtree(path, onerror=make_writable)


def _open_dirs(path: Path) -> None:
    """Give every folder owner rwx (our read-only copy uses 0555), without following links."""
    for dirpath, dirnames, _files in os.walk(path):
        for name in dirnames:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                try:
                    os.chmod(full, 0o700)
                except OSError:
                    pass
