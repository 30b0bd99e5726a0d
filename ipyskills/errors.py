"""The exceptions a user can cause. Each message says what was wrong and what to do."""

from __future__ import annotations


class SkillError(Exception):
    """Base class for every error a user can cause (bad input, missing skill, refused path, ...)."""


class SkillNotFound(SkillError):
    """No visible skill has that name."""


class InvalidSkill(SkillError):
    """A SKILL.md could not be read or parsed (no frontmatter, bad YAML, ...)."""


class ResourceError(SkillError):
    """A resource locator was refused or the file could not be read as agent text."""


class ConfigError(SkillError):
    """A setting or a limit has a value that cannot be used."""


class SandboxError(SkillError):
    """The sandbox could not run the script (no engine, no image, bad script path, ...)."""


class ProvisionError(SandboxError):
    """Packages a skill needs could not be resolved or installed (no such distribution, no wheel for the
    sandbox's Python, a conflict, no reachable index); the message says which and what to do."""


class GuardBlocked(SandboxError):
    """The static guard found a blocking pattern; `findings` says which rule fired and where."""

    def __init__(self, message: str, findings: list | None = None):
        super().__init__(message)
        self.findings = list(findings or [])


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (KeyboardInterrupt) during a run: the sandbox was stopped and removed. A KeyboardInterrupt,
    so code that does not look for it still stops; `result` holds what the script printed so far
    (`result.interrupted` is True, `exit_code` None) and `removed` says whether the sandbox is gone."""

    def __init__(self, result, removed: bool = True):
        super().__init__(f"interrupted after {result.duration:.1f} s")
        self.result = result
        self.removed = removed

    def line(self) -> str:
        """One line for the user: 'interrupted after 4.0 s; sandbox removed'."""
        gone = "sandbox removed" if self.removed else "sandbox removal pending (retried in the background)"
        return f"interrupted after {self.result.duration:.1f} s; {gone}"
