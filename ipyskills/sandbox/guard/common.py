"""What the language checkers share: the dispatcher, the hit type, turning hits into findings, and text
helpers."""

from __future__ import annotations

import importlib

from ..result import Finding
from . import rules as R

# A hit is (rule id, line, detail); it becomes a Finding once the path is known.
_Hit = tuple

_CHECKERS = {"python": "python", "shell": "shell", "javascript": "javascript"}  # language -> module here


def check_as(language: str, text: str) -> list[_Hit]:
    """Hits for `text` read as `language` (anything else: the `other` checks).

    The one way into a checker: the package's own entry and a checker that finds another language's code
    inside its own (`python -c`, a heredoc, `subprocess.run(...)`, `child_process.exec`) both come here,
    so no checker imports another. Each module is found by name and loads on its first check.
    """
    module = importlib.import_module(f"{__package__}.{_CHECKERS.get(language, 'other')}")
    return module.check(text)


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
