"""The walk over one skill's files (bounded, no link out of the skill) that hands each file to its source's
reader, keeps one requirement per distribution by source order, and caches the result while the files keep
their names, sizes, mtimes and inodes."""

from __future__ import annotations

import ast
import fnmatch
import os
import threading
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from ..requirement_text import shown
from ..resources import SKILL_FILE_NAMES, SKIP_DIRS
from .imports import _parse, _scan_imports
from .programs import _scan_python_programs, _shell_programs
from .records import (
    _OFFICE_WORDS,
    KNOWN_PROGRAMS,
    MAX_BYTES,
    MAX_FILES,
    OFFICE_PROGRAMS,
    SOURCE_ORDER,
    ProgramUse,
    Requirement,
    SkillRequirements,
    _parse_requirement,
    _Skip,
    normalise,
)
from .skill_md import _scan_skill_md
from .sources import _scan_pep723, _scan_pyproject, _scan_requirements


def analyze(skill_dir: Path, *, skill_name: str = "", provided: Iterable[str] = (),
            compatibility: str = "") -> SkillRequirements:
    """Everything the skill at `skill_dir` needs; never raises for what is in the skill's files."""
    scan = _Scan(Path(skill_dir), provided)
    scan.run()
    profile = _profile(scan.programs, compatibility)
    return SkillRequirements(
        skill=skill_name or Path(skill_dir).name,
        python=scan.chosen(provided=False),
        provided=scan.chosen(provided=True),
        skipped=scan.skipped,
        programs=scan.programs,
        profile=profile,
    )


_CACHE_ENTRIES = 256
_cache: dict[tuple, tuple[tuple, SkillRequirements]] = {}  # (dir, provided, compatibility) -> (files, result)
_cache_lock = threading.Lock()


def analyze_cached(skill_dir: Path, *, skill_name: str = "", provided: Iterable[str] = (),
                   compatibility: str = "") -> SkillRequirements:
    """`analyze`, reused while no file of the skill changed (same names, sizes, mtimes): a run pays for
    a stat of each file, not for parsing every script again."""
    provided = frozenset(provided)
    key = (str(Path(skill_dir).absolute()), skill_name, provided, compatibility)
    signature = _signature(Path(skill_dir))
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and hit[0] == signature:
        return hit[1]
    result = analyze(skill_dir, skill_name=skill_name, provided=provided, compatibility=compatibility)
    with _cache_lock:
        if len(_cache) >= _CACHE_ENTRIES:
            _cache.pop(next(iter(_cache)))
        _cache[key] = (signature, result)
    return result


def _signature(root: Path) -> tuple:
    """(path, size, mtime, inode) of every file the analysis would look at (the same bounded walk)."""
    entries, seen = [], 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            seen += 1
            if seen > MAX_FILES:
                return tuple(entries)
            try:
                st = os.stat(os.path.join(dirpath, name))
            except OSError:
                continue
            entries.append((dirpath, name, st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(entries)


def _profile(programs: list[ProgramUse], compatibility: str) -> str | None:
    # Programs named only in SKILL.md shell blocks are run by the agent, not by the skill's scripts.
    from_scripts = any(p.program in OFFICE_PROGRAMS and p.file.lower() not in _SKILL_MD_LOWER for p in programs)
    if from_scripts or (isinstance(compatibility, str) and _OFFICE_WORDS.search(compatibility)):
        return "office"
    return None


_SKILL_MD_LOWER = frozenset(n.lower() for n in SKILL_FILE_NAMES)


# --- the walk ---------------------------------------------------------------------------------------------


class _Scan:
    """One analysis: the bounded file list, what each source found, what was skipped."""

    def __init__(self, root: Path, provided: Iterable[str]):
        self.root = root
        try:
            self.real_root = root.resolve()
        except (OSError, RuntimeError):
            self.real_root = root.absolute()
        self.provided = {normalise(p) for p in provided if isinstance(p, str)}
        self.found: list[Requirement] = []
        self.skipped: list[tuple[str, str, int, str]] = []
        self.programs: list[ProgramUse] = []
        self.files: list[str] = []
        self.local_modules: set[str] = set()
        self.read_requirement_files: set[str] = set()

    def run(self) -> None:
        self._walk()
        trees = self._python_files()  # PEP 723 blocks now, imports after every declared source
        self._declared_files()
        skill_md = next((n for n in SKILL_FILE_NAMES if n in self.files), None)
        text = self.read(skill_md) if skill_md else None
        if text is not None:
            self.bounded(skill_md, _scan_skill_md, self, skill_md, text)
        for rel, tree in trees.items():
            self.bounded(rel, _scan_imports, self, rel, tree)
            self.bounded(rel, _scan_python_programs, self, rel, tree)
        self._shell_files()

    def bounded(self, rel: str, step, *args) -> None:
        """Run one file's step; a file built to exhaust the parser (nesting thousands deep, a huge
        expression) is skipped with the reason instead of taking the whole analysis down."""
        try:
            step(*args)
        except (RecursionError, MemoryError) as exc:
            self.skip(rel, rel, 0, f"too deeply nested or too large to read ({type(exc).__name__}): skipped")

    def _python_files(self) -> dict[str, ast.AST]:
        """Read every script once: its PEP 723 block, and its syntax tree for imports and programs."""
        trees = {}
        for rel in self.files:
            text = self.read(rel) if rel.endswith(".py") else None
            if text is not None:
                self.bounded(rel, _scan_pep723, self, rel, text)
                tree = _parse(self, rel, text)
                if tree is not None:
                    trees[rel] = tree
        return trees

    def _declared_files(self) -> None:
        for rel in self.files:
            name = PurePosixPath(rel).name
            if fnmatch.fnmatch(name.lower(), "requirements*.txt"):
                self.bounded(rel, self.requirements_file, rel)
            elif name == "pyproject.toml":
                self.bounded(rel, _scan_pyproject, self, rel)

    def _shell_files(self) -> None:
        for rel in self.files:
            text = self.read(rel) if rel.endswith((".sh", ".bash")) else None
            for lineno, line in enumerate((text or "").splitlines(), 1):
                _shell_programs(self, rel, lineno, line)

    def _walk(self) -> None:
        """List the skill's files (sorted, capped), and note every module name the skill defines."""
        seen = 0
        for dirpath, dirnames, filenames in os.walk(self.root):  # followlinks=False: no walking out
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            rel_dir = Path(dirpath).relative_to(self.root).as_posix()
            self.local_modules.update(d for d in dirnames if d.isidentifier())
            for name in sorted(filenames):
                seen += 1
                if seen > MAX_FILES:
                    self.skip("", ".", 0, f"the skill has more than {MAX_FILES} files: only the first "
                                          f"{MAX_FILES} were looked at")
                    return
                self.files.append(name if rel_dir == "." else f"{rel_dir}/{name}")
                if name.endswith(".py"):
                    self.local_modules.add(name[:-3])

    def inside(self, rel: str) -> Path | None:
        """The real path of `rel` when it stays inside the skill, else None."""
        try:
            real = (self.root / rel).resolve()
        except (OSError, RuntimeError):
            return None
        return real if real == self.real_root or self.real_root in real.parents else None

    def read(self, rel: str) -> str | None:
        """The file's text, or None with a note in `skipped` (outside the skill, too big, not UTF-8)."""
        real = self.inside(rel)
        if real is None:
            self.skip(rel, rel, 0, "the file is a link that leaves the skill: not read")
            return None
        try:
            if not real.is_file():
                return None
            if real.stat().st_size > MAX_BYTES:
                self.skip(rel, rel, 0, f"larger than {MAX_BYTES} bytes: not read")
                return None
            return real.read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError:
            self.skip(rel, rel, 0, "not UTF-8 text: not read")
        except OSError as exc:
            self.skip(rel, rel, 0, f"could not be read: {exc.strerror or exc}")
        return None

    # --- recording -----------------------------------------------------------------------------------

    def skip(self, text: str, rel: str, line: int, why: str) -> None:
        # what the skill wrote (a requirement, a file name) is escaped: it cannot forge a line of a report
        self.skipped.append((shown(text, 200), shown(rel, 300), line, why))

    def declare(self, text: str, source: str, rel: str, line: int, detail: str = "") -> None:
        """One requirement string from a declared source, or a skipped entry saying why not."""
        try:
            name, spec = _parse_requirement(text)
        except _Skip as why:
            self.skip(text.strip(), rel, line, str(why))
            return
        self.found.append(Requirement(name, spec, source, shown(rel, 300), line, detail))

    def program(self, program: str, rel: str, line: int, via: str = "") -> None:
        use = ProgramUse(program, shown(rel, 300), line, via)
        if program in KNOWN_PROGRAMS and use not in self.programs:
            self.programs.append(use)

    def requirements_file(self, rel: str, included_from: str = "") -> None:
        if rel in self.read_requirement_files:
            return
        self.read_requirement_files.add(rel)
        text = self.read(rel)
        if text is not None:
            _scan_requirements(self, rel, text, included_from)

    def chosen(self, *, provided: bool) -> list[Requirement]:
        """One requirement per distribution, the best source winning, split by `provided`."""
        best: dict[str, Requirement] = {}
        ranked = sorted(enumerate(self.found), key=lambda p: (SOURCE_ORDER.index(p[1].source), p[0]))
        for _, req in ranked:
            best.setdefault(req.key, req)
        return [r for r in best.values() if (r.key in self.provided) == provided]


