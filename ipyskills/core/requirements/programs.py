"""Programs a skill calls (soffice, pdftoppm, pandoc, node, ...) from Python and shell scripts and from shell
blocks in SKILL.md, which decide the sandbox image profile."""

from __future__ import annotations

import ast
import re
from pathlib import PurePosixPath

# --- 5. programs ------------------------------------------------------------------------------------------

# Functions whose first argument is a command line or a program name (matched on the last name part, so
# `sp.run` after `import subprocess as sp` counts too; only known program names are ever recorded).
_RUNNERS = frozenset({"run", "call", "check_call", "check_output", "Popen", "system", "popen", "which",
                      "execvp", "execlp", "spawnlp", "create_subprocess_exec", "create_subprocess_shell"})
_SHELL_PREFIXES = frozenset({"sudo", "exec", "time", "nohup", "command", "env", "if", "then", "else", "elif",
                             "do", "while", "until", "!", "{", "("})


def _scan_python_programs(scan, rel: str, tree: ast.AST) -> None:
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


def _shell_programs(scan, rel: str, lineno: int, line: str) -> None:
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
