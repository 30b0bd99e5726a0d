"""The exact text an agent receives: the level-1 catalog, level-2 activation, level-3 resources.

Formats follow the Agent Skills client implementation guide (one-line tags, two-space indent, body right
after the opening tag). Where SiYuan's `skill` tool differs we keep the guide's layout, because the guide is
the cross-client reference, and borrow from SiYuan only what the guide leaves open: the resources block is
left out when there is nothing to list, but kept (empty) when the listing was cut, so the agent knows.

Escaping: every value we generate (names, descriptions, paths) goes through html.escape(quote=True). The
skill's own text (SKILL.md body, resource content) is passed through verbatim, so an agent sees the bytes
the author wrote, with one exception: a `<` that starts something looking like one of our own tags
(`<skill_content`, `</skill_resource`, `<stdout>`, ... see FRAME_TAGS, any case, with or without `/` and
spaces) is written `&lt;`, so no text inside a block can close it or open another (`neutralise`).

Caps: level 2 is at most LEVEL2_CAP characters (Settings.level2_cap): a longer SKILL.md body is cut
visibly (its start is kept, with a mark saying how much was left out), so `load`, the CLI, the notebook
and the agent tools all show the same text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

# Behavioural instructions from the client guide, for callers that put the catalog in a system prompt.
FILE_READ_INSTRUCTIONS = (
    "The following skills provide specialized instructions for specific tasks.\n"
    "When a task matches a skill's description, use your file-read tool to load\n"
    "the SKILL.md at the listed location before proceeding.\n"
    "When a skill references relative paths, resolve them against the skill's\n"
    "directory (the parent of SKILL.md) and use absolute paths in tool calls."
)
TOOL_INSTRUCTIONS = (
    "The following skills provide specialized instructions for specific tasks.\n"
    "When a task matches a skill's description, call the activate_skill tool\n"
    "with the skill's name to load its full instructions."
)
RELATIVE_PATHS_NOTE = "Relative paths in this skill are relative to the skill directory."

LEVEL2_CAP = 30_000  # characters of a whole <skill_content> text (the agent tools' result cap too)
CUT_MARK = "\n[ipyskills: {cut} characters cut here; a tool result is capped at {cap} characters]\n"
BODY_CUT_MARK = ("\n\n[ipyskills: SKILL.md body cut here; {left} (level-2 text is capped at {cap} characters). "
                 "Move long material into references/ files.]")
# The tags of agent text. Text placed inside a block never contains one of them: see neutralise().
FRAME_TAGS = ("available_skills", "skill", "name", "description", "location", "skill_content",
              "skill_resources", "skill_resource", "file", "script_result", "stdout", "stderr", "artifacts")
_ALTERNATIVES = "|".join(sorted(FRAME_TAGS, key=len, reverse=True))
_LOOKALIKE = re.compile(rf"<(?=\s*/?\s*(?:{_ALTERNATIVES})(?![\w-]))", re.IGNORECASE)


def neutralise(text: str) -> str:
    """`text` with the `<` of anything that looks like one of FRAME_TAGS (opening or closing, any case)
    written as `&lt;`; nothing else changes."""
    return _LOOKALIKE.sub("&lt;", text) if "<" in text else text


def _esc(value) -> str:
    return escape(str(value), quote=True)


def catalog(skills: Iterable, *, instructions: str | None = None) -> str:
    """The <available_skills> block for `skills` (objects with name, description, skill_md).

    No skills gives "" (the guide: omit the block entirely rather than show an empty one). `instructions`
    ("file-read", "tool", or any text) is put before the block.
    """
    skills = list(skills)
    if not skills:
        return ""
    lines = ["<available_skills>"]
    for s in skills:
        lines += [
            "  <skill>",
            f"    <name>{_esc(s.name)}</name>",
            f"    <description>{_esc(_one_line(s.description))}</description>",
            f"    <location>{_esc(s.skill_md)}</location>",
            "  </skill>",
        ]
    lines.append("</available_skills>")
    block = "\n".join(lines)
    if instructions:
        text = {"file-read": FILE_READ_INSTRUCTIONS, "tool": TOOL_INSTRUCTIONS}.get(instructions, instructions)
        return f"{text}\n\n{block}"
    return block


def _one_line(text: str) -> str:
    # A folded or literal YAML description may carry newlines; the catalog keeps one line per tag.
    return " ".join(str(text).split())


@dataclass
class SkillContent:
    """Level 2: a skill's instructions as an agent receives them on activation."""

    name: str
    body: str
    directory: Path
    resources: list[str] = field(default_factory=list)
    resources_truncated: bool = False
    cap: int | None = LEVEL2_CAP  # characters of the whole text; None: no cap
    body_left: str = ""  # when the body was read only in part: how much was not read (e.g. "104,800,000 bytes")

    def __str__(self) -> str:
        return self.render(self.cap)

    def render(self, cap: int | None) -> str:
        """The text within `cap` characters: the body is cut first (visibly), then the file list."""
        body = neutralise(_trim_body(self.body))
        resources, truncated = list(self.resources), self.resources_truncated
        text = self._text(body, resources, truncated)
        if cap is None or len(text) <= cap:
            return text
        frame = len(self._text("", resources, truncated))
        while resources and frame + 400 > cap:  # keep room for some body; a huge file list gives way
            resources, truncated = resources[:len(resources) // 2], True
            frame = len(self._text("", resources, truncated))
        room = max(cap - frame - 2, 0)
        if len(body) > room or self.body_left:
            body = self.cut_body(body, room, cap)
        return self._text(body, resources, truncated)

    def cut_body(self, body: str, room: int, cap: int) -> str:
        left = len(body)
        while True:  # the mark's length depends on the number in it
            mark = BODY_CUT_MARK.format(left=self._left(left), cap=cap)
            keep = max(room - len(mark), 0)
            if len(body) - keep == left:
                break
            left = len(body) - keep
        return body[:keep].rstrip() + mark

    def _left(self, chars: int) -> str:
        shown = f"{chars:,} more characters not shown"
        return f"{shown}, and {self.body_left} more not read" if self.body_left else shown

    @property
    def shown_body(self) -> str:
        """The body as the level-2 text shows it (cut to the cap, look-alike tags neutralised)."""
        text = str(self)
        start = text.index(">") + 2
        end = text.rfind("\n\nSkill directory: ")
        return text[start:end] if end >= start else ""

    def _text(self, body: str, resources: list[str], truncated: bool) -> str:
        parts = [f'<skill_content name="{_esc(self.name)}">']
        if body:
            parts.append(body)
            parts.append("")
        parts.append(f"Skill directory: {_esc(self.directory)}")
        parts.append(RELATIVE_PATHS_NOTE)
        if resources or truncated:
            parts.append("")
            parts.append('<skill_resources truncated="true">' if truncated else "<skill_resources>")
            parts += [f"  <file>{_esc(f)}</file>" for f in resources]
            parts.append("</skill_resources>")
        parts.append("</skill_content>")
        return "\n".join(parts)


def _trim_body(body: str) -> str:
    # The guide trims the body; we drop blank lines at both ends but keep a first line's indentation
    # (it may be an indented code block), and use LF line ends whatever the file used.
    lines = body.replace("\r\n", "\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(line.rstrip("\r") for line in lines).rstrip()


@dataclass
class SkillResource:
    """Level 3: one bundled file's text as an agent receives it."""

    skill: str
    path: str  # normalised, '/'-separated, relative to the skill folder
    text: str

    def __str__(self) -> str:
        return self.render(None)

    def render(self, cap: int | None) -> str:
        """The text; with `cap`, the file's text is cut in the middle (visibly) so the whole fits."""
        text = neutralise(self.text)
        head = f'<skill_resource skill="{_esc(self.skill)}" path="{_esc(self.path)}">\n'
        tail = "</skill_resource>"
        if cap is not None and len(head) + len(text) + 1 + len(tail) > cap:
            text = cap_text(text, max(cap - len(head) - len(tail) - 1, 0), result_cap=cap)
        end = "" if text.endswith("\n") or not text else "\n"
        return f"{head}{text}{end}{tail}"


def cap_text(text: str, cap: int = LEVEL2_CAP, *, result_cap: int | None = None) -> str:
    """`text` if it fits in `cap` characters, else its start and end around a mark saying how much was cut.

    The result is never longer than `cap` (as long as `cap` leaves room for the mark itself). The mark
    names `result_cap` (default `cap`): the limit of the whole tool result when `text` is one part of it.
    """
    if len(text) <= cap:
        return text
    cut = len(text) - cap
    while True:  # the mark's length depends on the number in it; settle it in a step or two
        mark = CUT_MARK.format(cut=cut, cap=cap if result_cap is None else result_cap)
        keep = max(cap - len(mark), 0)
        new_cut = len(text) - keep
        if new_cut == cut:
            break
        cut = new_cut
    head = keep - keep // 3  # the start usually says what this is; the end holds the error or the summary
    tail = keep - head
    return text[:head] + mark + (text[len(text) - tail:] if tail else "")
