"""Tab completion for the magics: skill names, their files and scripts, and option values."""

from __future__ import annotations

from ..agent.schemas import TOOL_NAMES
from ..errors import SkillError

_COMPLETED = {"%skill_load": "load", "%skill_run": "run", "%%skill_run": "run", "%skill": "author",
              "%%skill": "author", "%%skill_call": "call"}
_VALUE_OPTIONS = {"--backend", "--runtime", "--timeout", "--memory", "-o", "--output", "--allow"}
_COMPLETION_CAP = 200


def _positionals(words: list[str]) -> list[str]:
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in _VALUE_OPTIONS:
            skip = True
        elif not word.startswith("-"):
            out.append(word)
    return out


def _files(reg, name: str) -> list[str]:
    from ..core.resources import list_resources

    meta = reg.get(name)
    return list_resources(meta.path, cap=reg.settings.manifest_cap).files


def _skill_completions(reg, line: str) -> list[str] | None:
    """Completions for the word at the end of `line`, or None when the line is not one of our magics."""
    words = line.split()
    if not words or words[0] not in _COMPLETED:
        return None
    kind = _COMPLETED[words[0]]
    done = _positionals(words[1:] if line[-1:].isspace() else words[1:-1])
    word = "" if line[-1:].isspace() else words[-1]
    if word.startswith("-") or (len(words) > 1 and not line[-1:].isspace() and words[-2] in _VALUE_OPTIONS):
        return None
    if kind == "call":
        return [t for t in TOOL_NAMES if t.startswith(word)] if not done else None
    if not done:
        if "/" in word and kind != "run":
            name, _, prefix = word.partition("/")
            return [f"{name}/{f}" for f in _files(reg, name) if f.startswith(prefix)]
        names = [n for n in reg.names() if n.startswith(word)]
        if not names:  # maybe a skill copied in since the last scan: look again once
            reg.refresh()
            names = [n for n in reg.names() if n.startswith(word)]
        return names
    if kind == "run" and len(done) == 1:
        files = _files(reg, done[0])
        scripts = [f for f in files if f.startswith("scripts/")] or files
        return [f for f in scripts if f.startswith(word)]
    return None


def make_completer(magics):
    """An IPython (v2 API) matcher bound to `magics`, so completion sees the same configured registry."""
    from IPython.core.completer import SimpleCompletion, context_matcher

    @context_matcher(identifier="ipyskills")
    def complete_skill_line(context):
        """IPython completer: skill names, `name/path` files, and a skill's scripts for our magics."""
        line = context.text_until_cursor.split("\n")[-1]
        try:
            found = _skill_completions(magics.registry, line)
        except (SkillError, OSError):
            found = []
        if found is None:
            return {"completions": [], "suppress": False}
        return {"completions": [SimpleCompletion(text=t, type="skill") for t in found[:_COMPLETION_CAP]],
                "suppress": True}

    return complete_skill_line
