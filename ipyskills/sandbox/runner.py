"""One entry point for running a skill script: guard, pick a backend, run, label the result."""

from __future__ import annotations

import importlib
import re

from ..errors import ConfigError, GuardBlocked, ProvisionError, RunInterrupted, SandboxError
from ..settings import DEFAULT_IMAGE
from .interrupts import shield_repeated_interrupts
from .policy import Limits
from .request import RunRequest  # callers import it from here too
from .result import ExecuteResult

BACKENDS = ("auto", "docker", "local")
# Where each backend class lives, found by name on first use: the runner imports no backend, and a new
# backend is one line here (its module imports whatever it needs from the sandbox).
BACKEND_CLASSES = {"docker": "ipyskills.sandbox.docker.backend:DockerBackend",
                   "local": "ipyskills.sandbox.local.backend:LocalBackend"}


def select_backend(name: str, image: str, settings=None):
    """The backend object for `name`; `auto` prefers Docker and says why when it falls back. With
    `settings`, the Docker backend keeps a warm pool of `settings.pool_size` containers for runs with the
    configured limits."""
    if name not in BACKENDS:
        raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, got {name!r}")
    if name == "local":
        return backend_class("local")(), ""
    DockerBackend = backend_class("docker")  # a class
    if settings is not None and settings.pool_size != 0:  # a negative size is refused by the pool
        docker = DockerBackend(image=image, pool_size=settings.pool_size, pool_max=settings.pool_max,
                               pool_limits=Limits.from_settings(settings), runtime=settings.runtime)
    else:
        docker = DockerBackend(image=image, runtime=settings.runtime if settings is not None else "runc")
    if name == "docker":
        docker.ensure_ready()  # raises SandboxError saying what to run
        return docker, ""
    ready, reason = docker.readiness()
    if ready:
        return docker, ""
    return backend_class("local")(), f"backend auto: Docker not used ({reason}); ran on the local backend instead"


def backend_class(name: str):
    """The class of backend `name` ("docker" or "local"), its module loaded on first use."""
    module, _, attr = BACKEND_CLASSES[name].partition(":")
    return getattr(importlib.import_module(module), attr)


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


def use_profile(impl, request: RunRequest) -> None:
    """Run in the profile image (e.g. office: LibreOffice, poppler, pandoc, Node) when the skill's scripts
    call its programs; when that image is missing, fail before anything starts, with the command to build
    it. Only the default image is swapped: a configured image is the user's choice."""
    from .docker.image import image_info, profile_image

    if impl.name == "docker" and request.image == profile_image("build"):
        raise SandboxError(f"{request.image} is the image for building packages from source (a compiler and "
                           "the Python headers); scripts never run in it: use the default image or another one")
    reqs = request.requirements
    if impl.name != "docker" or reqs is None or not reqs.profile or request.image not in ("", DEFAULT_IMAGE):
        return
    image = profile_image(reqs.profile)
    if image_info(impl.client(), image) is None:
        calls = ", ".join(p.describe() for p in reqs.programs[:3]) or "its compatibility text"
        raise SandboxError(f"skill {request.skill_name!r} needs the {reqs.profile} image ({image}) for {calls}; "
                           f"build it once with: ipyskills sandbox build --profile {reqs.profile} --offline")
    request.image = image


def provision(impl, request: RunRequest, progress=None):
    """Install what the skill needs where `impl` runs it (before the run; its time is not the script's).
    Returns the Provisioned record, or None when nothing is asked for."""
    reqs = request.requirements
    if reqs is None or request.deps == "off":
        return None
    from .provision import reasons_for, wanted_requirements

    report = progress or (lambda _line: None)
    wanted = wanted_requirements(reqs, request.deps, impl.name)
    if request.deps == "auto":
        wanted += same_name_requirements(reqs, impl.name, report)
    if not wanted:
        return None
    skipped = [r for r in wanted if _skippable(r) and r.key in _not_on_index]
    wanted = [r for r in wanted if r not in skipped]
    for _ in range(MAX_SKIPPED):
        if not wanted:
            return _with_skipped(None, skipped)
        specs = sorted({r.spec for r in wanted})
        try:
            return _with_skipped(_provision_on(impl, request, wanted, specs, report), skipped)
        except ProvisionError as exc:  # say which of the skill's requirements asked for it
            from .wheels import NotOnIndex, normalize

            absent = normalize(exc.name) if isinstance(exc, NotOnIndex) else ""
            loose = [r for r in wanted if r.key == absent and _skippable(r)]
            if not loose:
                raise ProvisionError(f"{exc} [{describe_origins(str(exc), wanted, specs)}]") from None
            _not_on_index.add(absent)
            for reason in reasons_for(loose):
                report(f"dependencies: skipping {reason}: no distribution of that name is on the package "
                       "index; the rest is installed, and a script that imports it will say so")
            skipped += loose
            wanted = [r for r in wanted if r not in loose]
    raise ProvisionError(f"more than {MAX_SKIPPED} of the skill's requirements are not on the package index "
                         f"({', '.join(r.name for r in skipped)}): check the index (UV_INDEX_URL)")


# An install line in SKILL.md's prose, or a distribution inferred from an import, that names nothing on the
# index is skipped (with a notice) rather than failing the run: published skills carry stale lines
# (`pip install spykingcircus`, a name PyPI does not have, blocked every script of one skill). A
# requirements file, pyproject or PEP 723 block is a declaration, and a name missing there stays an error.
MAX_SKIPPED = 5
_SKIPPABLE_SOURCES = ("skill-md", "import")
_not_on_index: set[str] = set()  # normalised names the index did not have, this process


def _skippable(req) -> bool:
    return req.source in _SKIPPABLE_SOURCES


def _with_skipped(done, skipped: list):
    """`done` (maybe shared by a cache) with the skipped requirements, so every run's notice says so."""
    if not skipped:
        return done
    from dataclasses import replace

    from .provision import Provisioned, reasons_for

    names = reasons_for(skipped)  # file names shown escaped: a skill names its own files
    return replace(done, skipped=names) if done is not None else Provisioned(skipped=names)


def same_name_requirements(reqs, backend: str, report) -> list:
    """Unknown imports whose same-name distribution is seen to provide them (provision.same_name)."""
    from .provision.same_name import unknown_imports, verified_requirements

    if not unknown_imports(reqs):
        return []
    from .provision import base_lock
    from .wheels import Target

    if backend == "docker":
        return verified_requirements(reqs, Target.for_image(), base_lock(), report)
    from .provision.local_site import host_constraints, run_interpreter

    return verified_requirements(reqs, Target.for_host(run_interpreter()), host_constraints(), report)


def describe_origins(message: str, wanted: list, specs: list[str]) -> str:
    """Where the requirements named in `message` came from (all of them when it names none)."""
    from .provision import reasons_for
    from .wheels import normalize

    explanation = normalize(message.replace(", ".join(specs), ""))  # not the echo of everything asked for
    named = [r for r in wanted if re.search(rf"(?<![a-z0-9-]){re.escape(normalize(r.name))}(?![a-z0-9-])",
                                            explanation)]
    return "asked for by: " + "; ".join(reasons_for(named or wanted))


def _provision_on(impl, request: RunRequest, wanted: list, specs: list[str], report):
    from .provision import reasons_for

    if impl.name == "docker":
        from .provision import base_lock
        from .provision.docker_image import ensure_image

        done = ensure_image(impl.client(), request.image or impl.image, specs, base_lock=base_lock(),
                            reasons=reasons_for(wanted), progress=report, allow_sdist=request.allow_sdist,
                            budget=request.deps_budget)
        if done.image:
            request.image = done.image
    else:
        from .provision.local_site import ensure_site

        done = ensure_site(specs, reasons=reasons_for(wanted), progress=report,
                           sdist_image=(request.image or DEFAULT_IMAGE) if request.allow_sdist else None,
                           budget=request.deps_budget)
        if done.site:
            request.env = {**request.env, "PYTHONPATH": done.site}
    return done


def run(request: RunRequest, backend: str = "auto", guard: bool = True, settings=None,
        progress=None) -> ExecuteResult:
    findings = guard_request(request) if guard else []
    _ = request.argv  # resolve the interpreter before any container starts (clear error if unknown)
    impl, notice = select_backend(backend, request.image, settings)
    use_profile(impl, request)
    base_image = request.image
    provisioned = provision(impl, request, progress)
    # Only the first Ctrl-C stops the run: a second one must not cut the sandbox's removal short, whoever
    # called (a notebook, the CLI, or plain Python).
    with shield_repeated_interrupts():
        try:
            result = impl.run(request)
        except RunInterrupted as stop:
            _label(stop.result, request, findings)
            raise
        except SandboxError as exc:
            if not (provisioned and provisioned.image and "is not present" in str(exc)):
                raise
            # The dependency image was removed since this process last found it (e.g. `sandbox cleanup
            # --images` elsewhere): provision it again, once.
            from .provision.docker_image import forget_recent

            forget_recent()
            request.image = base_image
            provisioned = provision(impl, request, progress)
            result = impl.run(request)
    _label(result, request, findings)
    if provisioned is not None and provisioned.verified:
        result.isolation = (f"{result.isolation}; dependency folder checked against its wheels' RECORD "
                            "hashes before the run (a run as this user could write it: no Landlock)")
    result.notice = " ".join(n for n in (notice, provisioned.notice() if provisioned else "", result.notice)
                             if n)
    return result


def _label(result: ExecuteResult, request: RunRequest, findings) -> None:
    result.findings = list(findings)
    result.skill = request.skill_name
    result.script = request.script
    result.args = list(request.args)
    result.inputs = list(request.inputs.names) if request.inputs else []
