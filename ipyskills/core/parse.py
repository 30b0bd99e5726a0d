"""Reading a SKILL.md: find the file, split off the YAML frontmatter, load it safely, read the body.

Decisions (the reasons are in the reference notes on the specification and skills-ref):

- File name: `SKILL.md` is the name the specification and the client guide use ("a file named exactly
  `SKILL.md`"). A folder that has only a lowercase `skill.md` is accepted, as skills-ref does, with a
  warning, because clients that look for the exact name miss it on case-sensitive file systems. Other
  spellings (`Skill.md`) are not looked for. When both exist, `SKILL.md` wins.
- Delimiters are whole lines of `---` (trailing spaces or tabs allowed). The opening line must be the
  first line of the file; a `---` inside a value (`a---b`) or further down in the body is content.
  Line endings may be LF, CRLF or a lone CR, and the closing line may end the file without a newline.
- A UTF-8 byte order mark before the opening `---` is accepted with a warning (some clients reject it).
- Bounded read: only the frontmatter is read to list a skill, at most `FRONTMATTER_CAP` bytes of it,
  in small chunks, stopping at the closing delimiter. A larger frontmatter is one clear error.
- The text must be UTF-8; anything else is one clear error that names the line.
- Frontmatter made only of plain `key: value` lines (and one nested block such as `metadata:`) is read by
  `simple_yaml.load_simple`, which gives exactly what PyYAML gives, several times faster; anything else
  goes to PyYAML.
- YAML is loaded with PyYAML's safe loader (the C loader when present). Aliases (`*name`) are refused,
  so alias expansion ("billion laughs") cannot blow up whatever walks the result later; nesting deeper
  than `MAX_DEPTH` is refused too. Duplicate keys are reported as an error-severity `Problem` (YAML
  forbids them; PyYAML would silently keep the last value, which is what the loaded mapping holds).
- Lenient mode retries YAML that fails only because a plain value holds an unquoted `: ` (the most
  common breakage in published skills, e.g. `description: Use when: ...`): such values are rewritten as
  double-quoted strings and the text is parsed again, with a warning. Strict mode reports the error.
"""

from __future__ import annotations

import codecs
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG

import yaml

from ..errors import InvalidSkill
from .model import Problem
from .simple_yaml import load_simple

try:  # the C loaders are much faster; the pure-Python ones behave the same
    from yaml import CBaseLoader as _StringLoader
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import BaseLoader as _StringLoader
    from yaml import SafeLoader as _SafeLoader

SKILL_MD = "SKILL.md"
FRONTMATTER_CAP = 64 * 1024  # bytes of YAML between the delimiters
MAX_DEPTH = 64  # nesting levels of mappings/sequences in the frontmatter
_CHUNK = 4096
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_BOM = b"\xef\xbb\xbf"
_LF = b"\n"
_OPENING = re.compile(rb"---[ \t]*(?:\r\n|\n|\r|\Z)")
# A delimiter line starts right after a line break (LF or a lone CR). Group 1 is the line itself; the
# break is matched rather than looked behind at, so the regex engine can scan for it quickly.
_CLOSING = re.compile(rb"[\r\n](---[ \t]*(?:\r\n|\n|\r|\Z))")


class SkillMdError(InvalidSkill):
    """A SKILL.md that cannot be read as a skill. `problem` carries the stable code and the field."""

    def __init__(self, code: str, message: str, field: str | None = None):
        super().__init__(message)
        self.problem = Problem(code, field, message, "error")


@dataclass(frozen=True)
class ParsedSkillMd:
    path: Path  # the SKILL.md file
    frontmatter: dict  # the YAML mapping as loaded (typed by the safe loader)
    body_offset: int  # byte offset where the body begins (after the closing delimiter line)
    problems: tuple[Problem, ...] = ()  # parse-time notes (BOM, lowercase name, colon retry, duplicate keys)
    yaml_text: str = ""  # the YAML that was loaded (after the colon retry, when one was needed)
    plain: bool = False  # read by simple_yaml: every value is a string, as written


def find_skill_md(folder: Path) -> Path | None:
    """The skill's `SKILL.md` (or, failing that, a lowercase `skill.md`); None when there is neither.

    Names are compared exactly, so a case-insensitive file system cannot make `skill.md` pass as
    `SKILL.md`. One that exists but is not a regular file (a FIFO, a device, a folder) raises
    "skill-md-not-file"; it is only stat-ed, never opened, so a FIFO cannot block.
    """
    folder = Path(folder)
    wanted = (SKILL_MD, SKILL_MD.lower())
    try:
        entries = [entry for entry in os.scandir(folder) if entry.name in wanted]
        names = {entry.name for entry in entries if entry.is_file()}
    except (NotADirectoryError, FileNotFoundError):
        return None
    except OSError as exc:
        raise SkillMdError(
            "folder-unreadable", f"Cannot read the folder {folder}: {exc.strerror}; check its permissions."
        ) from None
    for name in wanted:
        if name in names:
            return folder / name
    for entry in sorted(entries, key=lambda e: wanted.index(e.name)):
        if os.path.exists(entry.path):  # a dangling link stays "missing"
            raise SkillMdError("skill-md-not-file", f"{entry.path} is not a regular file; a SKILL.md must be one.")
    return None


def parse_skill_md(path: Path, *, lenient: bool = True) -> ParsedSkillMd:
    """Read and load the frontmatter of one SKILL.md. Raises `SkillMdError` (an `InvalidSkill`)."""
    path = path if isinstance(path, Path) else Path(path)
    problems: list[Problem] = []
    if path.name != SKILL_MD:
        problems.append(Problem(
            "skill-md-name", None,
            f"The file is named '{path.name}'; rename it to 'SKILL.md'. Clients look for exactly that name "
            "and miss other spellings on case-sensitive file systems.",
            "warning",
        ))
    raw, body_offset, had_bom = _read_frontmatter_bytes(path)
    if had_bom:
        problems.append(Problem(
            "bom", None,
            "SKILL.md starts with a UTF-8 byte order mark; save it without one (some clients, skills-ref "
            "among them, then find no frontmatter).",
            "warning",
        ))
    text = _decode(raw, first_line=2, what="frontmatter")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    data, duplicates = load_simple(text), []  # plain key: value lines, read without PyYAML (same result)
    if data is not None:
        return ParsedSkillMd(path, data, body_offset, tuple(problems), text, plain=True)
    try:
        data, duplicates = _load_yaml(text, _SafeLoader)
    except _YamlFailure as first:
        if not lenient:
            raise first.error from None
        fixed, keys = _quote_colon_values(text)
        if not keys:
            raise first.error from None
        try:
            data, duplicates = _load_yaml(fixed, _SafeLoader)
        except _YamlFailure:
            raise first.error from None
        text = fixed
        for key in keys:
            problems.append(Problem(
                "yaml-unquoted-colon", key,
                f"The value of '{key}' contains ': ' without quotes, which is invalid YAML; it was read as "
                f"one string. Quote it ({key}: \"...\") so that every client can read it.",
                "warning",
            ))
    if data is None:
        raise SkillMdError(
            "frontmatter-empty",
            "SKILL.md frontmatter is empty; add at least 'name:' and 'description:' between the --- lines.",
        )
    if not isinstance(data, dict):
        raise SkillMdError(
            "frontmatter-not-mapping",
            f"SKILL.md frontmatter must be a YAML mapping (key: value lines), not a {kind_of(data)}.",
        )
    problems.extend(duplicates)
    return ParsedSkillMd(path, data, body_offset, tuple(problems), text)


def read_body(path: Path, body_offset: int, *, max_bytes: int | None = None) -> str:
    """The Markdown body (from `body_offset` to the end), stripped, with line endings turned into LF.

    With `max_bytes`, a body larger than that raises instead of being read.
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            f.seek(body_offset)
            raw = f.read() if max_bytes is None else f.read(max_bytes + 1)
    except OSError as exc:
        raise SkillMdError("skill-md-unreadable", f"Cannot read {path}: {exc.strerror}.") from None
    if max_bytes is not None and len(raw) > max_bytes:
        raise SkillMdError(
            "body-over-cap",
            f"The body of {path} is over {max_bytes} bytes; move material into files under references/.",
        )
    text = _decode(raw, first_line=None, what="body", path=path)
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def string_view(parsed: ParsedSkillMd) -> dict | None:
    """The frontmatter with every scalar as the text written in the file (`1.10` stays "1.10").

    Used to turn typed values back into strings for lenient loading; None if that reading fails.
    """
    try:
        data, _ = _load_yaml(parsed.yaml_text, _StringLoader)
    except _YamlFailure:
        return None
    return data if isinstance(data, dict) else None


# -- reading ---------------------------------------------------------------------------------------


def body_offset(path: Path) -> int:
    """Byte offset where the body of a SKILL.md begins; reads only the frontmatter, loads no YAML."""
    return _read_frontmatter_bytes(Path(path))[1]


def _read_frontmatter_bytes(path: Path) -> tuple[bytes, int, bool]:
    """(YAML bytes, body offset, had BOM), reading no more than the frontmatter cap plus one chunk."""
    try:
        # Non-blocking open, then fstat: a FIFO or device named SKILL.md is refused without waiting on it.
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) or not os.path.isfile(path):
            raise SkillMdError("skill-md-not-file", f"{path} is not a regular file; a SKILL.md must be one."
                               ) from None
        raise _unreadable(path, exc) from None
    try:
        st = os.fstat(fd)
        if not S_ISREG(st.st_mode):
            raise SkillMdError("skill-md-not-file", f"{path} is not a regular file; a SKILL.md must be one.")
        buf = bytearray(os.read(fd, _CHUNK))
        eof = not buf or len(buf) >= st.st_size  # the size saves a last read that would return nothing

        start = 0
        had_bom = buf.startswith(_BOM)
        if had_bom:
            start = len(_BOM)
        opening = _OPENING.match(buf, start)
        if opening is None:
            raise SkillMdError(
                "no-frontmatter",
                "SKILL.md must start with YAML frontmatter: a first line '---', then 'name:' and "
                "'description:' lines, then a closing '---' line.",
            )
        start = opening.end()
        while True:
            closing = _CLOSING.search(buf, start - 1)  # start - 1 is the opening line's break
            if closing is not None and closing.start(1) - start > FRONTMATTER_CAP:
                closing = None
            if closing is not None and (closing.end(1) < len(buf) or eof):
                return bytes(buf[start:closing.start(1)]), closing.end(1), had_bom
            if len(buf) - start > FRONTMATTER_CAP:
                raise SkillMdError(
                    "frontmatter-too-large",
                    f"SKILL.md frontmatter is larger than {FRONTMATTER_CAP // 1024} KiB or has no "
                    "closing '---' line; keep the frontmatter short and close it with a '---' line.",
                )
            if eof:
                raise SkillMdError(
                    "frontmatter-unclosed",
                    "SKILL.md frontmatter is not closed: add a line '---' after the last frontmatter "
                    "line.",
                )
            chunk = os.read(fd, _CHUNK)
            buf.extend(chunk)
            eof = not chunk or len(buf) >= st.st_size
    except OSError as exc:
        raise _unreadable(path, exc) from None
    finally:
        os.close(fd)


def _unreadable(path: Path, exc: OSError) -> SkillMdError:
    return SkillMdError(
        "skill-md-unreadable", f"Cannot read {path}: {exc.strerror or exc}; check that it exists and is readable."
    )


def _decode(raw: bytes, *, first_line: int | None, what: str, path: Path | None = None) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = f" at byte {exc.start} of the {what}"
        if first_line is not None:
            where = f" on line {first_line + raw.count(_LF, 0, exc.start)}"
        name = path if path is not None else "SKILL.md"
        raise SkillMdError(
            "not-utf8",
            f"{name} is not valid UTF-8 (byte 0x{raw[exc.start]:02x}{where}); save the file as UTF-8.",
        ) from None


def body_scan(path: Path, body_offset: int, limit: int | None) -> tuple[int, int, bool, str | None]:
    """Stream the file once: (file lines, body bytes, whole body read, UTF-8 error or None).

    Reads at most `limit` body bytes (None: all of it) in chunks, so memory stays small either way.
    """
    lines = 0
    body_bytes = 0
    last = b"\n"
    decoder = codecs.getincrementaldecoder("utf-8")()
    bad = None
    try:
        with Path(path).open("rb") as f:
            head = f.read(body_offset)
            lines += head.count(b"\n")
            while True:
                want = _CHUNK * 16 if limit is None else min(_CHUNK * 16, limit - body_bytes)
                if want <= 0:
                    complete = f.read(1) == b""
                    break
                chunk = f.read(want)
                if not chunk:
                    complete = True
                    break
                body_bytes += len(chunk)
                lines += chunk.count(b"\n")
                last = chunk[-1:]
                if bad is None:
                    try:
                        decoder.decode(chunk)
                    except UnicodeDecodeError as exc:
                        bad = f"byte 0x{chunk[exc.start]:02x} near body byte {body_bytes - len(chunk) + exc.start}"
            if complete and bad is None:
                try:
                    decoder.decode(b"", final=True)
                except UnicodeDecodeError:
                    bad = "the body ends in the middle of a character"
            body_bytes = max(body_bytes, os.fstat(f.fileno()).st_size - body_offset)
    except OSError as exc:
        raise SkillMdError("skill-md-unreadable", f"Cannot read {path}: {exc.strerror or exc}.") from None
    if last != b"\n":
        lines += 1
    return lines, body_bytes, complete, bad


# -- YAML --------------------------------------------------------------------------------------------


class _YamlFailure(Exception):
    def __init__(self, error: SkillMdError):
        super().__init__(str(error))
        self.error = error


def _load_yaml(text: str, loader_cls) -> tuple[object, list[Problem]]:
    """Load one YAML document; refuse aliases and deep nesting; report duplicate keys."""
    loader = loader_cls(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, []
        duplicates = _inspect(node)
        return loader.construct_document(node), duplicates
    except _YamlFailure:
        raise
    except yaml.MarkedYAMLError as exc:
        raise _YamlFailure(_yaml_error(exc, text)) from None
    except (yaml.YAMLError, RecursionError, ValueError, TypeError, OverflowError) as exc:
        # Constructors raise ValueError for impossible dates (2024-13-01), TypeError for unhashable keys.
        raise _YamlFailure(SkillMdError(
            "yaml-invalid", f"Invalid YAML in frontmatter: {exc}; fix or quote the value."
        )) from None
    finally:
        loader.dispose()


def _yaml_error(exc: yaml.MarkedYAMLError, text: str) -> SkillMdError:
    mark = exc.problem_mark or exc.context_mark
    what = exc.problem or exc.context or "cannot be parsed"
    where = f" at line {mark.line + 2}, column {mark.column + 1} of SKILL.md" if mark else ""
    return SkillMdError(
        "yaml-invalid",
        f"Invalid YAML in frontmatter{where}: {what}. Check the indentation, and quote values that "
        "contain ': ' or start with a special character.",
        _top_level_key(text, (exc.context_mark or mark).line) if mark else None,  # where the value began
    )


_TOP_KEY = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]*) *:")


def _top_level_key(text: str, line: int) -> str | None:
    """The top-level key whose value holds `line` (0-based), for the problem's `field`."""
    lines = text.split("\n")
    for candidate in reversed(lines[: line + 1]):
        m = _TOP_KEY.match(candidate)
        if m:
            return m[1]
    return None


def _inspect(root) -> list[Problem]:
    """Walk the node graph (iteratively, so depth cannot overflow the stack)."""
    seen: set[int] = set()
    problems = []
    stack = [(root, 0, "")]
    while stack:
        node, depth, where = stack.pop()
        if id(node) in seen:
            raise _YamlFailure(SkillMdError(
                "yaml-alias",
                "YAML aliases (*name) are not allowed in SKILL.md frontmatter; write the value out in full.",
            ))
        seen.add(id(node))
        if depth > MAX_DEPTH:
            raise _YamlFailure(SkillMdError(
                "yaml-too-deep",
                f"SKILL.md frontmatter is nested more than {MAX_DEPTH} levels deep; flatten it.",
            ))
        if isinstance(node, yaml.MappingNode):
            first_line: dict[str, int] = {}
            for key, value in node.value:
                label = key.value if isinstance(key, yaml.ScalarNode) else None
                path = f"{where}.{label}" if where and label is not None else (label or where)
                if label is not None:
                    line = key.start_mark.line + 2
                    if label in first_line:
                        problems.append(Problem(
                            "duplicate-key", path,
                            f"The key '{path}' appears more than once in the frontmatter (lines "
                            f"{first_line[label]} and {line}); keep only one, since clients disagree on "
                            "which value wins.",
                        ))
                    else:
                        first_line[label] = line
                stack.append((key, depth + 1, where))
                stack.append((value, depth + 1, path))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, depth + 1, where) for item in node.value)
    return problems


# A `key: value` line whose value is a plain scalar (not quoted, not a block or flow collection).
_KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_][A-Za-z0-9_.-]*) *: +(?P<value>[^\s\"'|>\[{&*!%@`#].*)$")
_BLOCK_START = re.compile(r"^(?P<indent> *)[^#\s].*: +[|>][-+0-9]*\s*(#.*)?$")


def _quote_colon_values(text: str) -> tuple[str, list[str]]:
    """Rewrite plain values holding ': ' (or ending in ':') as double-quoted strings."""
    lines = text.split("\n")
    out: list[str] = []
    keys: list[str] = []
    block_indent = None  # inside a block scalar: lines indented deeper than this are content
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip(" "))
        if block_indent is not None and (not line.strip() or indent > block_indent):
            out.append(line)
            i += 1
            continue
        block_indent = None
        if _BLOCK_START.match(line):
            block_indent = indent
            out.append(line)
            i += 1
            continue
        m = _KEY_LINE.match(line)
        value = m and re.sub(r"\s+#.*$", "", m["value"]).rstrip()
        if not m or not (": " in value or value.endswith(":")):
            out.append(line)
            i += 1
            continue
        parts = [value]
        i += 1
        while i < len(lines):  # continuation lines of a multi-line plain value
            nxt = lines[i]
            nxt_indent = len(nxt) - len(nxt.lstrip(" "))
            if not nxt.strip() or nxt_indent <= indent or nxt.lstrip().startswith("#"):
                break
            parts.append(re.sub(r"\s+#.*$", "", nxt).strip())
            i += 1
        out.append(f"{m['indent']}{m['key']}: {json.dumps(' '.join(parts), ensure_ascii=False)}")
        keys.append(m["key"])
    return "\n".join(out), keys


def kind_of(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    if value is None:
        return "null"
    return type(value).__name__
