"""One requirement string a skill wrote, checked as data before anything hands it to a resolver.

A skill controls the text of its dependency declarations (PEP 723 blocks, requirements files, pyproject,
SKILL.md install lines, an sdist's build requirements, a build's own report). A resolver reads such text
as a requirements file, where a line break starts a new line and a leading `-` is an option (`-e PATH`
builds code on the host, `--extra-index-url` swaps the index, `-r FILE` reads host files) and `${VAR}` is
expanded from the environment. So a requirement is only ever passed on in the form `packaging` gives it
after parsing it as PEP 508: a name, extras, version specifiers and a marker, built from ASCII letters,
digits and a few punctuation marks; anything else is refused with the reason.
"""

from __future__ import annotations

import re

MAX_LENGTH = 400  # characters of one requirement; a real one is rarely over 80
# What a normalised PEP 508 requirement without a URL is made of: no line breaks, no `$`, `#`, `\`, `@`,
# `/`, `:` or `&` (URLs, paths, comments, variables, shell or option syntax).
_ALLOWED = re.compile(r"[A-Za-z0-9 ._\-\[\],<>=!~*;()'\"]*")


class UnsafeRequirement(ValueError):
    """A requirement string that is not plain PEP 508 data; the message says what is wrong."""


def shown(text: str, limit: int = 120) -> str:
    """`text` as it may appear in a message: control and non-ASCII characters escaped (a skill cannot
    forge a line of our output with a newline), cut to `limit` characters."""
    out = text.encode("unicode_escape").decode("ascii") if not text.isascii() or not text.isprintable() else text
    return out if len(out) <= limit else out[: limit - 1] + "…"


def checked(text: object) -> tuple[str, str]:
    """(name as written, normalised PEP 508 string) for one requirement, or UnsafeRequirement."""
    if not isinstance(text, str):
        raise UnsafeRequirement(f"not a string: {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise UnsafeRequirement(f"longer than {MAX_LENGTH} characters")
    stripped = text.strip()
    bad = sorted({c for c in stripped if not (c.isascii() and c.isprintable())})
    if bad:
        names = ", ".join(repr(c) for c in bad[:4])
        raise UnsafeRequirement(f"contains control or non-ASCII characters ({names})")
    if not stripped:
        raise UnsafeRequirement("empty")
    if stripped.startswith("-"):
        raise UnsafeRequirement("an installer option, not a requirement")
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(stripped)
    except InvalidRequirement:
        raise UnsafeRequirement("not a requirement (PEP 508) string") from None
    if req.url:
        raise UnsafeRequirement("a direct URL reference (name @ URL)")
    spec = str(req)
    if not _ALLOWED.fullmatch(spec):
        raise UnsafeRequirement("has characters a plain requirement never needs")
    return req.name, spec


def checked_spec(text: object) -> str:
    """The normalised form only (see `checked`)."""
    return checked(text)[1]
