"""Languages the guard does not parse: a line scan for the markers in `rules.TEXT_MARKERS`."""

from __future__ import annotations

from . import rules as R
from .common import _Hit


def check(text: str) -> list[_Hit]:
    """A `text-suspicious` hit for each line with a known marker."""
    hits = []
    for number, line in enumerate(text.split("\n"), start=1):
        for pattern, what in R.TEXT_MARKERS:
            if pattern.search(line):
                hits.append(("text-suspicious", number, what))
                break
    return hits
