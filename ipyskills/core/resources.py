"""Level 3: the files bundled with a skill. Locators, root confinement, the manifest, and bounded reads.

A locator is `name` (activation) or `name/relative/path` (one resource). Everything here works on a skill
folder and a relative path; which folder a name means is the registry's business.

Confinement rule: the path is normalised lexically (`.` dropped, a `..` that stays inside is applied), then
the target is resolved through every symlink and must still lie inside the *resolved* skill root. So a
symlinked skill folder is fine, and a symlinked file or folder that points outside is refused.
"""

from __future__ import annotations

import mimetypes
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ResourceError

READ_CAP = 65536  # bytes one resource read may return (settings.read_cap overrides)
BYTES_CAP = 16 * 1024 * 1024  # bytes read_resource_bytes returns for display
MANIFEST_CAP = 200  # files listed in <skill_resources>
VISIT_CAP = 5000  # directory entries looked at while building the manifest

# Folders that never hold skill resources worth listing.
SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".ipynb_checkpoints",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".cache",
})
SKIP_FILES = frozenset({".DS_Store", "Thumbs.db"})
SKILL_FILE_NAMES = ("SKILL.md", "skill.md")

_DRIVE = re.compile(r"^[A-Za-z]:")
# Extensions whose files are binary whatever their first bytes say; refused in agent text up front.
_BINARY_MIME_PREFIXES = ("image/", "audio/", "video/", "font/")
_BINARY_MIMES = {
    "application/pdf", "application/zip", "application/gzip", "application/x-tar", "application/x-7z-compressed",
    "application/octet-stream", "application/vnd.ms-excel", "application/msword", "application/x-bzip2",
    "application/x-xz", "application/wasm", "application/x-sqlite3", "application/vnd.rar",
}
_OFFICE = re.compile(r"^application/vnd\.(openxmlformats|oasis|ms-)")


def split_locator(locator: str) -> tuple[str, str | None]:
    """`name` -> (name, None); `name/path` -> (name, path). Skill names never contain `/`."""
    if not isinstance(locator, str):
        raise ResourceError(f"a locator is a string like 'name' or 'name/path', got {type(locator).__name__}")
    if "\x00" in locator:
        raise ResourceError("invalid skill resource path: the locator contains a NUL character")
    name, sep, rest = locator.partition("/")
    name = name.strip()
    if not name:
        raise ResourceError(f"invalid locator {locator!r}: it must start with a skill name, like 'name/path'")
    if not sep:
        return name, None
    return name, rest


def normalize_resource_path(path: str) -> str:
    """The '/'-separated relative path a locator names, or ResourceError saying why it is refused."""
    if not isinstance(path, str):
        raise ResourceError(f"a resource path is a string, got {type(path).__name__}")
    if "\x00" in path:
        raise ResourceError("invalid skill resource path: it contains a NUL character")
    if "\\" in path:
        raise ResourceError(
            f"invalid skill resource path {path!r}: use '/' as the separator (backslashes are refused)"
        )
    if path.startswith("/") or path == "":
        raise ResourceError(
            f"invalid skill resource path {path!r}: it must be relative to the skill folder, like "
            "'references/guide.md'"
        )
    parts = path.split("/")
    if _DRIVE.match(parts[0]):
        raise ResourceError(f"invalid skill resource path {path!r}: drive letters are refused; use a relative path")
    kept: list[str] = []
    for part in parts:
        if part == "":
            raise ResourceError(f"invalid skill resource path {path!r}: it has an empty segment ('//' or a trailing '/')")
        if part == ".":
            continue
        if part == "..":
            if not kept:
                raise ResourceError(f"invalid skill resource path {path!r}: '..' leaves the skill folder")
            kept.pop()
            continue
        kept.append(part)
    if not kept:
        raise ResourceError(
            f"invalid skill resource path {path!r}: it names the skill folder itself; load the skill by name"
        )
    return "/".join(kept)


def resolve_in_skill(skill_dir: Path, rel: str) -> Path:
    """The fully resolved target of an already normalised `rel`, confined to the resolved skill root."""
    try:
        root = Path(skill_dir).resolve(strict=True)
        target = (root / rel).resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop on older Pythons
        raise ResourceError(f"cannot resolve {rel!r}: {_os_reason(exc)}") from None
    if target != root and root not in target.parents:
        raise ResourceError(f"{rel!r} escapes skill directory (it resolves outside the skill folder); refused")
    return target


def is_skill_file(rel: str) -> bool:
    return rel in SKILL_FILE_NAMES


@dataclass
class Manifest:
    files: list[str] = field(default_factory=list)
    truncated: bool = False


def list_resources(skill_dir: Path, *, cap: int = MANIFEST_CAP, visit_cap: int = VISIT_CAP) -> Manifest:
    """Up to `cap` files under the skill (sorted, '/'-separated, SKILL.md excluded).

    The walk looks at no more than `visit_cap` directory entries; stopping early for either cap marks the
    manifest truncated. Symlinked files are listed only when they resolve inside the skill; symlinked
    folders are not descended into (that also rules out loops).
    """
    root = Path(skill_dir).resolve()
    found: list[str] = []
    visits = 0
    truncated = False
    pending = [(root, "")]
    while pending:
        folder, prefix = pending.pop()
        visits += 1
        if visits > visit_cap:
            truncated = True
            break
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue  # unreadable folder: leave it out rather than fail activation
        subfolders = []
        for entry in entries:
            visits += 1
            if visits > visit_cap:
                truncated = True
                break
            rel = prefix + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in SKIP_DIRS:
                        subfolders.append((Path(entry.path), rel + "/"))
                    continue
                if entry.name in SKIP_FILES or (not prefix and entry.name in SKILL_FILE_NAMES):
                    continue
                if entry.is_symlink():
                    real = Path(entry.path).resolve()
                    if not real.is_file() or root not in real.parents:
                        continue
                elif not entry.is_file(follow_symlinks=False):
                    continue  # sockets, fifos, devices
            except OSError:
                continue
            found.append(rel)
        if truncated:
            break
        pending.extend(reversed(subfolders))  # pop() then visits them in name order
    found.sort()
    if len(found) > cap:
        found = found[:cap]
        truncated = True
    return Manifest(found, truncated)


def read_resource_text(skill_dir: Path, rel: str, *, cap: int = READ_CAP) -> str:
    """The UTF-8 text of one resource (`rel` already normalised), refusing binaries and files over `cap`."""
    target = resolve_in_skill(skill_dir, rel)
    mime = guess_mime(rel)
    if _is_binary_mime(mime):
        raise ResourceError(
            f"{rel!r} is a binary file ({mime}); agent text carries UTF-8 text only. "
            "In a notebook it can be displayed instead (read_resource_bytes)."
        )
    data = _read_capped(target, rel, skill_dir, cap + 1)
    if len(data) > cap:
        raise ResourceError(
            f"{rel!r} is larger than the {cap} byte limit for one resource read; raise it with "
            "read_cap=... (Settings.read_cap, IPYSKILLS_READ_CAP) or split the file"
        )
    if b"\x00" in data:
        raise ResourceError(f"{rel!r} contains NUL bytes, so it is not text; agent text carries UTF-8 text only")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResourceError(
            f"{rel!r} is not valid UTF-8 (bad byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "skill resources are read as UTF-8 only, so convert the file to UTF-8"
        ) from None


def read_resource_bytes(skill_dir: Path, rel: str, *, cap: int = BYTES_CAP) -> tuple[bytes, str]:
    """(bytes, mime type) of one resource, for display in a notebook; same confinement as text reads."""
    target = resolve_in_skill(skill_dir, rel)
    data = _read_capped(target, rel, skill_dir, cap + 1)
    if len(data) > cap:
        raise ResourceError(f"{rel!r} is larger than the {cap} byte display limit; raise it with cap=...")
    return data, guess_mime(rel)


def guess_mime(rel: str) -> str:
    mime = mimetypes.guess_type(rel, strict=False)[0]
    if mime:
        return mime
    return "text/plain"


def _is_binary_mime(mime: str) -> bool:
    if mime == "image/svg+xml":
        return False  # SVG is XML text
    return mime.startswith(_BINARY_MIME_PREFIXES) or mime in _BINARY_MIMES or bool(_OFFICE.match(mime))


def _read_capped(target: Path, rel: str, skill_dir: Path, limit: int) -> bytes:
    """At most `limit` bytes of a regular file. Never blocks on a fifo, never follows a late symlink."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(target, flags)
    except FileNotFoundError:
        raise ResourceError(f"no file {rel!r} in this skill; load the skill by name to see its file list") from None
    except IsADirectoryError:
        raise _folder_error(skill_dir, rel) from None
    except OSError as exc:
        raise ResourceError(f"cannot read {rel!r}: {_os_reason(exc)}") from None
    try:
        if not _opened_inside(fd, skill_dir):
            raise ResourceError(f"{rel!r} escapes skill directory (a folder on its path changed while it was "
                                "being opened); refused")
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise _folder_error(skill_dir, rel)
        if not stat.S_ISREG(mode):
            raise ResourceError(f"{rel!r} is not a regular file (a fifo, socket or device); refused")
        chunks, got = [], 0
        while got < limit:
            chunk = os.read(fd, min(limit - got, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise ResourceError(f"cannot read {rel!r}: {_os_reason(exc)}") from None
    finally:
        os.close(fd)


def _opened_inside(fd: int, skill_dir: Path) -> bool:
    """Where the opened file really is. O_NOFOLLOW guards only the last component, so a folder swapped
    for a symlink between resolve_in_skill and open would go unnoticed; /proc names what was opened."""
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc (macOS): the resolve-then-open check above is what there is
        return True
    root = os.path.realpath(skill_dir)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _folder_error(skill_dir: Path, rel: str) -> ResourceError:
    # A folder is not a resource; name a few of its files so the next call can succeed.
    manifest = list_resources(skill_dir)
    inside = [f for f in manifest.files if f.startswith(rel + "/")]
    hint = f"; it holds e.g. {', '.join(inside[:5])}" if inside else ""
    return ResourceError(f"{rel!r} is a folder, not a file; load one file inside it{hint}")


def _os_reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or exc.__class__.__name__
