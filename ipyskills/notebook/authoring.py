"""`%%skill NAME[/PATH]`: write a skill's SKILL.md, or one of its files, from a cell, then validate it.

Rules (why: authoring from a notebook must never cost the user a file):
- A name that is already a visible skill is written in place, unless that skill is bundled with ipyskills
  or its folder is read-only; then the write is refused. A new name goes to `IPySkills.authoring_root`.
- A file of a skill that does not exist yet is refused: write its SKILL.md first.
- The path is confined to the skill folder (no `..` out, no absolute path, no symlink pointing outside).
- An existing file is overwritten only when this session wrote it last, or the text is unchanged.
  Anything else needs `--force`, and even then the old file is kept next to it as FILE.bak (.bak.2, ...).
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import ResourceError, SkillError, SkillNotFound
from .display import report_parts
from .primitives import esc, wrap

SKILL_MD = "SKILL.md"


@dataclass
class Authored:
    """What `%%skill` did: the file, created / updated / unchanged, any backup, and the validation report."""

    path: Path
    action: str
    report: object
    backup: Path | None = None
    note: str = ""

    @property
    def valid(self) -> bool:
        return bool(getattr(self.report, "valid", False))

    def _lines(self) -> list[str]:
        lines = [f"{self.action} {self.path}"]
        if self.backup:
            lines.append(f"previous version kept as {self.backup}")
        if self.note:
            lines.append(self.note)
        return lines

    def mimebundle(self) -> dict:
        text, html_ = report_parts(self.report)
        head = "".join(f"<div>{esc(line)}</div>" for line in self._lines())
        return {"text/plain": "\n".join([*self._lines(), text]), "text/html": wrap(head + html_)}

    def _repr_mimebundle_(self, include=None, exclude=None):
        return self.mimebundle()

    def _repr_pretty_(self, p, cycle):
        p.text(self.mimebundle()["text/plain"])


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _check_name(name: str) -> None:
    if name in (".", "..") or "\\" in name or name.startswith("~"):
        raise ResourceError(f"{name!r} cannot be a skill folder name; use lowercase letters, digits and hyphens")


def _is_bundled(folder: Path) -> bool:
    from ..core.discover import bundled_skills_dir

    bundled = bundled_skills_dir()
    if bundled is None:
        return False
    bundled, folder = bundled.resolve(), folder.resolve()
    return folder == bundled or bundled in folder.parents


def _skill_folder(magics, name: str, rel: str) -> tuple[Path, bool]:
    """(folder to write into, whether the skill is new)."""
    reg = magics.registry
    try:
        meta = reg.get(name)
    except SkillNotFound:
        meta = None
    if meta is not None:
        folder = Path(meta.path)
        if _is_bundled(folder):
            raise SkillError(
                f"{name!r} is a skill bundled with ipyskills and is not edited in place; write your own under "
                f"a new name (%%skill my-{name}), or copy its folder into {magics.authoring_root} first"
            )
        if not os.access(folder, os.W_OK | os.X_OK):
            raise SkillError(f"skill {name!r} lives in a read-only folder ({folder}); write it under a new name")
        return folder, False
    if rel != SKILL_MD:
        raise SkillNotFound(
            f"there is no skill {name!r} yet; write its SKILL.md first with %%skill {name}, then add files"
        )
    try:
        root = Path(magics.authoring_root).expanduser().absolute()
    except RuntimeError:  # ~user whose home cannot be found
        raise SkillError(f"cannot find the home folder in IPySkills.authoring_root = {magics.authoring_root!r}; "
                         "set it to a folder you can write") from None
    return root / name, True


def _backup_path(target: Path) -> Path:
    candidate = target.with_name(target.name + ".bak")
    n = 2
    while candidate.exists() or candidate.is_symlink():
        candidate = target.with_name(f"{target.name}.bak.{n}")
        n += 1
    return candidate


def _file_mode(target: Path) -> int:
    """The mode the written file gets: the old file's, else what open() would give (0666 minus umask).
    mkstemp's 0600 would make the file unreadable to a sandbox running as another user."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def _atomic_write(target: Path, data: bytes) -> None:
    mode = _file_mode(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_skill_file(magics, locator: str, text: str, force: bool = False) -> Authored:
    from ..core.resources import normalize_resource_path, resolve_in_skill, split_locator

    name, rel = split_locator(locator)
    _check_name(name)
    rel = SKILL_MD if rel is None else normalize_resource_path(rel)
    if rel == "skill.md":
        rel = SKILL_MD
    folder, new = _skill_folder(magics, name, rel)
    if not text.endswith("\n"):
        text += "\n"
    data = text.encode("utf-8")

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SkillError(f"cannot create {folder}: {exc.strerror or exc}; set IPySkills.authoring_root "
                         "to a folder you can write") from None
    try:  # stat and read errors (a name too long, no permission) are the user's to fix, said in one line
        lexical = folder / rel
        if lexical.is_symlink():
            raise ResourceError(f"{rel!r} is a symbolic link; %%skill does not write through links")
        target = resolve_in_skill(folder, rel)  # raises when it resolves outside the skill
        if target.exists() and not target.is_file():
            raise ResourceError(f"{rel!r} exists in {folder} and is not a regular file; refused")

        action, backup = "created", None
        if target.exists():
            old = target.read_bytes()
            if old == data:
                action = "unchanged"
            elif magics.written_hash(target) == _sha(old):
                action = "updated"
            elif force:
                backup = _backup_path(target)
                os.replace(target, backup)
                action = "updated"
            else:
                raise SkillError(
                    f"{target} already exists and was not written by %%skill in this session; rerun with "
                    f"%%skill --force {locator} to overwrite it (the old file is kept as {target.name}.bak)"
                )
    except OSError as exc:
        raise SkillError(f"cannot write {rel!r} in {folder}: {exc.strerror or exc}") from None
    if action != "unchanged":
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(target, data)
        except OSError as exc:
            raise SkillError(f"cannot write {target}: {exc.strerror or exc}") from None
    magics.remember_write(target, text)

    reg = magics.registry
    reg.refresh()
    report = reg.validate(str(folder))
    note = ""
    if new:
        try:
            visible = Path(reg.get(name).path).resolve() == folder.resolve()
        except SkillNotFound:
            visible = False
        if not visible:
            try:
                reg.add(str(folder))
            except SkillError as exc:
                note = f"not loaded yet: {exc}"
    return Authored(path=target, action=action, report=report, backup=backup, note=note)
