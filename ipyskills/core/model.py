"""Plain data shared by the core modules: problems found in a skill, and a skill's metadata."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)  # slots: 10,000 skills' metadata stays small
class Problem:
    """One finding about a skill. `severity` is "error" (violates the specification) or "warning"."""

    code: str  # stable identifier, e.g. "name-mismatch", "description-too-long"
    field: str | None  # the frontmatter key concerned, or None
    message: str  # what is wrong and what to do
    severity: str = "error"

    def to_dict(self) -> dict:
        return {"code": self.code, "field": self.field, "message": self.message, "severity": self.severity}

    def __str__(self) -> str:
        return self.message


class HasProblems:
    """`errors` and `warnings` views over a `problems` list (skill metadata, validation reports)."""

    __slots__ = ()

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity != "error"]


@dataclass(slots=True)
class SkillMeta(HasProblems):
    """Level-1 facts about one loaded skill. The body is read on demand, never stored here."""

    name: str
    description: str
    path: Path  # the skill folder (absolute)
    skill_md: Path  # the SKILL.md file (absolute)
    root: Path  # the root it was discovered under (absolute)
    frontmatter: dict = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    @property
    def status(self) -> str:
        """"valid", "warnings" (loads and passes the spec, with advice) or "invalid" (fails strict checks)."""
        if self.errors:
            return "invalid"
        return "warnings" if self.problems else "valid"

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "path": str(self.path),
            "root": str(self.root),
            "status": self.status,
            "warnings": [p.message for p in self.problems],
            "problems": [p.to_dict() for p in self.problems],
        }
