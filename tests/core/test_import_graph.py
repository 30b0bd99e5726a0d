"""The house rules, read from the package's own source with `ast` (nothing is imported):

- no circles: the graph of the package's imports, function-level imports included, has no cycle;
- layers: a module imports only its own layer and the layers before it in `LAYERS` (and, inside the sandbox,
  only its own room and the rooms below it in `SANDBOX_ROOMS`);
- size: no module over `MAX_LINES` lines unless its docstring has a line starting "Size:" saying why.

Run as a script (`python tests/core/test_import_graph.py [PACKAGE_DIR]`) it prints what breaks the rules in
any copy of the package, for example an older tree.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ipyskills"
MAX_LINES = 650

# The layer order, lowest first: a module may import its own layer and the ones before it. A module belongs
# to the layer of its longest matching prefix ("ipyskills" alone is the package root).
LAYERS = (
    ("shared", ("ipyskills.errors", "ipyskills.settings")),
    ("core", ("ipyskills.core",)),
    ("sandbox", ("ipyskills.sandbox",)),
    ("agent", ("ipyskills.agent",)),
    ("notebook", ("ipyskills.notebook",)),
    ("root", ("ipyskills", "ipyskills.agent_loop")),  # the public face, and the deprecated old paths
    ("cli", ("ipyskills.cli", "ipyskills.__main__")),
)

# Rooms of the sandbox layer, in the same way: a room imports its own modules and the rooms of lower rank;
# rooms of one rank (the two backends and the guard) import nothing from each other. Anything of the layer
# not named here is the base room.
SANDBOX_ROOMS = {"ipyskills.sandbox.guard": 1, "ipyskills.sandbox.docker": 1, "ipyskills.sandbox.local": 1,
                 "ipyskills.sandbox.provision": 2, "ipyskills.sandbox.runner": 3}

# The one allowed reach downward. `SkillRegistry` is the object everything talks to; its `run`,
# `tool_schemas`, `dispatch`, `for_agent`, `eval_trigger` and `budget` hand over to the layer that does the
# work, importing it inside the method, so loading the core never loads those layers. Only function-level
# imports from these modules to these layers are allowed (and they still count for circles).
DELEGATIONS = {"ipyskills.core.registry": ("ipyskills.sandbox", "ipyskills.agent")}


def modules(package: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package under `package`."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(package: Path) -> dict[str, dict[str, bool]]:
    """module -> {imported module: True when some import of it is at module level}."""
    mods = modules(package)
    graph: dict[str, dict[str, bool]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {id(node) for node in tree.body}
        top |= {id(n) for node in tree.body if isinstance(node, (ast.If, ast.Try)) for n in ast.walk(node)}
        edges = graph.setdefault(name, {})
        for node in ast.walk(tree):
            for target in _targets(name, path.name == "__init__.py", node, mods):
                if target != name:
                    edges[target] = edges.get(target, False) or id(node) in top
    return graph


def _targets(name: str, is_package: bool, node: ast.AST, mods: dict) -> list[str]:
    if isinstance(node, ast.Import):
        wanted = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = name.split(".") if is_package else name.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        # `from pkg import sub` imports the submodule; `from mod import name` imports mod.
        wanted = [f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module for a in node.names]
    else:
        return []
    found = []
    for target in wanted:
        while target not in mods and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in mods:
            found.append(target)
    return found


def layer_of(module: str) -> int | None:
    best, rank = -1, None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            hit = module == prefix or (prefix != "ipyskills" and module.startswith(prefix + "."))
            if hit and len(prefix) > best:
                best, rank = len(prefix), index
    return rank


def tangles(graph: dict[str, dict[str, bool]]) -> list[list[str]]:
    """The strongly connected parts with more than one module (Tarjan): each module of a part reaches every
    other through imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    parts: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                parts.append(sorted(part))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return parts


def cycles(graph: dict[str, dict[str, bool]]) -> list[list[str]]:
    """One closed path through each tangle, for the message."""
    return [_closed_path(graph, part) for part in tangles(graph)]


def _closed_path(graph: dict, part: list[str]) -> list[str]:
    """A shortest path from the part's first module back to itself, inside the part (for the message)."""
    inside, start = set(part), part[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph.get(v, {})):
            if w == start:
                return paths[v] + [start]
            if w in inside and w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return part


def sandbox_room(module: str) -> tuple[str, int] | None:
    if not module.startswith("ipyskills.sandbox."):
        return None
    for prefix, rank in SANDBOX_ROOMS.items():
        if module == prefix or module.startswith(prefix + "."):
            return prefix, rank
    return "ipyskills.sandbox (base)", 0


def room_breaks(graph: dict[str, dict[str, bool]]) -> list[str]:
    found = []
    for module, edges in sorted(graph.items()):
        for target in sorted(edges):
            mine, theirs = sandbox_room(module), sandbox_room(target)
            if mine and theirs and mine[0] != theirs[0] and theirs[1] >= mine[1]:
                found.append(f"{module} (room {mine[0]}) imports {target} (room {theirs[0]})")
    return found


def layer_breaks(graph: dict[str, dict[str, bool]]) -> list[str]:
    found = [f"{module} is in no layer; add it to LAYERS" for module in sorted(graph) if layer_of(module) is None]
    for module, edges in sorted(graph.items()):
        for target, at_top in sorted(edges.items()):
            if None in (layer_of(target), layer_of(module)) or layer_of(target) <= layer_of(module):
                continue
            allowed = DELEGATIONS.get(module, ())
            if not at_top and any(target == p or target.startswith(p + ".") for p in allowed):
                continue
            found.append(f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} "
                         f"({LAYERS[layer_of(target)][0]}{', at module level' if at_top else ''})")
    return found


def oversized(package: Path) -> list[str]:
    found = []
    for name, path in modules(package).items():
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        if lines > MAX_LINES:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if not any(line.startswith("Size:") for line in doc.splitlines()):
                found.append(f"{name}: {lines} lines, and no 'Size:' line in its docstring saying why")
    return found


def test_the_package_has_no_import_cycle():
    graph = imports(PACKAGE)
    found = [f"{' -> '.join(path)} (tangled: {', '.join(part)})" for path, part in zip(cycles(graph), tangles(graph))]
    assert not found, "import cycles:\n" + "\n".join(found)


def test_each_layer_imports_only_the_layers_before_it():
    found = layer_breaks(imports(PACKAGE))
    assert not found, "imports against the layer order:\n" + "\n".join(found)


def test_sandbox_rooms_import_only_rooms_below_them():
    found = room_breaks(imports(PACKAGE))
    assert not found, "imports against the sandbox's room order:\n" + "\n".join(found)


def test_no_module_is_oversized_without_a_reason():
    found = oversized(PACKAGE)
    assert not found, "\n".join(found)


def test_delegations_are_function_level_only():
    graph = imports(PACKAGE)
    for module, layers in DELEGATIONS.items():
        for target, at_top in graph[module].items():
            assert not (at_top and any(target.startswith(p) for p in layers)), f"{module} loads {target} on import"


def test_the_checks_see_function_level_imports(tmp_path):
    # A circle closed only by an import inside a function is still a circle.
    pkg = tmp_path / "ipyskills"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("from . import b\n")
    (pkg / "core" / "b.py").write_text("def f():\n    from .a import x\n")
    assert cycles(imports(pkg)) == [["ipyskills.core.a", "ipyskills.core.b", "ipyskills.core.a"]]


if __name__ == "__main__":
    where = Path(sys.argv[1]) / "ipyskills" if len(sys.argv) > 1 else PACKAGE
    graph = imports(where)
    for path, part in zip(cycles(graph), tangles(graph)):
        print("cycle:", " -> ".join(path), f"({len(part)} modules tangled: {', '.join(part)})")
    for line in layer_breaks(graph):
        print("layer:", line)
    for line in room_breaks(graph):
        print("room:", line)
    for line in oversized(where):
        print("size:", line)
