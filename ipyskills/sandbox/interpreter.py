"""Which program runs a script: by file extension, else by its shebang line; and how a Python script that
imports its own skill's modules is started.

Agent clients run a skill's scripts from the skill folder, often as `python -m scripts.x`, so published
scripts do `from scripts.helpers import ...` or relative imports. Called by path, Python would only see the
script's own folder. For such a script (seen statically: an import of a top-level folder or module of the
skill that is not beside the script, or a relative import) the run starts a few lines of bootstrap
(`_SKILL_IMPORTS`) that put the skill root at the END of the module path, so a skill file can only supply
names that the standard library and the image's packages do not: it never shadows them. A script with
relative imports runs as the module it is (`scripts.x`, as `python -m` would); the writable working
folder is never on the path. Every other script is run by path exactly as before.
"""

from __future__ import annotations

import ast
import shlex
from pathlib import Path, PurePosixPath

from ..core.pyparse import PARSE_LOCK as _PARSE_LOCK  # one lock for every ast.parse in the process
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


MAX_SCAN_BYTES = 1 << 20  # a bigger script is run by path as it is

# Runs as `python3 -c _SKILL_IMPORTS ROOT MODULE PATH ARGS...`; stdlib only (the image's python3 or ours).
_SKILL_IMPORTS = (
    "import os, runpy, sys\n"
    "root, module, path = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3]\n"
    "sys.argv = [path, *sys.argv[4:]]\n"
    "sys.path[0:1] = [] if module else [os.path.dirname(os.path.abspath(path))]\n"
    "sys.path.append(root)\n"
    "runpy.run_module(module, run_name='__main__', alter_sys=True) if module else "
    "runpy.run_path(path, run_name='__main__')\n"
)


def python_command(script_file: Path, rel_path: str, run_path: str, skill_root: str) -> list[str] | None:
    """`python3 -c <bootstrap> ...` for a Python script that imports its own skill's modules (see the
    module's docstring), else None (run it by path)."""
    shape = skill_import_shape(script_file, rel_path)
    if shape is None:
        return None
    module = PurePosixPath(rel_path).with_suffix("").as_posix().replace("/", ".") if shape == "module" else ""
    return ["python3", "-c", _SKILL_IMPORTS, skill_root, module, run_path]


def skill_import_shape(script_file: Path, rel_path: str) -> str | None:
    """"module" (relative imports: run as a module), "path" (imports a top-level name of the skill that is
    not beside the script), or None."""
    rel = PurePosixPath(rel_path)
    if rel.suffix != ".py" or len(rel.parts) < 2:
        return None  # a script at the skill root already sees the root
    try:
        if script_file.stat().st_size > MAX_SCAN_BYTES:
            return None
        source = script_file.read_bytes()
        with _PARSE_LOCK:  # ast.parse is not thread-safe on CPython 3.11 under concurrent runs
            tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError, SystemError):
        return None
    root = script_file.parents[len(rel.parts) - 1]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            return "module" if all(p.isidentifier() for p in rel.with_suffix("").parts) else None
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
    beside = script_file.parent
    for name in names:
        at_root = (root / name).is_dir() or (root / f"{name}.py").is_file()
        if at_root and not ((beside / name).exists() or (beside / f"{name}.py").exists()):
            return "path"
    return None
