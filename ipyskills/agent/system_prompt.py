"""The system-prompt section that tells an agent which skills exist and how to use the two skill tools.

It is the client guide's "dedicated tool activation" pattern adapted to `read_skill` and
`execute_skill_script`: a few sentences of behaviour, then the catalog. Two renderings: "xml" (the guide's
`<available_skills>` block, byte-identical to `SkillRegistry.catalog()` for the same skills) and "markdown"
(a bulleted list, for models or products that prefer it). No visible skills gives "" so nothing is said
about tools that are not registered.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..core.prompt import catalog
from ..errors import ConfigError

PROMPT_FORMATS = ("xml", "markdown")

INSTRUCTIONS = (
    "The following skills provide specialized instructions for specific tasks.\n"
    "When a task matches a skill's description, call the read_skill tool with the skill's name to load its\n"
    "full instructions before proceeding, then follow them.\n"
    "When the instructions mention a file bundled with the skill, call read_skill with file_path set to its\n"
    "path relative to the skill folder. When they tell you to run a bundled script, call\n"
    "execute_skill_script with the script's path; pass arguments as a list of strings in args and any data\n"
    "to process as text in input (the script's standard input).\n"
    "A skill's instructions need loading only once per conversation."
)


def system_prompt_for(skills: Iterable, format: str = "xml") -> str:
    """Instructions plus the catalog of `skills` (objects with name, description, skill_md)."""
    if format not in PROMPT_FORMATS:
        raise ConfigError(f"system prompt format must be one of {', '.join(PROMPT_FORMATS)}, got {format!r}")
    skills = list(skills)
    if not skills:
        return ""
    if format == "xml":
        return f"{INSTRUCTIONS}\n\n{catalog(skills)}"
    instructions = INSTRUCTIONS.replace("read_skill", "`read_skill`").replace(
        "execute_skill_script", "`execute_skill_script`").replace("file_path", "`file_path`")
    lines = ["## Skills", "", instructions.replace("\n", " "), "", "Available skills:", ""]
    lines += [f"- **{s.name}**: {_one_line(s.description)}" for s in skills]
    return "\n".join(lines)


def _one_line(text) -> str:
    return " ".join(str(text).split())
