"""Which Python distributions (and which programs) a skill needs, and where each one came from.

The Agent Skills specification has no dependencies field, so published skills say what they need in
several informal ways. `analyze(skill_dir)` reads them all, bounded and without running anything:

1. PEP 723 blocks (`# /// script` ... `dependencies = [...]`) in every `*.py` of the skill;
2. `requirements*.txt` anywhere in the skill (with `-r` includes that stay inside it), and
   `[project].dependencies` of a `pyproject.toml`;
3. `pip install` / `pip3 install` / `python -m pip install` / `uv pip install` / `uv add` commands in
   SKILL.md, in fenced code blocks and inline code; lines marked optional are skipped;
4. imports in the scripts' syntax trees, mapped to distributions (`import_names.IMPORT_NAMES`, then the
   generated `data/import_map.json`); an import that maps to nothing known is reported, never guessed;
5. calls of known programs (soffice, pdftoppm, pandoc, node, ...) from Python and shell scripts and from
   shell blocks in SKILL.md, which decide the sandbox image profile.

Sources 1-3 are "declared"; imports are "inferred". One entry is kept per distribution: declared beats
inferred, and among declared ones pep723 > requirements > pyproject > skill-md. A distribution the
sandbox image already has goes to `provided` instead of `python`. Anything not turned into a requirement
(optional lines, GPU-only packages, URLs, unknown imports, unreadable files) goes to `skipped` with why.
"""

from __future__ import annotations

import ast
import fnmatch
import json
import os
import re
import shlex
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .import_names import GENERIC_IMPORT_NAMES, IMPORT_NAMES
from .pyparse import PARSE_LOCK as _PARSE_LOCK
from .requirement_text import UnsafeRequirement, checked, shown
from .resources import SKILL_FILE_NAMES, SKIP_DIRS

MAX_FILES = 2000  # files looked at per skill; a bigger skill is cut and says so in `skipped`
MAX_BYTES = 1 << 20  # a file larger than this is not read

SOURCE_ORDER = ("pep723", "requirements", "pyproject", "skill-md", "import")  # precedence, best first

KNOWN_PROGRAMS = frozenset({
    "soffice", "libreoffice", "pdftoppm", "pdftotext", "pdfimages", "pdfinfo", "qpdf", "pandoc", "node",
    "npm", "npx", "tesseract", "convert", "magick", "ffmpeg", "gs", "java", "Rscript", "latex", "pdflatex",
    "xelatex",
})
# Programs only the "office" sandbox image carries.
OFFICE_PROGRAMS = frozenset({
    "soffice", "libreoffice", "pdftoppm", "pdftotext", "pdfimages", "pdfinfo", "qpdf", "pandoc", "node",
    "npm", "npx", "tesseract", "gs",
})
# Python packages that do their work by running a program: importing one means the scripts need it.
PROGRAMS_BEHIND_IMPORTS: dict[str, tuple[str, ...]] = {
    "pdf2image": ("pdftoppm", "pdfinfo"),  # poppler-utils
    "pypandoc": ("pandoc",),
    "pytesseract": ("tesseract",),
    "ocrmypdf": ("tesseract", "gs", "qpdf"),
    "camelot": ("gs",),
    "unoserver": ("soffice",),
}
_OFFICE_WORDS = re.compile(r"libre\s*office|\bsoffice\b|poppler|pandoc|tesseract|ghostscript|\bnode(?:\.?js)?\b",
                           re.IGNORECASE)

BASE_REQUIREMENTS = Path(__file__).resolve().parent.parent / "sandbox" / "docker" / "images" / "base-requirements.txt"
IMPORT_MAP = Path(__file__).resolve().parent / "data" / "import_map.json"

# ast.parse is not thread-safe on CPython 3.11 under heavy concurrency: every parse goes through this.
_MAP_LOCK = threading.Lock()
_generated: tuple[dict[str, str], frozenset[str]] | None = None


@dataclass(frozen=True)
class Requirement:
    name: str  # distribution name as written or mapped, e.g. "python-docx"
    spec: str  # PEP 508 string for a resolver, specifiers and extras kept, e.g. "markitdown[pptx]>=0.1"
    source: str  # "pep723" | "requirements" | "pyproject" | "skill-md" | "import"
    file: str  # '/'-separated, relative to the skill root
    line: int  # 1-based
    detail: str = ""  # e.g. "import docx", "uv pip install line"

    @property
    def declared(self) -> bool:
        return self.source != "import"

    @property
    def key(self) -> str:
        return normalise(self.name)

    def to_dict(self) -> dict:
        return {"name": self.name, "spec": self.spec, "source": self.source, "file": self.file,
                "line": self.line, "detail": self.detail, "declared": self.declared, "key": self.key}


@dataclass(frozen=True)
class ProgramUse:
    program: str
    file: str
    line: int
    via: str = ""  # the Python package that runs it ("pdf2image"), when the script does not call it itself

    def to_dict(self) -> dict:
        return {"program": self.program, "file": self.file, "line": self.line, "via": self.via}

    def describe(self) -> str:
        return f"{self.program} ({self.file}:{self.line}{', via ' + self.via if self.via else ''})"


@dataclass
class SkillRequirements:
    skill: str
    python: list[Requirement] = field(default_factory=list)
    provided: list[Requirement] = field(default_factory=list)  # the sandbox image already has these
    skipped: list[tuple[str, str, int, str]] = field(default_factory=list)  # (text, file, line, why)
    programs: list[ProgramUse] = field(default_factory=list)
    profile: str | None = None  # "office" when the scripts need the office image

    def specs(self, mode: str = "auto") -> list[str]:
        """The specs to install: "auto" all of `python`, "declared" only declared ones, "off" none."""
        if mode == "off":
            return []
        if mode not in ("auto", "declared"):
            raise ValueError(f"mode must be 'auto', 'declared' or 'off', got {mode!r}")
        return [r.spec for r in self.python if mode == "auto" or r.declared]

    def to_dict(self) -> dict:
        return {
            "skill": self.skill,
            "profile": self.profile,
            "python": [r.to_dict() for r in self.python],
            "provided": [r.to_dict() for r in self.provided],
            "skipped": [{"text": t, "file": f, "line": n, "why": w} for t, f, n, w in self.skipped],
            "programs": [p.to_dict() for p in self.programs],
        }


def normalise(name: str) -> str:
    """PEP 503 form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def default_provided() -> frozenset[str]:
    """Distribution names in the sandbox image's base set (empty when that file is missing)."""
    try:
        text = BASE_REQUIREMENTS.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return frozenset()
    names = set()
    for line in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        match = _NAME.match(line) if line and not line.startswith("-") else None
        if match:
            names.add(match["name"])
    return frozenset(names)


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


class _Skip(Exception):
    """A requirement text that is not turned into a requirement; the message says why."""


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


# --- requirement strings ----------------------------------------------------------------------------------

_NAME = re.compile(r"^\s*(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?P<extras>\[[^\]]*\])?"
                   r"\s*(?P<rest>.*)$", re.DOTALL)
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^(?:git|hg|svn|bzr)\+", re.IGNORECASE)
_NOT_WHEELS = "not installable from the registry as wheels"
_TOOLING = frozenset({"pip", "setuptools", "wheel", "uv"})


def _parse_requirement(text: str) -> tuple[str, str]:
    """(distribution name, PEP 508 spec) for one requirement string; raises _Skip saying why not."""
    text = text.strip()
    if not (text.isascii() and text.isprintable()):
        raise _Skip("contains control or non-ASCII characters: refused (a line break would start an "
                    "installer option)")
    if text.startswith("-"):
        raise _Skip("an installer option, not a requirement: refused")
    if _URL.match(text):
        raise _Skip(f"a URL: {_NOT_WHEELS}")
    if re.match(r"^[^;@]*\s@\s|^[A-Za-z0-9._-]+(\[[^\]]*\])?@", text):
        raise _Skip(f"a direct URL reference: {_NOT_WHEELS}")
    if text.startswith((".", "/", "~")) or text.endswith((".whl", ".tar.gz", ".zip")):
        raise _Skip(f"a local path: {_NOT_WHEELS}")
    match = _NAME.match(text)
    if not match or "/" in match["name"]:
        raise _Skip("not a requirement (PEP 508) string")
    name, rest = match["name"], match["rest"].strip()
    if rest and not re.match(r"^[<>=!~(;]", rest):
        raise _Skip("not a requirement (PEP 508) string")
    if "+cu" in rest or normalise(name).startswith("cupy"):
        raise _Skip("GPU-only (CUDA build): the sandbox has no GPU")
    if normalise(name) in _TOOLING:
        raise _Skip("installer tooling, not something the skill's scripts import")
    try:  # the resolver only ever sees the normalised form, never the text as written
        return checked(text)
    except UnsafeRequirement as why:
        raise _Skip(f"{why}: refused") from None


# --- 1. PEP 723 -------------------------------------------------------------------------------------------

_PEP723 = re.compile(r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$")


def _scan_pep723(scan: _Scan, rel: str, text: str) -> None:
    for block in _PEP723.finditer(text):
        if block["type"] != "script":
            continue
        start = text.count("\n", 0, block.start()) + 1
        content = "".join(line[2:] if line.startswith("# ") else line[1:]
                          for line in block["content"].splitlines(keepends=True))
        try:
            deps = _read_dependencies(content, table=None)
        except ValueError as exc:
            scan.skip("# /// script", rel, start, f"malformed PEP 723 block: {exc}")
            continue
        lines = text.splitlines()
        for dep in deps:
            scan.declare(dep, "pep723", rel, _line_of(lines, dep, start), "PEP 723 block")


def _read_dependencies(toml_text: str, table: str | None) -> list[str]:
    """`dependencies` (of `[table]`, or top-level) from TOML text; ValueError when it cannot be read."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = None
    if tomllib is None:
        return _dependencies_fallback(toml_text, table)
    try:
        data = tomllib.loads(toml_text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"not valid TOML ({exc})") from None
    if table is not None:
        data = data.get(table, {})
    deps = data.get("dependencies", []) if isinstance(data, dict) else []
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise ValueError("`dependencies` is not a list of strings")
    return deps


def _dependencies_fallback(toml_text: str, table: str | None) -> list[str]:
    """Without tomllib (3.10): the `dependencies = [...]` array of plain strings, read as a literal."""
    if table is not None:
        section = re.search(rf"(?ms)^\[{re.escape(table)}\]\s*$(.*?)(?=^\[|\Z)", toml_text)
        if not section:
            return []
        toml_text = section.group(1)
    elif re.search(r"(?m)^\[", toml_text):
        toml_text = re.split(r"(?m)^\[", toml_text, maxsplit=1)[0]
    match = re.search(r"(?ms)^dependencies\s*=\s*(\[.*?\])\s*$", toml_text)
    if not match:
        return []
    array = re.sub(r"(?m)#[^\"'\n]*$", "", match.group(1))
    try:
        deps = ast.literal_eval(array)
    except (ValueError, SyntaxError):
        raise ValueError("`dependencies` could not be read without tomllib (Python 3.11+)") from None
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise ValueError("`dependencies` is not a list of strings")
    return deps


def _line_of(lines: list[str], dep: str, start: int) -> int:
    """The 1-based line at or after `start` holding the quoted string `dep` (else `start`)."""
    for index in range(max(start - 1, 0), len(lines)):
        if f'"{dep}"' in lines[index] or f"'{dep}'" in lines[index]:
            return index + 1
    return start


# --- 2. requirements files and pyproject.toml -------------------------------------------------------------


def _scan_requirements(scan: _Scan, rel: str, text: str, included_from: str) -> None:
    detail = f"included from {included_from}" if included_from else ""
    for lineno, line in _logical_lines(text):
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if not line:
            continue
        include = re.match(r"^(?:-r|--requirement)(?:\s*=\s*|\s*)(\S+)$", line)
        if include:
            _include(scan, rel, lineno, line, include.group(1))
        elif re.match(r"^(?:-e|--editable)\b", line):
            scan.skip(line, rel, lineno, f"an editable install: {_NOT_WHEELS}")
        elif re.match(r"^(?:-c|--constraint)\b", line):
            scan.skip(line, rel, lineno, "a constraints file: constrains versions, installs nothing")
        elif line.startswith("-"):
            why = ("GPU-only (CUDA package index): the sandbox has no GPU" if _is_cuda_index(line)
                   else "a pip option: the sandbox installs from its configured registry")
            scan.skip(line, rel, lineno, why)
        else:  # per-requirement options (--hash=..., --config-settings) are not part of the PEP 508 string
            scan.declare(re.split(r"\s+--?[A-Za-z]", line, maxsplit=1)[0], "requirements", rel, lineno, detail)


def _logical_lines(text: str):
    """(first line number, line) with backslash continuations joined."""
    pending, first = "", 0
    for lineno, line in enumerate(text.splitlines(), 1):
        if not pending:
            first = lineno
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        yield first, pending + line
        pending = ""
    if pending:
        yield first, pending


def _include(scan: _Scan, rel: str, lineno: int, line: str, target: str) -> None:
    inc = (PurePosixPath(rel).parent / target).as_posix()
    if scan.inside(inc) is None or ".." in PurePosixPath(os.path.normpath(inc)).parts:
        scan.skip(line, rel, lineno, "an include outside the skill: not read")
    elif not (scan.root / inc).is_file():
        scan.skip(line, rel, lineno, "an include of a file the skill does not have")
    else:
        scan.requirements_file(os.path.normpath(inc).replace(os.sep, "/"), included_from=rel)


def _is_cuda_index(text: str) -> bool:
    return bool(re.search(r"(?:-i|--index-url|--extra-index-url)[\s=]+\S*(?:/cu\d|cuda)", text, re.IGNORECASE))


def _scan_pyproject(scan: _Scan, rel: str) -> None:
    text = scan.read(rel)
    if text is None:
        return
    try:
        deps = _read_dependencies(text, table="project")
    except ValueError as exc:
        scan.skip("[project] dependencies", rel, 0, f"pyproject.toml not read: {exc}")
        return
    lines = text.splitlines()
    start = next((i + 1 for i, line in enumerate(lines) if line.strip() == "[project]"), 1)
    for dep in deps:
        scan.declare(dep, "pyproject", rel, _line_of(lines, dep, start), "[project].dependencies")


# --- 3. install commands in SKILL.md ----------------------------------------------------------------------

_INSTALL = re.compile(r"(?:^|(?<=[\s;&|(!%`$]))(?P<cmd>(?:python3?(?:\.\d+)?\s+-m\s+)?pip3?(?:\.\d+)?\s+install"
                      r"|uv\s+pip\s+install|uv\s+add)(?=\s|$)(?P<args>[^;&|`\n]*)")
_FENCE = re.compile(r"^\s{0,3}(?P<marker>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
_HEADING = re.compile(r"^\s{0,3}(?P<level>#{1,6})\s+(?P<text>.*)$")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_OPTIONAL = re.compile(r"\boptional(?:ly)?\b", re.IGNORECASE)
_SHELL_LANGS = frozenset({"bash", "sh", "shell", "console", "zsh"})
# pip/uv options that take a value: the value is not a package.
_VALUE_FLAGS = frozenset({
    "-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url", "--extra-index-url",
    "-f", "--find-links", "-t", "--target", "--prefix", "--root", "--python", "-p", "--platform",
    "--python-version", "--implementation", "--abi", "--only-binary", "--no-binary", "--src", "--cache-dir",
    "--trusted-host", "--upgrade-strategy", "--index", "--default-index", "--optional", "--group",
    "--progress-bar", "--extra", "--package", "--directory",
})


def _scan_skill_md(scan: _Scan, rel: str, text: str) -> None:
    """Install commands (and shell programs) in SKILL.md, with the Markdown context that marks them optional."""
    lines = text.splitlines()
    headings: list[tuple[int, bool]] = []  # (level, says optional) of the headings above
    fence: tuple[str, str] | None = None  # (marker, language) of the open code block
    comment_optional = False  # the comment line(s) directly above said "optional"
    index = _body_start(lines)
    while index < len(lines):
        line, lineno = lines[index], index + 1
        if fence is None:
            fence, comment_optional = _open_fence(line), False
            if fence is None:
                _prose_line(scan, rel, lineno, line, headings)
            index += 1
            continue
        if line.strip().startswith(fence[0][0] * len(fence[0])) and not line.strip().strip(fence[0][0]):
            fence, index = None, index + 1
            continue
        logical, index = _join_continuations(lines, index)
        comment_optional = _code_line(scan, rel, lineno, logical, fence[1], comment_optional,
                                      any(opt for _, opt in headings))


def _body_start(lines: list[str]) -> int:
    """Index of the first line after the frontmatter (0 when there is none)."""
    if lines and lines[0].strip() == "---":
        for index in range(1, len(lines)):
            if lines[index].strip() == "---":
                return index + 1
    return 0


def _open_fence(line: str) -> tuple[str, str] | None:
    match = _FENCE.match(line)
    return (match["marker"], match["lang"].lower()) if match else None


def _join_continuations(lines: list[str], index: int) -> tuple[str, int]:
    """A code line with its backslash continuations, and the index after them."""
    logical = lines[index]
    while logical.rstrip().endswith("\\") and index + 1 < len(lines) and not _FENCE.match(lines[index + 1]):
        index += 1
        logical = logical.rstrip()[:-1] + " " + lines[index]
    return logical, index + 1


def _prose_line(scan: _Scan, rel: str, lineno: int, line: str, headings: list[tuple[int, bool]]) -> None:
    heading = _HEADING.match(line)
    if heading:
        level = len(heading["level"])
        while headings and headings[-1][0] >= level:
            headings.pop()
        headings.append((level, bool(_OPTIONAL.search(heading["text"]))))
        return
    # Inline code: "optional" anywhere in the sentence marks it, as a comment would in a code block.
    optional = any(opt for _, opt in headings) or bool(_OPTIONAL.search(line))
    for span in _INLINE_CODE.finditer(line):
        _install_commands(scan, rel, lineno, span.group(2), optional)


def _code_line(scan: _Scan, rel: str, lineno: int, line: str, lang: str, comment_optional: bool,
               heading_optional: bool) -> bool:
    """One line of a code block; returns whether the next line sits under an "optional" comment."""
    stripped = line.strip()
    if not stripped:
        return False
    if stripped.startswith("#") and not stripped.startswith("#!"):
        return comment_optional or bool(_OPTIONAL.search(stripped))
    comment = re.search(r"\s#.*$", line)
    on_line = bool(comment and _OPTIONAL.search(comment.group(0)))
    _install_commands(scan, rel, lineno, line, heading_optional or comment_optional or on_line)
    if lang in _SHELL_LANGS:
        _shell_programs(scan, rel, lineno, line)
    return False


def _install_commands(scan: _Scan, rel: str, lineno: int, text: str, optional: bool) -> None:
    for match in _INSTALL.finditer(text):
        kind = " ".join(match["cmd"].split())
        args = re.split(r"\s#", match["args"], maxsplit=1)[0]
        detail = f"{kind} line"
        if optional:
            scan.skip(f"{kind}{args}".strip(), rel, lineno, "marked optional")
            continue
        _install_args(scan, rel, lineno, args, detail)


def _install_args(scan: _Scan, rel: str, lineno: int, args: str, detail: str) -> None:
    try:
        tokens = shlex.split(args)
    except ValueError:
        scan.skip(args.strip(), rel, lineno, "install command not understood (unbalanced quotes)")
        return
    packages, gpu, optional = _split_flags(scan, rel, lineno, tokens)
    for package in packages:
        if gpu:
            scan.skip(package, rel, lineno, "GPU-only (CUDA package index): the sandbox has no GPU")
        elif optional:
            scan.skip(package, rel, lineno, "an optional or development dependency (uv add --optional/--dev)")
        else:
            scan.declare(package, "skill-md", rel, lineno, detail)


def _split_flags(scan: _Scan, rel: str, lineno: int, tokens: list[str]) -> tuple[list[str], bool, bool]:
    """(package tokens, GPU index named, uv add --optional/--dev) of one install command's arguments."""
    packages, gpu, optional = [], False, False
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not token.startswith("-") or token == "-":
            packages.append(token)
            continue
        flag, _, value = token.partition("=")
        if flag in _VALUE_FLAGS and not value and index < len(tokens):
            value, index = tokens[index], index + 1
        gpu = gpu or _is_cuda_index(f"{flag} {value}")
        optional = optional or flag in ("--optional", "--dev")
        if flag in ("-r", "--requirement"):
            _install_requirements_arg(scan, rel, lineno, value)
        elif flag in ("-e", "--editable"):
            scan.skip(f"{flag} {value}", rel, lineno, f"an editable install: {_NOT_WHEELS}")
    return packages, gpu, optional


def _install_requirements_arg(scan: _Scan, rel: str, lineno: int, target: str) -> None:
    """`pip install -r FILE` in SKILL.md: read FILE when the skill has it, say so when it does not."""
    path = os.path.normpath(target).replace(os.sep, "/")
    if path.startswith("..") or os.path.isabs(path) or scan.inside(path) is None or not (scan.root / path).is_file():
        scan.skip(f"-r {target}", rel, lineno, "a requirements file the skill does not have")
    else:
        scan.requirements_file(path, included_from=rel)


# --- 4. imports -------------------------------------------------------------------------------------------


def _parse(scan: _Scan, rel: str, text: str) -> ast.AST | None:
    try:
        with _PARSE_LOCK:
            return ast.parse(text, filename=rel)
    except (RecursionError, MemoryError) as exc:
        scan.skip(rel, rel, 0, f"too deeply nested or too large to parse ({type(exc).__name__}): its imports "
                               "were not read")
        return None
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", 0) or 0
        scan.skip(rel, rel, line, f"not valid Python ({getattr(exc, 'msg', exc)}): its imports were not read")
        return None


class _Imports(ast.NodeVisitor):
    """Top-level module names imported anywhere in a file: (name, line, statement, inside try/ImportError)."""

    def __init__(self):
        self.found: list[tuple[str, int, str, bool]] = []
        self._guarded = 0  # depth of `try:` bodies whose handlers catch ImportError

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            top = alias.name.split(".")[0]
            self.found.append((top, node.lineno, f"import {alias.name}", self._guarded > 0))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            top = node.module.split(".")[0]
            self.found.append((top, node.lineno, f"from {node.module} import", self._guarded > 0))

    def visit_Try(self, node) -> None:
        guarded = any(_catches_import_error(h.type) for h in node.handlers)
        self._guarded += guarded
        for child in node.body:
            self.visit(child)
        self._guarded -= guarded
        for child in [*node.handlers, *node.orelse, *node.finalbody]:
            self.visit(child)

    visit_TryStar = visit_Try


def _catches_import_error(node) -> bool:
    names = node.elts if isinstance(node, ast.Tuple) else [node]
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names)


def _scan_imports(scan: _Scan, rel: str, tree: ast.AST) -> None:
    visitor = _Imports()
    visitor.visit(tree)
    declared = {r.key for r in scan.found if r.declared}
    for name, line, statement, guarded in visitor.found:
        if name in sys.stdlib_module_names or name == "__future__" or name in scan.local_modules:
            continue
        for program in PROGRAMS_BEHIND_IMPORTS.get(name, ()):
            scan.program(program, rel, line, via=name)
        detail = statement + (" (optional import)" if guarded else "")
        try:
            dist = _distribution_for(name, known=declared | scan.provided)
        except _Skip as why:
            if not any(s[0] == name and s[3] == str(why) for s in scan.skipped):  # once per name
                scan.skip(name, rel, line, str(why))
            continue
        scan.found.append(Requirement(dist, dist, "import", shown(rel, 300), line, detail))


def _distribution_for(module: str, known: Iterable[str] = ()) -> str:
    """The distribution that provides top-level `module`; raises _Skip when there is no safe answer.

    Order: the curated table; a distribution already declared or provided under the same name; the
    generated map; a top PyPI distribution whose import name is its own name."""
    if module in IMPORT_NAMES:
        dist = IMPORT_NAMES[module]
        if dist is None:
            raise _Skip(f"ambiguous import name {module} (several distributions provide it): "
                        "declare it (PEP 723 or requirements.txt)")
        return dist
    if normalise(module) in set(known):
        return module
    if module in GENERIC_IMPORT_NAMES:
        raise _Skip(f"generic import name {module} (most likely a module of the skill's own, or a mistake; "
                    "several unrelated distributions install it): declare the package if one is meant")
    modules, identity = _generated_map()
    if module in modules:
        return modules[module]
    if normalise(module) in identity:
        return normalise(module)
    raise _Skip(f"unknown import name {module}: declare it (PEP 723 or requirements.txt)")


def _generated_map() -> tuple[dict[str, str], frozenset[str]]:
    """data/import_map.json, loaded on first need (a missing or broken file means an empty map)."""
    global _generated
    with _MAP_LOCK:
        if _generated is None:
            try:
                data = json.loads(IMPORT_MAP.read_text(encoding="utf-8"))
                _generated = (dict(data["modules"]), frozenset(data["identity"]))
            except (OSError, ValueError, KeyError, TypeError):
                _generated = ({}, frozenset())
        return _generated


# --- 5. programs ------------------------------------------------------------------------------------------

# Functions whose first argument is a command line or a program name (matched on the last name part, so
# `sp.run` after `import subprocess as sp` counts too; only known program names are ever recorded).
_RUNNERS = frozenset({"run", "call", "check_call", "check_output", "Popen", "system", "popen", "which",
                      "execvp", "execlp", "spawnlp", "create_subprocess_exec", "create_subprocess_shell"})
_SHELL_PREFIXES = frozenset({"sudo", "exec", "time", "nohup", "command", "env", "if", "then", "else", "elif",
                             "do", "while", "until", "!", "{", "("})


def _scan_python_programs(scan: _Scan, rel: str, tree: ast.AST) -> None:
    lists = _list_assignments(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and _call_name(node.func) in _RUNNERS:
            program = _first_word(node.args[0], lists)
            if program:
                scan.program(program, rel, node.lineno)


def _list_assignments(tree: ast.AST) -> dict[str, ast.AST]:
    """`cmd = ["soffice", ...]` assignments, so `subprocess.run(cmd)` is understood too."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple)):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, node.value)
    return found


def _call_name(func: ast.AST) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _first_word(arg: ast.AST, lists: dict[str, ast.AST]) -> str:
    if isinstance(arg, ast.Name) and arg.id in lists:
        arg = lists[arg.id]
    if isinstance(arg, (ast.List, ast.Tuple)) and arg.elts:
        arg = arg.elts[0]
    if isinstance(arg, ast.JoinedStr) and arg.values:
        arg = arg.values[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.split():
        return PurePosixPath(arg.value.split()[0]).name
    return ""


def _shell_programs(scan: _Scan, rel: str, lineno: int, line: str) -> None:
    """Command words at the start of a shell line and after `&&`, `||`, `;` and `|`."""
    line = line.strip()
    if not line or line.startswith("#"):
        return
    line = re.sub(r"^\$\s+", "", line)
    for command in re.split(r"&&|\|\||;|\|", line):
        words = command.split()
        while words and (words[0] in _SHELL_PREFIXES or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0])):
            words.pop(0)
        if words:
            scan.program(PurePosixPath(words[0]).name, rel, lineno)
