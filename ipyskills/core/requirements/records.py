"""What the requirement scan finds: the records (`Requirement`, `ProgramUse`, `SkillRequirements`), the scan's
bounds and source order, and the requirement-string form every source is read into."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..requirement_text import UnsafeRequirement, checked

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

BASE_REQUIREMENTS = Path(__file__).resolve().parents[2] / "sandbox" / "docker" / "images" / "base-requirements.txt"
IMPORT_MAP = Path(__file__).resolve().parents[1] / "data" / "import_map.json"


class _Skip(Exception):
    """A requirement text that is not turned into a requirement; the message says why."""


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


