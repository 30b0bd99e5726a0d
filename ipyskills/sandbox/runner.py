"""One entry point for running a skill script: guard, pick a backend, run, label the result."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError, GuardBlocked
from .interpreter import command_for
from .policy import Limits
from .result import ExecuteResult

BACKENDS = ("auto", "docker", "local")


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

    @property
    def argv(self) -> list[str]:
        """Interpreter, script path relative to the working directory, then the args (never a shell)."""
        return [*command_for(self.skill_dir / self.script, self.script), *self.args]


def select_backend(name: str, image: str, settings=None):
    """The backend object for `name`; `auto` prefers Docker and says why when it falls back. With
    `settings`, the Docker backend keeps a warm pool of `settings.pool_size` containers for runs with the
    configured limits."""
    if name not in BACKENDS:
        raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, got {name!r}")
    if name == "local":
        from .local_backend import LocalBackend

        return LocalBackend(), ""
    from .docker_backend import DockerBackend

    if settings is not None and settings.pool_size != 0:  # a negative size is refused by the pool
        docker = DockerBackend(image=image, pool_size=settings.pool_size,
                               pool_limits=Limits.from_settings(settings))
    else:
        docker = DockerBackend(image=image)
    if name == "docker":
        docker.ensure_ready()  # raises SandboxError saying what to run
        return docker, ""
    ready, reason = docker.readiness()
    if ready:
        return docker, ""
    from .local_backend import LocalBackend

    return LocalBackend(), f"backend auto: Docker not used ({reason}); ran on the local backend instead"


def guard_request(request: RunRequest) -> list:
    """Findings for the script; raises GuardBlocked (with rule and line) when any finding blocks."""
    from .guard import check_file

    report = check_file(request.skill_dir / request.script, display_path=request.script)
    blocking = [f for f in report.findings if f.severity == "block"]
    if blocking:
        detail = "; ".join(str(f).rstrip(".") for f in blocking)
        raise GuardBlocked(
            f"guard blocked {request.script}: {detail}. If this is a false positive, run again with "
            "guard=False (CLI: --no-guard); the sandbox still applies.",
            report.findings,
        )
    return report.findings


def run(request: RunRequest, backend: str = "auto", guard: bool = True, settings=None) -> ExecuteResult:
    findings = guard_request(request) if guard else []
    _ = request.argv  # resolve the interpreter before any container starts (clear error if unknown)
    impl, notice = select_backend(backend, request.image, settings)
    result = impl.run(request)
    result.findings = list(findings)
    result.notice = " ".join(n for n in (notice, result.notice) if n)
    result.skill = request.skill_name
    result.script = request.script
    result.args = list(request.args)
    return result
