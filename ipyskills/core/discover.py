"""Discovery: roots -> skill folders -> loaded metadata, with precedence and a stat-keyed cache.

A root is a folder of skill folders (walked, bounded) or a single skill folder. Roots are searched in order;
the first skill to claim a name wins and every later one is reported as shadowed, never dropped silently.
Metadata is cached per SKILL.md by (mtime_ns, size), so a re-scan where nothing changed costs only stats.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SkillError
from ..settings import DEFAULT_ROOTS
from .model import Problem, SkillMeta

MAX_DEPTH = 4  # folder levels below a root that are searched for skills
MAX_DIRS = 2000  # folders opened per root
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__",
                       ".ipynb_checkpoints", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox"})
SKILL_FILE_NAMES = ("SKILL.md", "skill.md")  # the uppercase name is preferred when both exist


@dataclass(frozen=True)
class Root:
    path: Path  # absolute, user-expanded, not resolved (so links keep their names in output)
    explicit: bool = True  # given by the user: a missing one is reported, a default one is not
    origin: str = "configured"  # configured | added | default | bundled


def make_root(path, *, explicit: bool = True, origin: str = "configured") -> Root:
    p = Path(os.path.abspath(os.path.expanduser(str(path))))
    if p.name in SKILL_FILE_NAMES and p.is_file():
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
    diagnostics: list[Problem] = []
    if skill_file_in(root):
        return [root], diagnostics
    found: list[Path] = []
    seen: set[str] = set()
    queue = deque([(root, 0)])
    opened = 0
    depth_hit = False
    while queue:
        folder, depth = queue.popleft()
        try:
            real = os.path.realpath(folder)
        except OSError:
            continue
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
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name in SKIP_DIRS:
                continue
            try:
                if not entry.is_dir():  # follows symlinks
                    continue
            except OSError:
                continue
            child = Path(entry.path)
            if skill_file_in(child):
                found.append(child)
            elif depth + 1 < max_depth:
                queue.append((child, depth + 1))
            elif not depth_hit:
                depth_hit = True
                diagnostics.append(Problem(
                    "walk-depth", None,
                    f"{root}: folders deeper than {max_depth} levels were not searched (e.g. {child}).",
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
        self._cache: dict[tuple[str, str], tuple[tuple[int, int], SkillMeta | None, list[Problem]]] = {}
        self.loads = 0  # SKILL.md files actually read (not served from the cache); tests and benchmarks use it

    def scan(self, roots: list[Root]) -> ScanResult:
        result = ScanResult()
        winners: dict[str, SkillMeta] = {}
        seen_roots: set[str] = set()
        seen_skills: set[str] = set()
        live_keys: set[tuple[str, str]] = set()
        for root in roots:
            real_root = os.path.realpath(root.path)
            if real_root in seen_roots:
                continue  # the same folder given twice is scanned once
            seen_roots.add(real_root)
            if not root.path.is_dir():
                if root.explicit:
                    what = "is not a folder" if root.path.exists() else "does not exist"
                    result.diagnostics.append(Problem(
                        "root-missing", None, f"skill root {root.path} {what}; check the path", "warning"))
                continue
            folders, notes = find_skill_folders(root.path, max_depth=self.max_depth, max_dirs=self.max_dirs)
            result.diagnostics += notes
            for folder in folders:
                real = os.path.realpath(folder)
                if real in seen_skills:
                    continue  # reached again through an overlapping root or a link: same skill
                seen_skills.add(real)
                key = (str(folder), str(root.path))
                live_keys.add(key)
                meta, problems = self._load(folder, root.path, key)
                if meta is None:
                    result.skipped.append((folder, problems))
                    continue
                if meta.name in winners:
                    result.shadowed.append((winners[meta.name], meta))
                    continue
                winners[meta.name] = meta
                result.skills.append(meta)
        for stale in set(self._cache) - live_keys:
            del self._cache[stale]
        return result

    def _load(self, folder: Path, root: Path, key) -> tuple[SkillMeta | None, list[Problem]]:
        skill_md = skill_file_in(folder)
        try:
            st = os.stat(skill_md) if skill_md else None
        except OSError:
            st = None
        if st is None:
            return None, [Problem("skill-md-missing", None, f"{folder}: SKILL.md disappeared during the scan")]
        stamp = (st.st_mtime_ns, st.st_size)
        cached = self._cache.get(key)
        if cached and cached[0] == stamp:
            return cached[1], list(cached[2])
        self.loads += 1
        try:
            meta, problems = self._loader_fn()(folder, root)
        except SkillError as exc:
            meta, problems = None, [Problem("unreadable", None, str(exc))]
        except OSError as exc:
            meta, problems = None, [Problem("unreadable", None, f"{skill_md}: {exc.strerror or exc}")]
        self._cache[key] = (stamp, meta, list(problems))
        return meta, list(problems)

    def _loader_fn(self):
        if self._loader is None:
            from .validate import load_meta

            self._loader = load_meta
        return self._loader
