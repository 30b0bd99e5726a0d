"""The shell checker: a tokenizer that understands quotes, comments, continuations, heredocs and command
substitutions, then the `sh-*` rules on the commands and pipelines it finds.

Size: one job, the shell checker; its tokenizer and its rules share one walk over nested substitutions
and heredocs (`_ShellChecker`), so splitting them would pass that state between modules.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from . import rules as R
from .common import _Hit, _nested, _short, check_as

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


def check(text: str) -> list[_Hit]:
    """The shell rules' hits for a script (or a command line)."""
    return _ShellChecker(text).run()


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
            self.hits.extend((r, doc.line + ln - 1 if ln else doc.line, d) for r, ln, d in check_as("python", doc.body))
        elif language == "javascript":
            self.hits.extend((r, doc.line + ln - 1 if ln else doc.line, d)
                             for r, ln, d in check_as("javascript", doc.body))

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
                hits = check_as("python", _lit(code))
                self.hits.extend(_nested(hits, cmd.line, f"{name} -c"))
        elif name in ("node", "nodejs", "deno", "bun"):
            code = _option_value(cmd, "-e") or _option_value(cmd, "--eval") or _option_value(cmd, "-p")
            if code is not None and not _has_expansion(code):
                self.hits.extend(_nested(check_as("javascript", _lit(code)), cmd.line, f"{name} -e"))

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
