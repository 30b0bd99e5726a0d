"""Inferred requirements: the imports in the scripts' syntax trees, mapped to distributions by the hand-checked
table (`core.import_names`) and then the generated `data/import_map.json`; an unknown name is skipped, never
guessed."""

from __future__ import annotations

import ast
import json
import sys
import threading
from collections.abc import Iterable

from ..import_names import GENERIC_IMPORT_NAMES, IMPORT_NAMES
from ..pyparse import PARSE_LOCK as _PARSE_LOCK
from ..requirement_text import shown
from .records import IMPORT_MAP, PROGRAMS_BEHIND_IMPORTS, Requirement, _Skip, normalise

_MAP_LOCK = threading.Lock()
_generated: tuple[dict[str, str], frozenset[str]] | None = None


# --- 4. imports -------------------------------------------------------------------------------------------


def _parse(scan, rel: str, text: str) -> ast.AST | None:
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


def _scan_imports(scan, rel: str, tree: ast.AST) -> None:
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


