"""The exact text an agent receives: the level-1 catalog, level-2 activation, level-3 resources.

Formats follow the Agent Skills client implementation guide (one-line tags, two-space indent, body right
after the opening tag). Where SiYuan's `skill` tool differs we keep the guide's layout, because the guide is
the cross-client reference, and borrow from SiYuan only what the guide leaves open: the resources block is
left out when there is nothing to list, but kept (empty) when the listing was cut, so the agent knows.

Escaping: every value we generate (names, descriptions, paths) goes through html.escape(quote=True). The
skill's own text (SKILL.md body, resource content) is passed through verbatim, so an agent sees the bytes
the author wrote.
"""

from __future__ import annotations

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

    def __str__(self) -> str:
        parts = [f'<skill_content name="{_esc(self.name)}">']
        body = _trim_body(self.body)
        if body:
            parts.append(body)
            parts.append("")
        parts.append(f"Skill directory: {_esc(self.directory)}")
        parts.append(RELATIVE_PATHS_NOTE)
        if self.resources or self.resources_truncated:
            parts.append("")
            parts.append('<skill_resources truncated="true">' if self.resources_truncated else "<skill_resources>")
            parts += [f"  <file>{_esc(f)}</file>" for f in self.resources]
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
        end = "" if self.text.endswith("\n") or not self.text else "\n"
        return f'<skill_resource skill="{_esc(self.skill)}" path="{_esc(self.path)}">\n{self.text}{end}</skill_resource>'
