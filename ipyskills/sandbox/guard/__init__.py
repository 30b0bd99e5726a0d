"""Static checks on a script before it runs: early, readable feedback; the container stays the boundary.

Python is checked on its syntax tree, shell on tokens (quotes, comments, continuations, heredocs and
command substitutions understood), JavaScript on its code with comments and strings set aside. The rules
and name lists are data in `rules`. Findings are `block` (destructive or escape attempts) or `warn`.

Public: `check_file`, `check_source`, `check_args`, `GuardReport`, `detect_language`, `script_files`.
"""

from __future__ import annotations

import ast
import builtins
import io
import posixpath
import re
import shlex
import tokenize
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ...errors import ConfigError
from ..result import Finding
from . import rules as R

# A hit is (rule id, line, detail); it becomes a Finding once the path is known.
_Hit = tuple


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


# --- shared helpers -----------------------------------------------------------------------------------------


def _check_text(text: str, language: str) -> list[_Hit]:
    if language == "python":
        return _check_python(text)
    if language == "shell":
        return _ShellChecker(text).run()
    if language == "javascript":
        return _check_javascript(text)
    return _check_other(text)


def _finding(hit: _Hit, path: str) -> Finding:
    rule_id, line, detail = hit
    rule = R.RULES[rule_id]
    note = R.BLOCK_NOTE if rule.severity == R.BLOCK else R.WARN_NOTE
    detail = " ".join(detail.split())  # one finding, one output line, whatever the script contained
    return Finding(rule_id, rule.severity, line, f"{detail}: {rule.why}. {note}", path)


def _finalize(hits: list[_Hit], path: str) -> list[Finding]:
    """One finding per (rule, line), ordered by line, blocks first."""
    seen: set = set()
    unique = []
    for hit in hits:
        key = (hit[0], hit[1])
        if key not in seen:
            seen.add(key)
            unique.append(hit)
    findings = [_finding(h, path) for h in unique]
    findings.sort(key=lambda f: (f.line, f.severity != R.BLOCK, f.rule))
    return findings


def _nested(hits: list[_Hit], line: int, context: str) -> list[_Hit]:
    """Hits from code embedded in a string, reported on the line of the call that runs it."""
    return [(rule, line, f"{detail} (in {context})") for rule, _, detail in hits]


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- Python -------------------------------------------------------------------------------------------------

_BUILTIN_NAMES = frozenset(dir(builtins))
_DANGEROUS_TARGETS = (R.PY_EVAL_BUILTINS | R.PY_SHELL_CALLS | R.PY_UNSAFE_DESERIALIZE | R.PY_YAML_UNSAFE_CALLS
                      | {"pty.spawn", "builtins.__import__", "builtins.compile"})
_KNOWN_CALLS = (_DANGEROUS_TARGETS | R.PY_SUBPROCESS_CALLS | R.PY_DELETE_CALLS | R.PY_CHMOD_CALLS
                | R.PY_PATH_CALLS | R.PY_YAML_LOAD)
# Modules where a computed attribute name (`getattr(os, name)`) may reach a dangerous function.
_SENSITIVE_MODULES = frozenset({"builtins", "builtins.__dict__", "os", "subprocess", "pty", "pickle", "marshal"})


def _check_python(text: str) -> list[_Hit]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as exc:  # ValueError: NUL bytes in source
        line = getattr(exc, "lineno", None) or 0
        msg = getattr(exc, "msg", str(exc))
        return [("py-syntax-error", line, f"SyntaxError: {msg}"), *_python_text_scan(text)]
    checker = _PythonChecker(tree)
    checker.visit(tree)
    return checker.hits


class _PythonChecker(ast.NodeVisitor):
    """Resolves what each call really names (imports, aliases, builtins) and applies the Python rules."""

    def __init__(self, tree: ast.AST):
        self.hits: list[_Hit] = []
        self.aliases: dict[str, str] = {}
        self.star_modules: list[str] = []
        self.bound: set[str] = set()
        self.tainted: set[str] = set()
        self.endless_loops = 0
        self._collect_taint(self._collect(tree))

    # -- name resolution --

    def _collect(self, tree):
        """One pass over the tree: imports and aliases, names bound locally, and assignments (for taint)."""
        assignments = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                if not isinstance(node.ctx, ast.Load):
                    self.bound.add(node.id)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.aliases[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if a.name == "*":
                        self.star_modules.append(node.module)
                    else:
                        self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.bound.add(node.name)
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self.bound.add(node.name)
            if isinstance(node, ast.Assign):
                assignments.append((node.targets, node.value))
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
                assignments.append(([node.target], node.value))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                assignments.append(([node.target], node.iter))
        return assignments

    def _collect_taint(self, assignments):
        """Names assigned (directly or through other such names) from input, argv or the environment."""
        for _ in range(3):  # a few rounds follow short chains (a = input(); b = a.strip()) at linear cost
            remaining = []
            for targets, value in assignments:
                if self._from_input(value):
                    for target in targets:
                        self.tainted.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
                else:
                    remaining.append((targets, value))
            if len(remaining) == len(assignments):
                break
            assignments = remaining

    def qualname(self, node) -> str | None:
        """Dotted name a node refers to (`o.system` after `import os as o` -> 'os.system'), else None."""
        if isinstance(node, ast.Name):
            name = node.id
            if name in self.aliases:
                return self.aliases[name]
            if name == "__builtins__":
                return "builtins"
            if name in self.bound:
                return None
            if name in _BUILTIN_NAMES:
                return "builtins." + name
            for module in self.star_modules:
                if f"{module}.{name}" in _KNOWN_CALLS:
                    return f"{module}.{name}"
            return name
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            func = self.qualname(node.func)
            if func in R.PY_DYNAMIC_IMPORTS and node.args:
                return self.const_str(node.args[0])
            if func == "builtins.getattr" and len(node.args) >= 2:
                base, attr = self.qualname(node.args[0]), self.const_str(node.args[1])
                return f"{base}.{attr}" if base and attr else None
            if func == "builtins.vars" and node.args:
                base = self.qualname(node.args[0])
                return f"{base}.__dict__" if base else None
            if func == "builtins.globals":
                return "__globals__"
            return None
        if isinstance(node, ast.Subscript):
            base, key = self.qualname(node.value), self.const_str(node.slice)
            if key is None:
                return None
            if base in ("builtins", "builtins.__dict__"):
                return "builtins." + key
            if base == "sys.modules":
                return key
            if base == "__globals__" and key == "__builtins__":
                return "builtins"
        return None

    def const_str(self, node) -> str | None:
        """The value of a string expression built only from literals ('ev' + 'al', f'{"x"}'), else None."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.const_str(node.left), self.const_str(node.right)
            return left + right if left is not None and right is not None else None
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                inner = value.value if isinstance(value, ast.FormattedValue) else value
                text = self.const_str(inner)
                if text is None:
                    return None
                parts.append(text)
            return "".join(parts)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
                and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple))):
            sep = self.const_str(node.func.value)
            items = [self.const_str(e) for e in node.args[0].elts]
            if sep is not None and all(i is not None for i in items):
                return sep.join(items)
        return None

    def const_path(self, node) -> str | None:
        """A path built only from literals, `~`, os.path/pathlib helpers and $HOME, else None."""
        text = self.const_str(node)
        if text is not None:
            return text
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = self.const_path(node.left), self.const_path(node.right)
            return posixpath.join(left, right) if left is not None and right is not None else None
        name = self.qualname(node)
        if name == "os.sep":
            return "/"
        if isinstance(node, ast.Subscript) and self.qualname(node.value) == "os.environ":
            return "~" if self.const_str(node.slice) == "HOME" else None
        if not isinstance(node, ast.Call):
            return None
        func = self.qualname(node.func) or ""
        if func.endswith("Path.home") or func == "os.path.expanduser" and not node.args:
            return "~"
        if func in ("os.getenv", "os.environ.get") and node.args:
            return "~" if self.const_str(node.args[0]) == "HOME" else None
        if func in ("os.path.expanduser", "os.path.abspath", "os.path.realpath", "os.path.normpath",
                    "os.fspath", "builtins.str") and len(node.args) == 1:
            return self.const_path(node.args[0])
        if func in ("os.path.join", "pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath") and node.args:
            parts = [self.const_path(a) for a in node.args]
            return posixpath.join(*parts) if all(p is not None for p in parts) else None
        return None

    def _from_input(self, node) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in self.tainted:
                return True
            if isinstance(sub, (ast.Name, ast.Attribute, ast.Subscript)) and \
                    self.qualname(sub) in R.PY_INPUT_SOURCES:
                return True
            if isinstance(sub, ast.Call):
                func = sub.func
                if isinstance(func, ast.Attribute) and func.attr in ("parse_args", "parse_known_args"):
                    return True
        return False

    def _hit(self, rule: str, node, detail: str):
        self.hits.append((rule, getattr(node, "lineno", 0), detail))

    # -- visitors --

    def visit_While(self, node: ast.While):
        endless = isinstance(node.test, ast.Constant) and bool(node.test.value)
        self.endless_loops += endless
        self.generic_visit(node)
        self.endless_loops -= endless

    def visit_Import(self, node: ast.Import):
        for a in node.names:
            if a.name.split(".")[0] == "ctypes":
                self._hit("py-ctypes", node, "`import ctypes`")

    def visit_ImportFrom(self, node: ast.ImportFrom):
        if node.module and node.module.split(".")[0] == "ctypes" and not node.level:
            self._hit("py-ctypes", node, "`from ctypes import ...`")

    def visit_Subscript(self, node: ast.Subscript):
        base = self.qualname(node.value)
        if base in ("builtins", "builtins.__dict__") and not isinstance(node.ctx, ast.Store):
            key = self.const_str(node.slice)
            if key is None:
                self._hit("py-obfuscated-call", node, "a builtin looked up by a computed key")
            elif f"builtins.{key}" in _DANGEROUS_TARGETS:
                self._hit("py-obfuscated-call", node, f"`{key}` looked up as a builtins key")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call):
        name = self.qualname(node.func)
        if name:
            self._check_call(node, name)
        elif isinstance(node.func, ast.Attribute):
            # pathlib methods on a literal path: Path("/").rmdir(), (Path.home() / ".ssh/id_rsa").read_text()
            method, target = node.func.attr, self.const_path(node.func.value)
            if target is not None and method in ("rmdir", "unlink") and R.is_root_path(target):
                self._hit("py-rm-root", node, f"`.{method}()` on {target or '/'!r}")
            elif target and method in ("read_text", "read_bytes", "open") and R.is_sensitive_path(target):
                self._hit("py-sensitive-file", node, f"`.{method}()` on {target!r}")
        self.generic_visit(node)

    def _check_call(self, node: ast.Call, name: str):
        args = node.args
        short = name.removeprefix("builtins.")
        if name in R.PY_EVAL_BUILTINS:
            self._check_eval(node, short)
        elif name == "builtins.compile":
            if args and self.const_str(args[0]) is None:
                self._hit("py-compile", node, "`compile()` of a computed source")
        elif name in R.PY_DYNAMIC_IMPORTS:
            module = self.const_str(args[0]) if args else None
            if args and module is None:
                self._hit("py-dynamic-import", node, f"`{short}()` with a computed module name")
            elif module and module.split(".")[0] == "ctypes":
                self._hit("py-ctypes", node, f"`{short}({module!r})`")
        elif name in R.PY_SHELL_CALLS:
            self._hit("py-shell", node, f"`{short}()`")
            if args:
                self._check_command(args[0], node, short)
        elif name in R.PY_SUBPROCESS_CALLS or name.startswith(R.PY_SUBPROCESS_PREFIXES):
            self._check_subprocess(node, name)
        elif name == "pty.spawn":
            self._hit("py-pty-spawn", node, "`pty.spawn()`")
        elif name in R.PY_UNSAFE_DESERIALIZE:
            self._hit("py-unsafe-deserialize", node, f"`{name}()`")
        elif name in R.PY_YAML_UNSAFE_CALLS:
            self._hit("py-unsafe-yaml", node, f"`{name}()`")
        elif name in R.PY_YAML_LOAD:
            self._check_yaml_load(node, name)
        elif name in R.PY_DELETE_CALLS or name in R.PY_CHMOD_CALLS:
            target = self.const_path(args[0]) if args else None
            if target is not None and R.is_root_path(target):
                rule = "py-rm-root" if name in R.PY_DELETE_CALLS else "py-chmod-root"
                self._hit(rule, node, f"`{name}({target or '/'!r})`")
        elif name in ("os.fork", "os.forkpty") and self.endless_loops:
            self._hit("py-fork-bomb", node, f"`{name}()` inside `while True`")
        elif name == "builtins.getattr" and len(args) >= 2:
            self._check_getattr(node)
        elif name.startswith(R.PY_NETWORK_PREFIXES):
            self._hit("py-network", node, f"`{name}()`")
        if name in R.PY_PATH_CALLS:
            for arg in args:
                target = self.const_path(arg)
                if target and R.is_sensitive_path(target):
                    self._hit("py-sensitive-file", node, f"`{short}({target!r})`")

    def _check_eval(self, node: ast.Call, short: str):
        if not node.args:
            return
        source = node.args[0]
        literal = self.const_str(source)
        if literal is not None:
            self._hit("py-eval-literal", node, f"`{short}()` of a fixed string")
            try:
                inner = ast.parse(literal)
            except (SyntaxError, ValueError):
                return
            checker = _PythonChecker(inner)
            checker.visit(inner)
            self.hits.extend(_nested(checker.hits, node.lineno, f"the code passed to {short}()"))
        elif self._from_input(source):
            self._hit("py-eval-input", node, f"`{short}()` of input")
        else:
            self._hit("py-eval", node, f"`{short}()` of a computed value")

    def _check_getattr(self, node: ast.Call):
        base = self.qualname(node.args[0])
        if base not in _SENSITIVE_MODULES:
            return
        attr = self.const_str(node.args[1])
        module = "builtins" if base.startswith("builtins") else base
        if attr is None:
            self._hit("py-obfuscated-call", node, f"`getattr({module}, <computed name>)`")
        elif f"{module}.{attr}" in _DANGEROUS_TARGETS:
            self._hit("py-obfuscated-call", node, f"`getattr({module}, {attr!r})`")

    def _check_subprocess(self, node: ast.Call, name: str):
        shell = next((k.value for k in node.keywords if k.arg == "shell"), None)
        if isinstance(shell, ast.Constant) and shell.value:
            self._hit("py-shell", node, f"`{name}(..., shell=True)`")
        elif shell is not None and not isinstance(shell, ast.Constant):
            self._hit("py-subprocess", node, f"`{name}(..., shell=<computed>)`")
        else:
            self._hit("py-subprocess", node, f"`{name}()`")
        command = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "args"), None)
        if name.startswith(R.PY_SUBPROCESS_PREFIXES):  # os.execv(path, argv): the argv list comes second
            command = next((a for a in node.args if isinstance(a, (ast.List, ast.Tuple))), None)
        if command is not None:
            self._check_command(command, node, name.removeprefix("builtins."))

    def _check_command(self, command, node: ast.Call, via: str):
        """Shell rules on a command given as a literal string or a list of (mostly literal) words."""
        text = self.const_str(command)
        if text is None and isinstance(command, (ast.List, ast.Tuple)):
            words = [self.const_str(e) for e in command.elts]
            if not words or words[0] is None:
                return
            # ["bash", "-c", command] with a computed command is shell=True by another name
            if (PurePosixPath(words[0]).name in R.SHELLS and "-c" in words[1:-1]
                    and words[words.index("-c") + 1] is None):
                self._hit("py-shell", node, f"`{via}([{words[0]!r}, '-c', <computed>])`")
            text = " ".join(shlex.quote(w) if w is not None else "__VALUE__" for w in words)
        if text is None:
            return
        hits = _ShellChecker(text).run()
        self.hits.extend(_nested(hits, node.lineno, f"the command run by {via}(): {_short(text, 40)!r}"))

    def _check_yaml_load(self, node: ast.Call, name: str):
        loader = next((k.value for k in node.keywords if k.arg == "Loader"), None)
        if loader is None and len(node.args) >= 2:
            loader = node.args[1]
        if loader is None:
            return  # PyYAML >= 6 refuses yaml.load() without a Loader, so this cannot load unsafely
        loader_name = (self.qualname(loader) or "").rsplit(".", 1)[-1]
        if loader_name in R.PY_YAML_SAFE_LOADERS:
            return
        if loader_name in R.PY_YAML_UNSAFE_LOADERS:
            self._hit("py-unsafe-yaml", node, f"`{name}(..., Loader={loader_name})`")
        else:
            self._hit("py-yaml-loader", node, f"`{name}(..., Loader={loader_name or '<computed>'})`")


# Used only when the file does not parse: coarser, on code with strings and comments blanked out.
_PY_TEXT_RULES = [
    ("py-eval", re.compile(r"(?<![\w.])(eval|exec)\s*\("), "an `eval`/`exec` call"),
    ("py-shell", re.compile(r"\bos\s*\.\s*(system|popen)\s*\("), "an `os.system`/`os.popen` call"),
    ("py-shell", re.compile(r"\bshell\s*=\s*True\b"), "`shell=True`"),
    ("py-unsafe-deserialize", re.compile(r"\b(c?[pP]ickle|marshal|dill)\s*\.\s*(loads?|Unpickler)\s*\("),
     "an unpickling call"),
    ("py-unsafe-yaml", re.compile(r"\byaml\s*\.\s*unsafe_load"), "`yaml.unsafe_load`"),
    ("py-pty-spawn", re.compile(r"\bpty\s*\.\s*spawn\s*\("), "`pty.spawn()`"),
    ("py-subprocess", re.compile(r"\bsubprocess\s*\.\s*\w+\s*\("), "a `subprocess` call"),
    ("py-dynamic-import", re.compile(r"(?<![\w.])__import__\s*\("), "an `__import__` call"),
    ("py-ctypes", re.compile(r"^\s*(import|from)\s+ctypes\b"), "a ctypes import"),
    ("py-network", re.compile(r"\b(requests|httpx|urllib\.request|urllib2|http\.client|socket\.socket)\s*\."),
     "a network call"),
]


def _python_text_scan(text: str) -> list[_Hit]:
    hits = []
    for number, line in enumerate(_python_code_lines(text), start=1):
        for rule, pattern, detail in _PY_TEXT_RULES:
            if pattern.search(line):
                hits.append((rule, number, f"{detail} (text scan)"))
    return hits


def _python_code_lines(text: str) -> list[str]:
    """The source lines with string and comment tokens blanked, as far as the tokenizer gets."""
    lines = [list(line) for line in text.split("\n")]
    blank_kinds = {tokenize.STRING, tokenize.COMMENT}
    blank_kinds.update(getattr(tokenize, n) for n in ("FSTRING_MIDDLE",) if hasattr(tokenize, n))
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type not in blank_kinds:
                continue
            (r0, c0), (r1, c1) = tok.start, tok.end
            for row in range(r0, r1 + 1):
                chars = lines[row - 1]
                start = c0 if row == r0 else 0
                end = c1 if row == r1 else len(chars)
                chars[start:end] = " " * (end - start)
    except (tokenize.TokenError, SyntaxError, IndexError):
        pass  # the rest stays as it is: the scan is coarse by design
    return ["".join(chars) for chars in lines]


# --- shell --------------------------------------------------------------------------------------------------

# Syntax characters that were quoted or escaped are swapped for private-use characters before shlex runs,
# so a quoted ";" or "|" stays a word and a `$` inside single quotes is known to be literal.
_LITERAL = {c: chr(0xE000 + ord(c)) for c in ";&|()<>$`#"}
_UNLITERAL = str.maketrans({v: k for k, v in _LITERAL.items()})
_OPERATORS = sorted(["&>>", ";;&", "<<<", "&&", "||", "|&", ";;", ";&", "<<", ">>", "<&", ">&", "&>", "<>",
                     ">|", ";", "&", "|", "(", ")", "<", ">"], key=len, reverse=True)
_REDIRECTS = frozenset({"<", ">", ">>", "<>", ">|", "&>", "&>>", ">&", "<&", "<<", "<<<"})
_HEREDOC = re.compile(r"<<(-?)[ \t]*(?:'([^'\n]*)'|\"([^\"\n]*)\"|\\?([^\s;&|<>()]+))")
_SUB_TOKEN = re.compile(r"__IPYSUB(\d+)__")
_PLAIN_TOKEN = re.compile(r"[();<>|&]+|[^\s();<>|&]+")
_HEREDOC_TOKEN = re.compile(r"^__IPYSHD(\d+)__$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_INPUT_EXPANSION = re.compile(r"\$(\{)?([1-9@*]|[A-Za-z_][A-Za-z0-9_]*)")


def _lit(word: str) -> str:
    return word.translate(_UNLITERAL)


@dataclass
class _Sub:
    """A command or process substitution: its text, the line it starts on, and what it runs."""

    text: str
    line: int
    names: set = field(default_factory=set)  # command names inside, filled in when checked
    downloads: bool = False
    decodes: bool = False


@dataclass
class _Heredoc:
    body: str
    line: int


@dataclass
class _Command:
    words: list
    line: int
    pipeline: int
    position: int
    redirects: list = field(default_factory=list)  # (operator, target word)
    name: str = ""
    args: list = field(default_factory=list)  # raw words after the name
    assigns: list = field(default_factory=list)
    prefixes: list = field(default_factory=list)

    @property
    def options(self) -> list[str]:
        out = []
        for w in self.args:
            lw = _lit(w)
            if lw == "--":
                break
            if lw.startswith("-") and len(lw) > 1:
                out.append(lw)
        return out

    @property
    def operands(self) -> list[str]:
        out, after_dashes = [], False
        for w in self.args:
            lw = _lit(w)
            if lw == "--" and not after_dashes:
                after_dashes = True
            elif after_dashes or not (lw.startswith("-") and len(lw) > 1):
                out.append(w)
        return out


class _ShellChecker:
    """Splits a shell script into commands and pipelines, then applies the shell rules to them."""

    def __init__(self, text: str, base_line: int = 1, depth: int = 0):
        self.text = text
        self.base_line = base_line
        self.depth = depth
        self.hits: list[_Hit] = []
        self.subs: list[_Sub] = []
        self.heredocs: list[_Heredoc | None] = []
        self.commands: list[_Command] = []
        self.read_vars: set[str] = set()
        self._pipelines = 0

    def run(self) -> list[_Hit]:
        if self.depth > 8:  # nested bash -c "bash -c ..." deeper than any real script
            return []
        logical = self._scan()
        for sub in self.subs:
            self._check_sub(sub)
        for line, code in logical:
            self._parse(line, code)
        for cmd in self.commands:
            if cmd.name == "read":
                self.read_vars.update(_lit(w) for w in cmd.operands if re.match(r"^[A-Za-z_]\w*$", _lit(w)))
        for cmd in self.commands:
            self._check_command(cmd)
        self._check_pipelines()
        self._check_fifo_shell()
        self._check_fork_bomb(logical)
        return self.hits

    @property
    def names(self) -> set:
        return {c.name for c in self.commands if c.name}

    # -- scanning: comments, quotes, continuations, substitutions and heredocs --

    def _scan(self) -> list[tuple[int, str]]:
        text, n = self.text, len(self.text)
        out: list[tuple[int, str]] = []
        buf: list[str] = []
        line = start = self.base_line
        pending: list[tuple] = []  # heredocs opened on this line: delimiter, strip tabs, quoted, index
        quote = None
        i = 0
        while i < n:
            c = text[i]
            nxt = text[i + 1] if i + 1 < n else ""
            if quote == "'":
                if c == "'":
                    quote = None
                    buf.append(c)
                else:
                    buf.append(_LITERAL.get(c, c))
                    line += c == "\n"
                i += 1
                continue
            if quote == '"':
                if c == '"':
                    quote = None
                    buf.append(c)
                elif c == "\\" and nxt:
                    if nxt == "\n":
                        line += 1
                    elif nxt in "$`":
                        buf.append(_LITERAL[nxt])
                    else:
                        buf.append(c + nxt)
                    i += 2
                    continue
                elif c == "$" and text.startswith("$((", i):
                    i, line = self._skip_arithmetic(i, line, buf)
                    continue
                elif (c == "$" and nxt == "(") or c == "`":
                    i, line = self._take_sub(i, line, buf)
                    continue
                else:
                    buf.append(c if c == "$" else _LITERAL.get(c, c))
                    line += c == "\n"
                i += 1
                continue
            if c == "\\":
                if nxt == "\n":
                    line += 1
                elif nxt:
                    buf.append(_LITERAL.get(nxt, "\\" + nxt))
                i += 2
                continue
            if c in "'\"":
                quote = c
                buf.append(c)
            elif c == "#" and (not buf or buf[-1] in " \t;&|()"):
                end = text.find("\n", i)
                i = n if end < 0 else end
                continue
            elif c == "$" and text.startswith("$((", i):
                i, line = self._skip_arithmetic(i, line, buf)
                continue
            elif (c == "$" and nxt == "(") or c == "`" or (c in "<>" and nxt == "("):
                i, line = self._take_sub(i, line, buf)
                continue
            elif c == "<" and nxt == "<" and not text.startswith("<<<", i):
                m = _HEREDOC.match(text, i)
                if m:
                    delimiter = next(g for g in m.groups()[1:] if g is not None)
                    quoted = m.group(4) is None or "\\" in m.group(0)  # <<'EOF' or <<\EOF: no expansion
                    pending.append((delimiter, m.group(1) == "-", quoted, len(self.heredocs)))
                    buf.append(f" << __IPYSHD{len(self.heredocs)}__ ")
                    self.heredocs.append(None)
                    i = m.end()
                    continue
                buf.append(c)
            elif c == "\n":
                out.append((start, "".join(buf)))
                buf = []
                line += 1
                i += 1
                for delimiter, strip_tabs, quoted, index in pending:
                    i, line = self._take_heredoc(i, line, delimiter, strip_tabs, quoted, index)
                pending = []
                start = line
                continue
            else:
                buf.append(c)
            i += 1
        out.append((start, "".join(buf)))
        return [(ln, code) for ln, code in out if code.strip()]

    def _skip_arithmetic(self, i: int, line: int, buf: list) -> tuple[int, int]:
        depth, j = 0, i + 1
        while j < len(self.text):
            ch = self.text[j]
            depth += ch == "("
            depth -= ch == ")"
            j += 1
            if depth == 0:
                break
        buf.append("0")
        return j, line + self.text.count("\n", i, j)

    def _take_sub(self, i: int, line: int, buf: list) -> tuple[int, int]:
        text = self.text
        if text[i] == "`":
            j = i + 1
            while j < len(text) and text[j] != "`":
                j += 2 if text[j] == "\\" else 1
            inner = text[i + 1: j].replace("\\`", "`")
        else:
            j = _matching_paren(text, i + 2)
            inner = text[i + 2: j]
        buf.append(f"__IPYSUB{len(self.subs)}__")
        self.subs.append(_Sub(inner, line))
        return j + 1, line + text.count("\n", i, min(j + 1, len(text)))

    def _take_heredoc(self, i: int, line: int, delimiter: str, strip_tabs: bool, quoted: bool, index: int):
        text, body, first = self.text, [], line
        while i < len(text):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            current = text[i:end].rstrip("\r")
            i, line = end + 1, line + 1
            if (current.lstrip("\t") if strip_tabs else current) == delimiter:
                break
            body.append(current)
        self.heredocs[index] = _Heredoc("\n".join(body), first)
        if not quoted:  # an unquoted heredoc expands $(...) and `...` in its body: those commands run
            self._take_body_subs(self.heredocs[index])
        return i, line

    def _take_body_subs(self, doc: _Heredoc):
        text, k, line = doc.body, 0, doc.line
        while k < len(text):
            ch = text[k]
            if ch == "\\":
                k += 2
                continue
            if ch == "`" or (ch == "$" and text.startswith("$(", k) and not text.startswith("$((", k)):
                if ch == "`":
                    end = text.find("`", k + 1)
                    end = len(text) if end < 0 else end
                    inner = text[k + 1: end]
                else:
                    end = _matching_paren(text, k + 2)
                    inner = text[k + 2: end]
                self.subs.append(_Sub(inner, line + text.count("\n", 0, k)))
                k = end + 1
                continue
            k += 1

    def _check_sub(self, sub: _Sub):
        inner = _ShellChecker(sub.text, sub.line, self.depth + 1)
        self.hits.extend(inner.run())
        sub.names = inner.names
        sub.downloads = any(_downloads(c) for c in inner.commands) or any(s.downloads for s in inner.subs)
        sub.decodes = any(_decodes(c) for c in inner.commands) or any(s.decodes for s in inner.subs)

    # -- parsing tokens into commands --

    def _parse(self, line: int, code: str):
        if "'" in code or '"' in code or "\\" in code:
            lexer = shlex.shlex(code, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            lexer.commenters = ""
            try:
                tokens = list(lexer)
            except ValueError:  # an unclosed quote at the end of the file
                tokens = code.split()
        else:  # no quoting: the same split as shlex's, much faster
            tokens = _PLAIN_TOKEN.findall(code)
        cmd = self._new_command(line, 0)
        target_of = None
        for tok in tokens:
            if tok and all(ch in "();<>|&" for ch in tok):
                for op in _split_operators(tok):
                    if op in _REDIRECTS:
                        if cmd.words and cmd.words[-1].isdigit():
                            cmd.words.pop()  # the fd number of `2>`
                        target_of = op
                        continue
                    self._finish(cmd)
                    cmd = self._new_command(line, cmd.position + 1 if op in ("|", "|&") else 0)
                continue
            if target_of:
                cmd.redirects.append((target_of, tok))
                target_of = None
            else:
                cmd.words.append(tok)
        self._finish(cmd)

    def _new_command(self, line: int, position: int) -> _Command:
        if position == 0:
            self._pipelines += 1
        return _Command([], line, self._pipelines, position)

    def _finish(self, cmd: _Command):
        if cmd.words or cmd.redirects:
            self.commands.append(_normalize(cmd))

    # -- rules --

    def _hit(self, rule: str, cmd: _Command, detail: str):
        self.hits.append((rule, cmd.line, detail))

    def _check_command(self, cmd: _Command):
        name, ops = cmd.name, [_lit(w) for w in cmd.operands]
        options = cmd.options
        words = [_lit(w) for w in cmd.args]
        printing = name in ("echo", "printf", ":", "true", "false")
        self._check_assignments(cmd, cmd.assigns + (words if name in ("export", "declare", "typeset") else []))
        if name == "unset" and set(ops) & R.HISTORY_VARS or (name == "history" and "-c" in options):
            self._hit("sh-history", cmd, f"`{name} {' '.join(words)}`")
        for op, target in cmd.redirects:
            self._check_redirect(cmd, op, target)
        if not printing:
            for word in words:
                value = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
                if R.is_sensitive_path(value):
                    self._hit("sh-sensitive-file", cmd, f"`{name}` on {value!r}")
                if re.search(r"/dev/(tcp|udp)/|/inet/tcp/", value):
                    self._hit("sh-reverse-shell", cmd, f"`{name}` with {value!r}")
        if not name:
            return
        if set(cmd.prefixes) & R.PRIVILEGE_COMMANDS or name in R.PRIVILEGE_COMMANDS:
            self._hit("sh-privilege", cmd, "`sudo`" if "sudo" in cmd.prefixes else f"`{name}`")
        if name in R.CONTAINER_TOOLS:
            self._hit("sh-container-escape", cmd, f"`{name}` command")
        elif name.startswith("mkfs") or name in R.DISK_FORMAT_COMMANDS:
            self._hit("sh-disk-format", cmd, f"`{name}` command")
        elif name == "dd":
            for w in words:
                dev = w[3:] if w.startswith("of=") else ""
                if dev.startswith("/dev/") and dev not in R.SAFE_DEVICES and not dev.startswith("/dev/fd/"):
                    self._hit("sh-disk-write", cmd, f"`dd of={dev}`")
        elif name in ("rm", "rmdir", "shred", "unlink"):
            self._check_rm(cmd, options, ops)
        elif name == "find":
            self._check_find(cmd, words)
        elif name in ("chmod", "chown", "chgrp"):
            targets = ops[1:] if not any(o.startswith("--reference") for o in options) else ops
            if any(R.is_root_path(t) for t in targets):
                self._hit("sh-chmod-root", cmd, f"`{name} {' '.join(words)}`")
        elif name == "crontab":
            self._hit("sh-cron", cmd, "`crontab` command")
        elif name in R.POWER_COMMANDS or (name == "init" and ops[:1] in (["0"], ["6"])):
            self._hit("sh-power", cmd, f"`{name}` command")
        elif name in R.SERVICE_COMMANDS:
            if name == "systemctl" and set(ops) & {"poweroff", "reboot", "halt", "kexec"}:
                self._hit("sh-power", cmd, f"`systemctl {' '.join(ops)}`")
            else:
                self._hit("sh-service", cmd, f"`{name}` command")
        elif name in R.KERNEL_MODULE_COMMANDS:
            self._hit("sh-kernel-module", cmd, f"`{name}` command")
        elif name in R.ACCOUNT_COMMANDS:
            self._hit("sh-account", cmd, f"`{name}` command")
        elif name in ("cp", "mv", "tee", "install", "ln") and any(R.CRON_PATH.match(o) for o in ops):
            self._hit("sh-cron", cmd, f"`{name}` into a cron folder")
        elif name in ("mkfifo", "mknod"):
            pass  # judged with the whole file in _check_fifo_shell
        self._check_network(cmd, name, options, ops)
        self._check_reverse_shell(cmd, name, options, ops, words)
        self._check_code_runners(cmd, name, options)

    def _check_assignments(self, cmd: _Command, assigns: list[str]):
        for item in assigns:
            var, _, value = item.partition("=")
            var = var.rstrip("+")
            if var == "LD_PRELOAD" and value:
                self._hit("sh-ld-preload", cmd, f"`LD_PRELOAD={_short(value, 30)}`")
            elif var in R.HISTORY_VARS and value.strip("'\"") in ("", "0", "/dev/null"):
                self._hit("sh-history", cmd, f"`{var}={value}`")

    def _check_redirect(self, cmd: _Command, op: str, raw: str):
        target = _lit(raw)
        match = _HEREDOC_TOKEN.match(target)
        if op == "<<" and match:
            index = int(match.group(1))
            self._check_heredoc(cmd, self.heredocs[index] if index < len(self.heredocs) else None)
            return
        if op in ("<<", "<<<"):
            return  # a here-string is data
        if R.RAW_DEVICE.match(target):
            self._hit("sh-disk-write", cmd, f"redirect {op} {target}")
        elif R.CRON_PATH.match(target) and ">" in op:
            self._hit("sh-cron", cmd, f"redirect {op} {target}")
        elif re.search(r"/dev/(tcp|udp)/", target):
            self._hit("sh-reverse-shell", cmd, f"redirect {op} {target}")
        elif R.is_sensitive_path(target):
            self._hit("sh-sensitive-file", cmd, f"redirect {op} {target}")

    def _check_heredoc(self, cmd: _Command, doc: _Heredoc | None):
        if doc is None or not _reads_code_from_stdin(cmd):
            return
        language = _runner_language(cmd.name)
        if language == "shell":
            hits = _ShellChecker(doc.body, doc.line, self.depth + 1).run()
            self.hits.extend(hits)  # the body's own lines are exact
        elif language == "python":
            self.hits.extend((r, doc.line + ln - 1 if ln else doc.line, d) for r, ln, d in _check_python(doc.body))
        elif language == "javascript":
            self.hits.extend((r, doc.line + ln - 1 if ln else doc.line, d)
                             for r, ln, d in _check_javascript(doc.body))

    def _check_rm(self, cmd: _Command, options: list[str], ops: list[str]):
        recursive = any(re.match(r"^-[a-zA-Z]*[rR]", o) or o == "--recursive" for o in options)
        if "--no-preserve-root" in options:
            self._hit("sh-rm-root", cmd, f"`{cmd.name} --no-preserve-root`")
            return
        for target in ops:
            if (recursive or cmd.name == "shred") and R.is_root_path(target):
                self._hit("sh-rm-root", cmd, f"`{cmd.name} {' '.join(options)} {target}`")
            elif recursive and re.match(r"^\$\{?[A-Za-z_]\w*\}?/\*?$", target):
                self._hit("sh-rm-unset-var", cmd, f"`{cmd.name} {' '.join(options)} {target}`")

    def _check_find(self, cmd: _Command, words: list[str]):
        starts = []
        for w in words:
            if w.startswith("-") or w in ("(", "!", ")"):
                break
            starts.append(w)
        if "-delete" in words and any(R.is_root_path(s) for s in starts):
            self._hit("sh-rm-root", cmd, f"`find {' '.join(starts)} -delete`")
        for k, w in enumerate(words):
            if w in ("-exec", "-execdir", "-ok", "-okdir"):
                tail = []
                for x in cmd.args[k + 1:]:
                    if _lit(x) in (";", "+"):
                        break
                    tail.append(x)
                inner = _normalize(_Command(tail, cmd.line, cmd.pipeline, 0))
                if inner.name:
                    self._check_command(inner)

    def _check_network(self, cmd: _Command, name: str, options: list[str], ops: list[str]):
        if name in R.NETWORK_COMMANDS:
            self._hit("sh-network", cmd, f"`{name}` command")
        elif name in R.NETWORK_SUBCOMMANDS and ops[:1] and ops[0] in R.NETWORK_SUBCOMMANDS[name]:
            self._hit("sh-network", cmd, f"`{name} {ops[0]}`")
        elif name == "rsync" and any("::" in o or o.startswith("rsync://") or re.match(r"^[\w.@-]+:", o)
                                     for o in ops):
            self._hit("sh-network", cmd, "`rsync` to a remote host")
        elif name.startswith("python") and "-m" in options:
            module = _option_value(cmd, "-m")
            if module in ("http.server", "pip", "SimpleHTTPServer"):
                self._hit("sh-network", cmd, f"`{name} -m {module}`")

    def _check_reverse_shell(self, cmd: _Command, name: str, options: list[str], ops: list[str],
                             words: list[str]):
        if name in R.SHELLS and "-i" in _leading_options(cmd):
            self._hit("sh-reverse-shell", cmd, f"interactive `{name} -i` in a script")
        elif name in ("nc", "ncat", "netcat") and any(
                re.match(r"^-[a-zA-Z]*[ec]", o) or o.startswith(("--exec", "--sh-exec", "--lua-exec"))
                for o in options):
            self._hit("sh-reverse-shell", cmd, f"`{name}` running a program for the connection")
        elif name == "socat" and any(re.search(r"(?i)(^|[,!:])(exec|system):", w) for w in words):
            self._hit("sh-reverse-shell", cmd, "`socat` with exec/system")
        elif name == "perl" and re.search(r"(?i)socket", " ".join(words)):
            self._hit("sh-reverse-shell", cmd, "`perl` opening a socket")
        elif name == "ruby" and ("-rsocket" in words or re.search(r"TCPSocket", " ".join(words))):
            self._hit("sh-reverse-shell", cmd, "`ruby` opening a socket")
        elif name == "php" and re.search(r"fsockopen", " ".join(words)):
            self._hit("sh-reverse-shell", cmd, "`php` opening a socket")

    def _check_code_runners(self, cmd: _Command, name: str, options: list[str]):
        """eval, `sh -c`, `python -c`, `node -e`, `source <(...)`: check the code they are given."""
        if name == "eval":
            self._check_code(cmd, " ".join(cmd.args), "eval")
        elif name in R.SHELLS:
            code = _option_value(cmd, "-c")
            if code is not None:
                self._check_code(cmd, code, f"{name} -c")
            else:
                self._check_sourced(cmd, cmd.operands[:1])
        elif name in ("source", "."):
            self._check_sourced(cmd, cmd.operands[:1])
        elif name.startswith(("python", "pypy")):
            code = _option_value(cmd, "-c")
            if code is not None and not _has_expansion(code):
                hits = _check_python(_lit(code))
                self.hits.extend(_nested(hits, cmd.line, f"{name} -c"))
        elif name in ("node", "nodejs", "deno", "bun"):
            code = _option_value(cmd, "-e") or _option_value(cmd, "--eval") or _option_value(cmd, "-p")
            if code is not None and not _has_expansion(code):
                self.hits.extend(_nested(_check_javascript(_lit(code)), cmd.line, f"{name} -e"))

    def _check_sourced(self, cmd: _Command, operands: list[str]):
        for raw in operands:
            subs = self._subs_in(raw)
            if any(s.downloads for s in subs):
                self._hit("sh-download-exec", cmd, f"`{cmd.name}` of a download")
            elif any(s.decodes for s in subs):
                self._hit("sh-decode-exec", cmd, f"`{cmd.name}` of decoded text")

    def _check_code(self, cmd: _Command, raw: str, what: str):
        subs = self._subs_in(raw)
        if any(s.downloads for s in subs):
            self._hit("sh-download-exec", cmd, f"`{what}` of a download")
        elif any(s.decodes for s in subs):
            self._hit("sh-decode-exec", cmd, f"`{what}` of decoded text")
        elif self._refers_to_input(raw) or any("read" in s.names or "cat" in s.names and not s.text.split()[1:]
                                               for s in subs):
            self._hit("sh-eval-input", cmd, f"`{what}` of arguments or input")
        elif _has_expansion(raw):
            self._hit("sh-eval", cmd, f"`{what}` of a computed string")
        else:
            inner = _ShellChecker(_lit(raw), cmd.line, self.depth + 1)
            self.hits.extend(_nested(inner.run(), cmd.line, what))

    def _refers_to_input(self, raw: str) -> bool:
        for match in _INPUT_EXPANSION.finditer(raw):
            var = match.group(2)
            if (len(var) == 1 and var in "123456789@*") or var in self.read_vars:
                return True
        return False

    def _subs_in(self, raw: str) -> list[_Sub]:
        return [self.subs[int(m.group(1))] for m in _SUB_TOKEN.finditer(raw) if int(m.group(1)) < len(self.subs)]

    def _check_pipelines(self):
        groups: dict[int, list[_Command]] = {}
        for cmd in self.commands:
            groups.setdefault(cmd.pipeline, []).append(cmd)
        for cmds in groups.values():
            if len(cmds) < 2:
                continue
            for k, cmd in enumerate(cmds[1:], start=1):
                if not _reads_code_from_stdin(cmd):
                    continue
                upstream = cmds[:k]
                shown = " | ".join(c.name or "?" for c in cmds[: k + 1])
                if any(_downloads(c) or any(s.downloads for s in self._subs_in(" ".join(c.words)))
                       for c in upstream):
                    self._hit("sh-download-exec", cmd, f"`{shown}`")
                elif any(_decodes(c) or any(s.decodes for s in self._subs_in(" ".join(c.words)))
                         for c in upstream):
                    self._hit("sh-decode-exec", cmd, f"`{shown}`")
            names = {c.name for c in cmds}
            talks = names & R.REVERSE_SHELL_TOOLS or any(
                c.name == "openssl" and "s_client" in [_lit(w) for w in c.args] for c in cmds)
            if talks and names & R.SHELLS:
                self._hit("sh-reverse-shell", cmds[0], f"`{' | '.join(c.name for c in cmds)}`")

    def _check_fifo_shell(self):
        """`mkfifo f; nc host port < f | sh > f`: a named pipe plus a network tool in one script."""
        fifos = [c for c in self.commands if c.name == "mkfifo" or (c.name == "mknod" and "p" in
                                                                      [_lit(w) for w in c.args])]
        if not fifos:
            return
        names = self.names.union(*(s.names for s in self.subs)) if self.subs else self.names
        if names & R.REVERSE_SHELL_TOOLS or "openssl" in names:
            for cmd in fifos:
                self._hit("sh-reverse-shell", cmd, f"`{cmd.name}` with a network tool in the same script")

    def _check_fork_bomb(self, logical: list[tuple[int, str]]):
        line_at, code = _joined_with_lines(logical)
        for m in _FUNCTION_DEF.finditer(code):
            name = m.group("name") or m.group("name2")
            body = m.group("body")
            me = rf"(?<![\w:.-]){re.escape(name)}(?![\w:.-])"
            if (re.search(rf"{me}\s*\|\s*{me}", body) or re.search(rf"{me}\s*&\s*{me}", body)
                    or (len(re.findall(me, body)) >= 2 and re.search(r"(?<!&)&(?![&>])", body))):
                self.hits.append(("sh-fork-bomb", line_at(m.start()), f"function `{name}` forks itself"))


_FUNCTION_DEF = re.compile(
    r"(?:(?P<name>[^\s(){};|&<>'\"]+)\s*\(\s*\)|\bfunction\s+(?P<name2>[^\s(){};|&<>'\"]+)(?:\s*\(\s*\))?)"
    r"\s*\{(?P<body>[^{}]*)\}")


def _joined_with_lines(logical: list[tuple[int, str]]):
    """The cleaned script as one string, with a function from offset to line number."""
    text = "\n".join(code for _, code in logical)
    starts, offset = [], 0
    for line, code in logical:
        starts.append((offset, line))
        offset += len(code) + 1

    def line_at(pos: int) -> int:
        found = starts[0][1] if starts else 1
        for off, line in starts:
            if off > pos:
                break
            found = line
        return found

    return line_at, text


def _matching_paren(text: str, k: int) -> int:
    """Index of the ')' closing a '(' just before k, skipping quotes; len(text) when unclosed."""
    depth, quote = 1, None
    while k < len(text):
        ch = text[k]
        if quote:
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"':
                k += 1
        elif ch == "\\":
            k += 1
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return k
        k += 1
    return len(text)


def _normalize(cmd: _Command) -> _Command:
    """Set name and args: skip assignments and prefixes (`sudo`, `env X=1`, `timeout 5`, `then`, ...)."""
    words = list(cmd.words)
    while words:
        word = _lit(words[0])
        if _ASSIGNMENT.match(word):
            cmd.assigns.append(word)
            words.pop(0)
        elif word in R.COMMAND_PREFIXES:
            cmd.prefixes.append(word)
            words.pop(0)
            _drop_prefix_options(word, words, cmd.assigns)
        else:
            break
    if words:
        cmd.name = PurePosixPath(_lit(words[0])).name
        cmd.args = words[1:]
    return cmd


def _split_operators(token: str) -> list[str]:
    out, i = [], 0
    while i < len(token):
        op = next((o for o in _OPERATORS if token.startswith(o, i)), token[i])
        out.append(op)
        i += len(op)
    return out


def _drop_prefix_options(prefix: str, words: list, assigns: list):
    """Remove a prefix command's own options (and values) so the real command comes first."""
    value_options = R.PREFIX_VALUE_OPTIONS.get(prefix, set())
    while words:
        word = _lit(words[0])
        if word == "--":
            words.pop(0)
            return
        if word.startswith("-") and len(word) > 1:
            words.pop(0)
            if word in value_options and words:
                words.pop(0)
        elif prefix == "env" and _ASSIGNMENT.match(word):
            assigns.append(word)
            words.pop(0)
        elif prefix == "timeout" and re.match(r"^\d+(\.\d+)?[smhd]?$", word):
            words.pop(0)
            return
        else:
            return


def _option_value(cmd: _Command, option: str) -> str | None:
    """The raw word after `option` (e.g. the code after `-c`), or None."""
    for k, w in enumerate(cmd.args):
        if _lit(w) == option:
            return cmd.args[k + 1] if k + 1 < len(cmd.args) else None
    return None


def _leading_options(cmd: _Command) -> list[str]:
    """Options before the first operand (so `bash script.sh -i` does not count as `bash -i`)."""
    out = []
    for w in cmd.args:
        lw = _lit(w)
        if not lw.startswith("-") or lw in ("-", "--", "-c"):
            break
        out.append(lw)
        if re.match(r"^-[a-zA-Z]*i[a-zA-Z]*$", lw) and "-i" not in out:
            out.append("-i")
    return out


def _has_expansion(raw: str) -> bool:
    return "$" in raw or "__IPYSUB" in raw


def _downloads(cmd: _Command) -> bool:
    return cmd.name in R.DOWNLOADERS


def _decodes(cmd: _Command) -> bool:
    name, options = cmd.name, cmd.options
    if name in ("base64", "base32", "basenc"):
        return any(o in ("--decode", "-D") or re.match(r"^-[a-zA-Z]*d", o) for o in options)
    if name == "xxd":
        return any(re.match(r"^-[a-zA-Z]*r", o) for o in options)
    if name == "openssl":
        return bool(cmd.operands[:1]) and _lit(cmd.operands[0]) in ("enc", "base64") and "-d" in options
    if name == "uudecode":
        return True
    if name in ("printf", "echo"):
        return (name == "printf" or "-e" in options) and any(re.search(r"\\x[0-9a-fA-F]{2}", _lit(w))
                                                             for w in cmd.args)
    return False


def _runner_language(name: str) -> str:
    if name in R.SHELLS or name in ("source", "."):
        return "shell"
    if name.startswith(("python", "pypy")):
        return "python"
    if name in ("node", "nodejs", "deno", "bun"):
        return "javascript"
    return ""


def _reads_code_from_stdin(cmd: _Command) -> bool:
    """True for `sh`, `bash -s`, `python3 -`, `node`: a command that runs whatever arrives on stdin."""
    language = _runner_language(cmd.name)
    if not language and cmd.name not in R.INTERPRETERS:
        return False
    if cmd.name in ("source", "."):
        return bool(cmd.operands) and _lit(cmd.operands[0]) in ("/dev/stdin", "-")
    options = cmd.options
    if any(o in ("-c", "-e", "-m", "-r", "-p", "--eval", "--version", "--help", "-V") for o in options):
        return False
    if "-s" in options:
        return True
    operands = [_lit(w) for w in cmd.operands]
    return not operands or operands[0] == "-"


# --- JavaScript ---------------------------------------------------------------------------------------------

_JS_REGEX_BEFORE = set("(,=:[!&|?{};+-*%<>~^") | {""}


def _js_code_view(text: str) -> tuple[str, list[tuple[int, str]]]:
    """The text with comments and string contents replaced by spaces (same length, same newlines), and the
    string literals as (offset of the opening quote, value). `${...}` inside template literals stays code."""
    out = list(text)
    strings: list[tuple[int, str]] = []
    n, i = len(text), 0
    template_depth: list[int] = []  # brace depth at which each open template's ${ started
    braces = 0

    def blank(a: int, b: int):
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    def prev_code_char(k: int) -> str:
        k -= 1
        while k >= 0 and out[k] in " \t\r\n":
            k -= 1
        return out[k] if k >= 0 else ""

    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif c == "/" and nxt == "*":
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            blank(i, end)
            i = end
        elif c in "'\"" or (c == "`"):
            i = _js_string(text, i, c, blank, strings, template_depth, braces)
        elif c == "}" and template_depth and braces == template_depth[-1]:
            template_depth.pop()
            i = _js_string(text, i, "`", blank, strings, template_depth, braces, resume=True)
        elif c == "/" and prev_code_char(i) in _JS_REGEX_BEFORE:
            j, in_class = i + 1, False
            while j < n and text[j] != "\n":
                if text[j] == "\\":
                    j += 2
                    continue
                if text[j] == "[":
                    in_class = True
                elif text[j] == "]":
                    in_class = False
                elif text[j] == "/" and not in_class:
                    break
                j += 1
            blank(i + 1, j)
            i = j + 1
        else:
            braces += c == "{"
            braces -= c == "}"
            i += 1
    return "".join(out), strings


def _js_string(text, i, quote, blank, strings, template_depth, braces, resume=False) -> int:
    """Blank one string (or template piece) starting at i; return the index after it."""
    n, j, value = len(text), i + 1, []
    while j < n:
        ch = text[j]
        if ch == "\\":
            value.append(text[j + 1: j + 2])
            j += 2
            continue
        if ch == quote:
            break
        if quote == "`" and ch == "$" and j + 1 < n and text[j + 1] == "{":
            template_depth.append(braces)
            blank(i + 1, j)
            return j + 2
        if quote != "`" and ch == "\n":
            break
        value.append(ch)
        j += 1
    blank(i + 1, j)
    if not resume:
        strings.append((i, "".join(value)))
    return j + 1


_JS_MODULE = re.compile(r"\b(?:require\s*\(\s*|from\s*|import\s*\(\s*|import\s+)$")
_JS_NETWORK_MODULES = frozenset({"net", "http", "https", "http2", "dgram", "tls", "axios", "node-fetch", "got",
                                 "undici", "request", "ws", "socket.io-client"})
_JS_READERS = re.compile(r"\b(readFile|readFileSync|createReadStream|open|openSync|copyFile|copyFileSync)"
                         r"\s*\(\s*$")
_JS_REMOVERS = re.compile(r"\b(rmSync|rmdirSync|rm|rmdir|remove|removeSync|rimraf|emptyDir|emptyDirSync)"
                          r"\s*\(\s*$")
_JS_SHELL_CALLS = re.compile(r"(?<![\w$])(?:(?P<obj>[\w$]+)\s*\.\s*)?(?P<fn>execSync|exec)\s*\(\s*$")


def _check_javascript(text: str) -> list[_Hit]:
    view, strings = _js_code_view(text)
    hits: list[_Hit] = []

    def line_of(pos: int) -> int:
        return view.count("\n", 0, pos) + 1

    modules: dict[str, int] = {}
    cp_names: set[str] = set()
    for start, value in strings:
        before = view[max(0, start - 40): start]
        module = value.removeprefix("node:")
        if _JS_MODULE.search(before):
            modules.setdefault(module, start)
            if module == "child_process":
                bind = re.search(r"(?:const|let|var)\s+([\w$]+)\s*=\s*require\s*\(\s*$|import\s+(?:\*\s+as\s+)?"
                                 r"([\w$]+)\s+from\s*$", view[max(0, start - 80): start])
                if bind:
                    cp_names.add(bind.group(1) or bind.group(2))
        if R.is_sensitive_path(value):
            hits.append(("js-sensitive-file", line_of(start), f"the path {value!r}"))
        if _JS_REMOVERS.search(before) and R.is_root_path(value):
            hits.append(("js-rm-root", line_of(start), f"removing {value or '/'!r}"))
        call = _JS_SHELL_CALLS.search(before)
        if call and "child_process" in modules and (call.group("obj") in cp_names or not call.group("obj")):
            hits.extend(_nested(_ShellChecker(value).run(), line_of(start), f"{call.group('fn')}()"))
    for module, start in modules.items():
        if module == "child_process":
            hits.append(("js-subprocess", line_of(start), "`child_process`"))
        elif module in _JS_NETWORK_MODULES:
            hits.append(("js-network", line_of(start), f"the `{module}` module"))
        elif module == "vm":
            hits.append(("js-vm", line_of(start), "the `vm` module"))
    for m in re.finditer(r"(?<![\w$.])eval\s*\(|\bnew\s+Function\s*\(|(?<![\w$.])Function\s*\(", view):
        hits.append(("js-eval", line_of(m.start()), f"`{' '.join(m.group(0).split())}...)`"))
    for m in re.finditer(r"(?<![\w$.])fetch\s*\(|\b(?:window|globalThis|self)\s*\.\s*fetch\s*\("
                         r"|\bXMLHttpRequest\b|\bnew\s+WebSocket\s*\(|(?<![\w$.])axios\b", view):
        hits.append(("js-network", line_of(m.start()), f"`{m.group(0).strip('( ')}`"))
    if "child_process" in modules:
        for m in re.finditer(r"\bshell\s*:\s*(true|['\"`])", view):
            hits.append(("js-shell", line_of(m.start()), "`shell: true`"))
        names = "|".join(re.escape(n) for n in cp_names)
        pattern = rf"(?<![\w$.])(?:(?:{names})\s*\.\s*)?(exec|execSync)\s*\(" if names else \
            r"(?<![\w$.])(exec|execSync)\s*\("
        for m in re.finditer(pattern, view):
            hits.append(("js-shell", line_of(m.start()), f"`{m.group(1)}()` runs its command through a shell"))
    return hits


# --- languages we do not parse ------------------------------------------------------------------------------


def _check_other(text: str) -> list[_Hit]:
    hits = []
    for number, line in enumerate(text.split("\n"), start=1):
        for pattern, what in R.TEXT_MARKERS:
            if pattern.search(line):
                hits.append(("text-suspicious", number, what))
                break
    return hits
