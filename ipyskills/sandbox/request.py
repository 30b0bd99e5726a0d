"""`RunRequest`: everything a backend needs for one run. It has its own module, below the runner and the
backends, so a backend (or anything that runs a trial script) builds one without importing the runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .interpreter import command_for, python_command
from .policy import Limits


@dataclass
class RunRequest:
    """Everything a backend needs. The script path is already confined to the skill by the caller."""

    skill_name: str
    skill_dir: Path  # resolved skill root; becomes the working directory
    script: str  # '/'-separated path relative to skill_dir
    args: list[str] = field(default_factory=list)
    stdin: bytes = b""
    limits: Limits = field(default_factory=Limits)
    env: dict[str, str] = field(default_factory=dict)  # only what the caller sets; no host environment
    image: str = ""  # docker only
    requirements: object = None  # core.requirements.SkillRequirements, when dependencies are provisioned
    deps: str = "off"  # settings.DEPS_MODES: which of those requirements to provision
    allow_sdist: bool = True  # a requirement without a wheel is built from its sdist in a container
    deps_budget: object = None  # provision.budget.Budget: what one provisioning may add (None: the default)
    inputs: object = None  # inputs.StagedInputs: host files staged into the workspace
    on_output: object = None  # on_output(stream, text): "stdout"/"stderr" text as it arrives (capped)
    workdir: str = "workspace"  # the working directory: "workspace" (writable) or "skill" (read-only)

    @property
    def argv(self) -> list[str]:
        """Interpreter, script path relative to the skill root, then the args (never a shell)."""
        return [*command_for(self.skill_dir / self.script, self.script), *self.args]

    def argv_at(self, skill_root: str) -> list[str]:
        """Interpreter, the script by its path in the skill as the run sees it (e.g. /skill/scripts/x.py),
        then the args: the way agent clients call a skill's scripts."""
        path = self.script if self.workdir == "skill" else f"{skill_root.rstrip('/')}/{self.script}"
        boot = python_command(self.skill_dir / self.script, self.script, path, skill_root)
        return [*(boot or command_for(self.skill_dir / self.script, path)), *self.args]

    def listener(self, stream: str):
        """An OutputBuffer listener that hands `on_output` decoded text as it arrives (None without one).
        A failing callback never ends the run (Ctrl-C still does)."""
        callback = self.on_output
        if callback is None:
            return None
        import codecs

        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

        def listen(data):
            text = ("\n[ipyskills: output cap reached; the rest of " + stream + " is not shown]\n"
                    if data is None else decoder.decode(data))
            if text:
                try:
                    callback(stream, text)
                except Exception:  # noqa: BLE001, S110 - a display problem must not take the run down
                    pass

        return listen
