"""The JavaScript checker: the code with comments and strings set aside, then the `js-*` rules;
commands given to child_process go through the shell checker."""

from __future__ import annotations

import re

from . import rules as R
from .common import _Hit, _nested, check_as

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


def check(text: str) -> list[_Hit]:
    """The JavaScript rules' hits for a source text."""
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
            hits.extend(_nested(check_as("shell", value), line_of(start), f"{call.group('fn')}()"))
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
