"""Declared requirements from files: PEP 723 blocks in scripts, `requirements*.txt` (with `-r` includes that
stay inside the skill) and `pyproject.toml`'s `[project].dependencies`."""

from __future__ import annotations

import ast
import os
import re
from pathlib import PurePosixPath

from .records import _NOT_WHEELS

# --- 1. PEP 723 -------------------------------------------------------------------------------------------

_PEP723 = re.compile(r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$")


def _scan_pep723(scan, rel: str, text: str) -> None:
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


def _scan_requirements(scan, rel: str, text: str, included_from: str) -> None:
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


def _include(scan, rel: str, lineno: int, line: str, target: str) -> None:
    inc = (PurePosixPath(rel).parent / target).as_posix()
    if scan.inside(inc) is None or ".." in PurePosixPath(os.path.normpath(inc)).parts:
        scan.skip(line, rel, lineno, "an include outside the skill: not read")
    elif not (scan.root / inc).is_file():
        scan.skip(line, rel, lineno, "an include of a file the skill does not have")
    else:
        scan.requirements_file(os.path.normpath(inc).replace(os.sep, "/"), included_from=rel)


def _is_cuda_index(text: str) -> bool:
    return bool(re.search(r"(?:-i|--index-url|--extra-index-url)[\s=]+\S*(?:/cu\d|cuda)", text, re.IGNORECASE))


def _scan_pyproject(scan, rel: str) -> None:
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


