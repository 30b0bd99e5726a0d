"""Install lines in SKILL.md: `pip install`, `python -m pip install`, `uv pip install`, `uv add` in fenced
shell blocks and inline code; lines the text marks optional are skipped."""

from __future__ import annotations

import os
import re
import shlex

from .programs import _shell_programs
from .records import _NOT_WHEELS
from .sources import _is_cuda_index

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


def _scan_skill_md(scan, rel: str, text: str) -> None:
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


def _prose_line(scan, rel: str, lineno: int, line: str, headings: list[tuple[int, bool]]) -> None:
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


def _code_line(scan, rel: str, lineno: int, line: str, lang: str, comment_optional: bool,
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


def _install_commands(scan, rel: str, lineno: int, text: str, optional: bool) -> None:
    for match in _INSTALL.finditer(text):
        kind = " ".join(match["cmd"].split())
        args = re.split(r"\s#", match["args"], maxsplit=1)[0]
        detail = f"{kind} line"
        if optional:
            scan.skip(f"{kind}{args}".strip(), rel, lineno, "marked optional")
            continue
        _install_args(scan, rel, lineno, args, detail)


def _install_args(scan, rel: str, lineno: int, args: str, detail: str) -> None:
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


def _split_flags(scan, rel: str, lineno: int, tokens: list[str]) -> tuple[list[str], bool, bool]:
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


def _install_requirements_arg(scan, rel: str, lineno: int, target: str) -> None:
    """`pip install -r FILE` in SKILL.md: read FILE when the skill has it, say so when it does not."""
    path = os.path.normpath(target).replace(os.sep, "/")
    if path.startswith("..") or os.path.isabs(path) or scan.inside(path) is None or not (scan.root / path).is_file():
        scan.skip(f"-r {target}", rel, lineno, "a requirements file the skill does not have")
    else:
        scan.requirements_file(path, included_from=rel)


