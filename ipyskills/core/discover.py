"""Discovery: roots -> skill folders -> loaded metadata, with precedence and a stat-keyed cache.

A root is a folder of skill folders (walked, bounded) or a single skill folder. Roots are searched in order;
the first skill to claim a name wins and every later one is reported as shadowed, never dropped silently.
Metadata is cached per SKILL.md by its stat (mtime, ctime, size, inode), so a re-scan where nothing changed
costs one stat per skill and opens no file. Listing reads only each frontmatter; advice about the body
(length, encoding) comes from `validate` and `validate.body_advice`, on demand.

The walk's bounds follow the client guide (depth 4-6, about 2000 folders): `MAX_DEPTH` levels below a root
and `MAX_DIRS` folders *listed* per root. A skill folder is recognised by one stat of its SKILL.md and is not
listed, so the folder cap does not limit how many skills a root holds: 10,000 skill folders side by side, or
in up to 2000 group folders, are all found.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from stat import S_ISDIR, S_ISREG

from ..errors import SkillError
from ..settings import DEFAULT_ROOTS
from .model import Problem, SkillMeta

MAX_DEPTH = 4  # folder levels below a root that are searched for skills
MAX_DIRS = 2000  # folders listed per root (skill folders are not listed, so they do not count)
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__",
                       ".ipynb_checkpoints", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox"})
SKILL_FILE_NAMES = ("SKILL.md", "skill.md")  # the uppercase name is preferred when both exist
_NAME = attrgetter("name")


@dataclass(frozen=True)
class Root:
    path: Path  # absolute, user-expanded, not resolved (so links keep their names in output)
    explicit: bool = True  # given by the user: a missing one is reported, a default one is not
    origin: str = "configured"  # configured | added | default | bundled


def make_root(path, *, explicit: bool = True, origin: str = "configured") -> Root:
    p = Path(os.path.abspath(os.path.expanduser(str(path))))
    if p.name in SKILL_FILE_NAMES and os.path.isfile(p):  # os.path: False for any OSError (ENAMETOOLONG)
        p = p.parent  # `--dir some-skill/SKILL.md` means the skill folder
    return Root(p, explicit, origin)


def bundled_skills_dir() -> Path | None:
    """The skills shipped with ipyskills: installed as ipyskills/_bundled_skills, or the repo's skills/."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_bundled_skills", package.parent / "skills"):
        if candidate.is_dir():
            return candidate
    return None


def default_roots(settings) -> list[Root]:
    """Configured roots, then the conventional locations, then the bundled skills (lowest precedence)."""
    roots = [make_root(p, explicit=True, origin="configured") for p in settings.skill_dirs]
    if settings.default_roots:
        roots += [make_root(p, explicit=False, origin="default") for p in DEFAULT_ROOTS]
    if settings.bundled_skills:
        bundled = bundled_skills_dir()
        if bundled is not None:
            roots.append(make_root(bundled, explicit=False, origin="bundled"))
    return roots


def skill_file_in(folder: Path) -> Path | None:
    for name in SKILL_FILE_NAMES:
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


def find_skill_folders(root: Path, *, max_depth: int = MAX_DEPTH, max_dirs: int = MAX_DIRS
                       ) -> tuple[list[Path], list[Problem]]:
    """Skill folders under `root`, shallowest first, then by name. Bounded; never raises for I/O.

    The walk stops descending once a folder holds a SKILL.md (skills don't nest), skips VCS and cache
    folders, follows symlinked folders (a linked skill is still a skill) but never the same real folder twice.
    """
    root = Path(root)
    found, diagnostics = _walk(str(root), os.path.realpath(root), max_depth, max_dirs)
    return [Path(folder) for folder, _, _, _ in found], diagnostics


# The walk finds (folder as reached, its SKILL.md, the real folder, the SKILL.md's stat) tuples. The folder
# keeps link names for output; the real folder notices one skill reached twice; the stat is the cache key.
# Plain tuples and inlined stats: this loop runs once per skill on every re-scan.


def _skill_md_of(folder: str) -> tuple[str, os.stat_result] | None:
    """The folder's SKILL.md (else skill.md) with its stat, when it is a regular file. One stat per name.
    When neither is, but one exists as a FIFO, socket or device, that one (the scan skips it and says why)."""
    odd = None
    for name in SKILL_FILE_NAMES:
        path = folder + os.sep + name
        try:
            st = os.stat(path)
        except OSError:  # absent, or the folder cannot be searched: not a skill folder
            continue
        if S_ISREG(st.st_mode):
            return path, st
        if odd is None and not S_ISDIR(st.st_mode):
            odd = path, st
    return odd


def _walk(root: str, real_root: str, max_depth: int, max_dirs: int) -> tuple[list[tuple], list[Problem]]:
    """Breadth-first, bounded by `max_dirs` folders *listed* and `max_depth` levels.

    Skill folders are never listed (a skill's SKILL.md is found with one stat), so a flat root of 10,000
    skills costs one listing; the cap bounds how much of a big non-skill tree (a home folder) is searched.
    Real paths come from the parent's real path plus the entry name, and `realpath` is called only for
    symlinks, which keeps the walk to about one system call per skill.
    """
    diagnostics: list[Problem] = []
    hit = _skill_md_of(root)
    if hit:
        return [(root, hit[0], real_root, hit[1])], diagnostics
    found: list[tuple] = []
    seen: set[str] = set()
    queue = deque([(root, real_root, 0)])
    opened = 0
    depth_hit = False
    upper = os.sep + SKILL_FILE_NAMES[0]
    while queue:
        folder, real, depth = queue.popleft()
        if real in seen:
            continue
        seen.add(real)
        if opened >= max_dirs:
            diagnostics.append(Problem(
                "walk-capped", None,
                f"{root}: stopped after {max_dirs} folders; skills further in were not searched. "
                "Point a root at the folder that holds the skills.", "warning"))
            break
        opened += 1
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=_NAME)
        except OSError:
            continue
        real_prefix = real if real.endswith(os.sep) else real + os.sep
        for entry in entries:
            name = entry.name
            if name in SKIP_DIRS:
                continue
            try:
                if not entry.is_dir():  # follows symlinks
                    continue
                child_real = os.path.realpath(entry.path) if entry.is_symlink() else real_prefix + name
            except OSError:
                continue
            path = entry.path
            try:  # the common case first: SKILL.md, one stat
                st = os.stat(path + upper)
                hit = (path + upper, st) if S_ISREG(st.st_mode) else _skill_md_of(path)
            except OSError:
                hit = _skill_md_of(path)
            if hit:
                found.append((path, hit[0], child_real, hit[1]))
            elif depth + 1 < max_depth:
                queue.append((path, child_real, depth + 1))
            elif not depth_hit:
                depth_hit = True
                diagnostics.append(Problem(
                    "walk-depth", None,
                    f"{root}: folders deeper than {max_depth} levels were not searched (e.g. {path}).",
                    "warning"))
    return found, diagnostics


@dataclass
class ScanResult:
    skills: list[SkillMeta] = field(default_factory=list)  # winners, in precedence order
    skipped: list[tuple[Path, list[Problem]]] = field(default_factory=list)
    shadowed: list[tuple[SkillMeta, SkillMeta]] = field(default_factory=list)  # (winner, loser)
    diagnostics: list[Problem] = field(default_factory=list)  # about roots and walks, not skills


class Discovery:
    """Scans roots and keeps the metadata cache between scans."""

    def __init__(self, *, max_depth: int = MAX_DEPTH, max_dirs: int = MAX_DIRS, loader=None):
        self.max_depth = max_depth
        self.max_dirs = max_dirs
        self._loader = loader  # (folder, root) -> (SkillMeta | None, problems); default validate.load_meta
        # (folder, root) -> (stamp of the SKILL.md, meta or None, problems)
        self._cache: dict[tuple[str, str], tuple[tuple, SkillMeta | None, list[Problem]]] = {}
        self.loads = 0  # SKILL.md files actually read (not served from the cache); tests and benchmarks use it
        self._case_sensitive = False  # see _exact_skill_md

    def scan(self, roots: list[Root]) -> ScanResult:
        result = ScanResult()
        winners: dict[str, SkillMeta] = {}
        seen_roots: set[str] = set()
        seen_skills: set[str] = set()
        old, cache = self._cache, {}  # entries not met again are dropped with `old`
        for root in roots:
            real_root = os.path.realpath(root.path)
            if real_root in seen_roots:
                continue  # the same folder given twice is scanned once
            seen_roots.add(real_root)
            if not os.path.isdir(root.path):  # os.path: False for any OSError, e.g. a name too long
                if root.explicit:
                    what = "is not a folder" if os.path.exists(root.path) else "does not exist"
                    result.diagnostics.append(Problem(
                        "root-missing", None, f"skill root {root.path} {what}; check the path", "warning"))
                continue
            root_key = str(root.path)
            self._case_sensitive = False  # learnt from the first SKILL.md read under this root
            hits, notes = _walk(root_key, real_root, self.max_depth, self.max_dirs)
            result.diagnostics += notes
            for folder, skill_md, real, st in hits:
                if real in seen_skills:
                    continue  # reached again through an overlapping root or a link: same skill
                seen_skills.add(real)
                if not S_ISREG(st.st_mode):  # a FIFO, socket or device: never opened (it could block)
                    result.skipped.append((Path(folder), [Problem(
                        "skill-md-not-file", "SKILL.md",
                        f"{skill_md} is not a regular file (a FIFO, socket or device); a SKILL.md must be one.",
                        "error")]))
                    continue
                key = (folder, root_key)
                # ctime and inode catch a rewrite that kept the size and restored the mtime (rsync -t, touch -r)
                stamp = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
                entry = old.get(key)
                if entry is None or entry[0] != stamp:
                    outside = _links_outside(folder, skill_md)  # only on a miss: a re-scan stays stat-only
                    entry = (stamp, None, [outside]) if outside else (
                        stamp, *self._read(folder, skill_md, st, root.path, root_key))
                cache[key] = entry
                meta = entry[1]
                if meta is None:
                    result.skipped.append((Path(folder), list(entry[2])))
                elif meta.name in winners:
                    result.shadowed.append((winners[meta.name], meta))
                else:
                    winners[meta.name] = meta
                    result.skills.append(meta)
        self._cache = cache
        return result

    def _read(self, folder: str, skill_md: str, st, root: Path, root_key: str
              ) -> tuple[SkillMeta | None, list[Problem]]:
        """Load one SKILL.md (a cache miss): (meta, problems) or (None, why it was skipped)."""
        self.loads += 1
        # Paths made from the root's (parsing only the tail), as these run once per skill.
        path = root / folder[len(root_key) + 1:] if folder != root_key else root
        try:
            if self._loader is not None:
                return self._loader(path, root)
            return _listing_loader()(path, root, skill_md=self._exact_skill_md(path, skill_md, st),
                                     scan_body=False)
        except SkillError as exc:
            return None, [Problem("unreadable", None, str(exc))]
        except OSError as exc:
            return None, [Problem("unreadable", None, f"{skill_md}: {exc.strerror or exc}")]

    def _exact_skill_md(self, folder: Path, skill_md: str, st) -> Path | None:
        """The SKILL.md path with its name as stored, so a lowercase `skill.md` gets its warning.

        On a case-insensitive file system `SKILL.md` also opens `skill.md`. When both names stat to the
        same file, None lets the loader ask the folder listing (find_skill_md). Once a root shows that
        its file system tells the names apart, its other skills skip that stat.
        """
        name = skill_md[len(skill_md) - len(SKILL_FILE_NAMES[0]):]
        if name != SKILL_FILE_NAMES[0] or self._case_sensitive:
            return folder / name
        try:
            other = os.stat(skill_md[:-len(name)] + SKILL_FILE_NAMES[1])
        except OSError:
            self._case_sensitive = True  # no lowercase twin: names differ by case here
            return folder / name
        if (other.st_ino, other.st_dev) != (st.st_ino, st.st_dev):
            self._case_sensitive = True  # two files: SKILL.md wins
            return folder / name
        return None


def _links_outside(folder: str, skill_md: str) -> Problem | None:
    """A SKILL.md that is a link to a file outside its skill folder is refused, as every bundled file is
    (the folder itself may be a link: both are resolved first)."""
    if not os.path.islink(skill_md):
        return None
    real_folder, target = os.path.realpath(folder), os.path.realpath(skill_md)
    if target.startswith(real_folder + os.sep):
        return None
    return Problem("skill-md-outside", "SKILL.md", f"{skill_md} is a link to {target}, outside the skill folder; "
                   "copy the file into the folder instead of linking it", "error")


def _listing_loader():
    from .validate import load_meta  # imported on first scan: it pulls in YAML

    return load_meta
