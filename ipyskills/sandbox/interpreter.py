"""Which program runs a script: by file extension, else by its shebang line."""

from __future__ import annotations

import shlex
from pathlib import Path, PurePosixPath

from ..errors import SandboxError

BY_EXTENSION = {
    ".py": ["python3"],
    ".sh": ["bash"],
    ".bash": ["bash"],
    ".js": ["node"],
    ".mjs": ["node"],
    ".rb": ["ruby"],
    ".pl": ["perl"],
}

# A shebang may only name one of these programs (by basename), so a script cannot pick an arbitrary binary.
KNOWN_PROGRAMS = {"python", "python3", "bash", "sh", "node", "ruby", "perl"}


def command_for(script_file: Path, rel_path: str) -> list[str]:
    """The argv prefix that runs `rel_path` (relative to the skill root, which is the working directory)."""
    suffix = PurePosixPath(rel_path).suffix.lower()
    if suffix in BY_EXTENSION:
        return [*BY_EXTENSION[suffix], rel_path]
    program = _shebang_program(script_file)
    if program:
        return [*program, rel_path]
    raise SandboxError(
        f"cannot tell how to run {rel_path!r}: use an extension ({', '.join(sorted(BY_EXTENSION))}) "
        "or a first line like '#!/usr/bin/env python3'"
    )


def _shebang_program(script_file: Path) -> list[str] | None:
    try:
        with open(script_file, "rb") as fh:
            first = fh.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    try:
        words = shlex.split(first[2:].decode("utf-8", "replace"))
    except ValueError:
        return None
    if not words:
        return None
    if PurePosixPath(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
        if not words:
            return None
    name = PurePosixPath(words[0]).name
    if name not in KNOWN_PROGRAMS:
        return None
    return ["python3" if name == "python" else name, *words[1:2]]
