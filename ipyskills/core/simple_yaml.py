"""A fast reader for the plain YAML most SKILL.md frontmatter is written in, with PyYAML as the fallback.

Listing 10,000 skills is dominated by YAML loading, and almost every frontmatter is a handful of
`key: value` lines plus, perhaps, one indented `metadata:` block. `load_simple(text)` reads exactly that
subset and returns the same mapping PyYAML's safe loader would; for anything outside it (lists, block or
multi-line scalars, flow collections, anchors, tags, escapes, tabs, duplicate keys, a value that would not
load as a string, ...) it returns None, and the caller loads the text with PyYAML as before. So the subset
only decides *how fast* a frontmatter is read, never *what* it reads as; tests/core/test_simple_yaml.py
checks that against PyYAML on generated input.

The subset, line by line (after line endings became LF):
- blank lines and whole-line `#` comments, anywhere;
- `key: value` at column 0, or `key:` alone opening a block of `key: value` lines that all share one
  indentation (one level deep); `key:` with no such block is null, as in YAML;
- a key is a short identifier (`allowed-tools`, `metadata`) that YAML reads as a string (not `on`, `null`);
- a value is a single-line plain scalar that YAML reads as a string (no `: `, no ` #`, no leading
  indicator character, not `1.0`/`yes`/`2024-01-01`/...), or a single- or double-quoted string with no
  quote or backslash inside;
- every character printable (no tabs, control characters, BOMs or Unicode line separators).
"""

from __future__ import annotations

import re
from functools import lru_cache

from yaml import ScalarNode
from yaml.resolver import Resolver

_STR_TAG = "tag:yaml.org,2002:str"
_MAX_KEY = 128  # libyaml refuses implicit keys over 1024 characters; stay far below
_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?: +(.*))?")
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
_resolver = Resolver()
_TYPED_FIRST = frozenset(ch for ch in _resolver.yaml_implicit_resolvers if ch)  # "" (empty) never reaches here


def load_simple(text: str) -> dict | None:
    """The frontmatter mapping, or None when `text` is outside the subset (load it with PyYAML then)."""
    if not text.replace("\n", "").isprintable():  # tabs, control characters, BOMs, Unicode line breaks
        return None
    data: dict = {}
    block: dict | None = None  # the nested mapping being filled, after a bare `key:`
    block_key = None
    indent = 0  # the indentation of the open block's lines, once its first line fixed it
    for line in text.split("\n"):
        stripped = line.lstrip(" ")
        if not stripped or stripped[0] == "#":
            continue
        depth = len(line) - len(stripped)
        if depth:
            if block is None or (indent and depth != indent):
                return None
            indent = depth
            target = block
        else:
            if block is not None and not block:
                data[block_key] = None  # a bare `key:` with nothing under it
            block, indent = None, 0
            target = data
        m = _LINE.fullmatch(stripped)
        if m is None:
            return None
        key, raw = m.group(1), m.group(2)
        if len(key) > _MAX_KEY or key in target or not _key_is_str(key):
            return None
        if raw is None or not raw.strip(" "):
            if depth:
                return None  # a nested null or a second level: leave it to PyYAML
            data[key] = block = {}
            block_key = key
            continue
        value = _scalar(raw)
        if value is None:
            return None
        target[key] = value
    if block is not None and not block:
        data[block_key] = None
    return data or None


def _scalar(raw: str) -> str | None:
    """The string a one-line value denotes, or None when it is not a plain or simple quoted string."""
    raw = raw.rstrip(" ")
    first = raw[0]
    if first in "\"'":
        if len(raw) < 2 or raw[-1] != first:
            return None
        inner = raw[1:-1]
        if first in inner or "\\" in inner:
            return None
        return inner
    if first in _INDICATORS or ": " in raw or " #" in raw or raw.endswith(":"):
        return None
    return raw if _is_str(raw) else None


@lru_cache(maxsize=512)
def _key_is_str(key: str) -> bool:
    return _is_str(key)  # the same few keys recur in every skill


def _is_str(plain: str) -> bool:
    # YAML reads `1.0`, `yes`, `~`, `2024-01-01`, `<<` as other types; the resolver decides, as in PyYAML.
    # Its rules are indexed by first character, so most text needs no regex at all.
    if plain[0] not in _TYPED_FIRST:
        return True
    return _resolver.resolve(ScalarNode, plain, (True, False)) == _STR_TAG
