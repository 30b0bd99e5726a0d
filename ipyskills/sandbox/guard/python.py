"""The Python checker: resolves what each call names on the syntax tree and applies the `py-*` rules;
a coarser text scan when the file does not parse."""

from __future__ import annotations

import ast
import builtins
import io
import posixpath
import re
import shlex
import tokenize
from pathlib import PurePosixPath

from ...core.pyparse import PARSE_LOCK as _PARSE_LOCK  # one lock for every ast.parse in the process
from . import rules as R
from .common import _Hit, _nested, _short, check_as

_BUILTIN_NAMES = frozenset(dir(builtins))
_DANGEROUS_TARGETS = (R.PY_EVAL_BUILTINS | R.PY_SHELL_CALLS | R.PY_UNSAFE_DESERIALIZE | R.PY_YAML_UNSAFE_CALLS
                      | {"pty.spawn", "builtins.__import__", "builtins.compile"})
_KNOWN_CALLS = (_DANGEROUS_TARGETS | R.PY_SUBPROCESS_CALLS | R.PY_DELETE_CALLS | R.PY_CHMOD_CALLS
                | R.PY_PATH_CALLS | R.PY_YAML_LOAD)
# Modules where a computed attribute name (`getattr(os, name)`) may reach a dangerous function.
_SENSITIVE_MODULES = frozenset({"builtins", "builtins.__dict__", "os", "subprocess", "pty", "pickle", "marshal"})


def _parse(text: str) -> ast.Module:
    """ast.parse under the process-wide parse lock: CPython 3.11's AST conversion is not thread-safe
    ("SystemError: AST constructor recursion depth mismatch" when threads parse at once)."""
    with _PARSE_LOCK:
        return ast.parse(text)


def check(text: str) -> list[_Hit]:
    """The Python rules' hits for a source text."""
    try:
        tree = _parse(text)
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
                inner = _parse(literal)
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
        hits = check_as("shell", text)
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
