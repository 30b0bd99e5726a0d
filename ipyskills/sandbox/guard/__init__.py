"""Static checks on a script before it runs: early, readable feedback; the container stays the boundary.

Python is checked on its syntax tree, shell on tokens (quotes, comments, continuations, heredocs and
command substitutions understood), JavaScript on its code with comments and strings set aside. The rules
and name lists are data in `rules`. Findings are `block` (destructive or escape attempts) or `warn`.
Each language has its own module (`python`, `shell`, `javascript`, `other`), loaded on the first check.

Public: `check_file`, `check_source`, `check_args`, `GuardReport`, `detect_language`, `script_files`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ...errors import ConfigError
from ..result import Finding
from . import rules as R
from .common import _finalize, _finding, _Hit, _short, check_as


@dataclass
class GuardReport:
    """The findings for one file. `blocked` is true when any finding has severity `block`."""

    path: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def blocked(self) -> bool:
        return any(f.severity == R.BLOCK for f in self.findings)

    def to_dict(self) -> dict:
        return {"path": self.path, "blocked": self.blocked, "findings": [f.to_dict() for f in self.findings]}


# --- entry points -------------------------------------------------------------------------------------------


def check_file(path: Path | str, display_path: str | None = None, language: str | None = None) -> GuardReport:
    """Check one script file; the language comes from its extension, else its shebang line (or `language`).

    Never raises for a bad file: an unreadable, binary, non-UTF-8 or oversized file gives a `warn`
    finding on line 0 (the file as a whole) and whatever could be checked.
    """
    if language is not None and language not in R.LANGUAGES:
        raise ConfigError(f"guard language must be one of {', '.join(R.LANGUAGES)}, got {language!r}")
    path = Path(path)
    shown = str(path) if display_path is None else display_path
    try:
        with open(path, "rb") as fh:
            data = fh.read(R.MAX_BYTES + 1)
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        return GuardReport(shown, [_finding(("guard-unreadable", 0, f"cannot read {shown} ({reason})"), shown)])
    hits: list[_Hit] = []
    if len(data) > R.MAX_BYTES:
        data = data[: R.MAX_BYTES]
        data = data[: data.rfind(b"\n") + 1] or data  # cut at a line end so the last line is whole
        hits.append(("guard-partial", 0, f"only the first {R.MAX_BYTES // 1024} KiB were read"))
    if b"\x00" in data[:8192]:
        return GuardReport(shown, [_finding(("guard-binary", 0, "NUL bytes near the start"), shown)])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", "replace")
        hits.append(("guard-encoding", 0, f"invalid UTF-8 at byte {exc.start}"))
    text = text.lstrip("\ufeff")
    hits.extend(_check_text(text, language or detect_language(path, text)))
    return GuardReport(shown, _finalize(hits, shown))


def check_source(text: str, language: str, display_path: str = "") -> GuardReport:
    """Check script text held in memory. `language` is one of python, shell, javascript, other."""
    if language not in R.LANGUAGES:
        raise ConfigError(f"guard language must be one of {', '.join(R.LANGUAGES)}, got {language!r}")
    return GuardReport(display_path, _finalize(_check_text(text, language), display_path))


def check_args(args: list[str]) -> list[Finding]:
    """Findings for the arguments of a run; `line` is the argument's 1-based position, `path` is "args".

    Arguments reach the script as an argv list, never through a shell, so shell operators, `$VAR`,
    backticks, newlines and Markdown in them are plain data and are not findings. `../` is not one either:
    what a script can open is decided by the sandbox's mounts, not by a string test, and relative paths
    like `../data.csv` are ordinary. What is flagged: what exec() itself would refuse (a NUL byte, an
    argument over the kernel's per-argument limit) and naming a credential file.
    """
    hits = []
    for pos, arg in enumerate(args, start=1):
        if "\x00" in arg:
            hits.append(("arg-nul", pos, f"argument {pos}"))
        elif len(arg.encode("utf-8", "surrogateescape")) >= R.MAX_ARG_BYTES:
            hits.append(("arg-too-long", pos, f"argument {pos} has {len(arg)} characters"))
        elif R.is_sensitive_path(arg) or ("=" in arg and R.is_sensitive_path(arg.split("=", 1)[1])):
            hits.append(("arg-sensitive-file", pos, f"argument {pos} is {_short(arg)!r}"))
    return _finalize(hits, "args")


def detect_language(path: Path | str, text: str = "") -> str:
    """python, shell, javascript or other: by extension, else by the shebang line."""
    suffix = PurePosixPath(str(path)).suffix.lower()
    if suffix in R.EXTENSION_LANGUAGE:
        return R.EXTENSION_LANGUAGE[suffix]
    first = text.split("\n", 1)[0]
    if not first.startswith("#!"):
        return "other"
    words = first[2:].split()
    if words and PurePosixPath(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    if not words:
        return "other"
    program = re.sub(r"[\d.]+$", "", PurePosixPath(words[0]).name)
    return R.SHEBANG_LANGUAGE.get(program, "other")


def script_files(folder: Path | str) -> list[Path]:
    """The scripts inside a folder, sorted: files with a script extension, or no extension and a shebang.
    VCS, cache and environment folders are skipped."""
    found = []
    for path in sorted(Path(folder).rglob("*")):
        if _SKIP_DIRS & set(path.parts) or not path.is_file():
            continue
        suffix = path.suffix.lower()
        if suffix in R.EXTENSION_LANGUAGE:
            found.append(path)
        elif not suffix:
            try:
                with open(path, "rb") as fh:
                    if fh.read(2) == b"#!":
                        found.append(path)
            except OSError:
                continue
    return found


_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__",
                        ".ipynb_checkpoints", ".mypy_cache", ".pytest_cache", ".tox"})


def _check_text(text: str, language: str) -> list[_Hit]:
    return check_as(language, text)  # the checkers load on first use, not on import
