"""Traitlets config for the notebook layer: `c.IPySkills.*` in ipython_config.py, `%config IPySkills.x = y`.

The defaults are those of `ipyskills.settings.Settings`; `IPYSKILLS_*` environment variables fill any trait
the IPython config leaves unset (so precedence is: defaults < environment < ipython_config < %config).
`settings()` turns the traits back into a `Settings` for the registry and the runner.
"""

from __future__ import annotations

from traitlets import Bool, Dict, Enum, Float, Int, List, TraitError, Unicode, Union, validate
from traitlets.config import Configurable

from ..errors import ConfigError
from ..settings import BACKENDS, DEPS_MODES, RUNTIMES, Settings

_DEFAULTS = Settings()

# trait name -> Settings field (only the backend is named differently, after the design's wording).
TRAIT_FIELDS = {
    "skill_dirs": "skill_dirs",
    "default_roots": "default_roots",
    "bundled_skills": "bundled_skills",
    "read_cap": "read_cap",
    "manifest_cap": "manifest_cap",
    "sandbox_backend": "backend",
    "image": "image",
    "timeout": "timeout",
    "memory": "memory",
    "pids": "pids",
    "cpus": "cpus",
    "network": "network",
    "output_cap": "output_cap",
    "input_cap": "input_cap",
    "workspace_size": "workspace_size",
    "guard": "guard",
    "pool_size": "pool_size",
    "pool_max": "pool_max",
    "deps": "deps",
    "allow_sdist": "allow_sdist",
    "deps_max_count": "deps_max_count",
    "deps_max_size": "deps_max_size",
    "gpu_wheels": "gpu_wheels",
    "runtime": "runtime",
}


class IPySkillsConfig(Configurable):
    """The settable part of the `IPySkills` magics class."""

    skill_dirs = List(Unicode(), default_value=list(_DEFAULTS.skill_dirs),
                      help="Skill roots (or single skill folders) searched first, in order.").tag(config=True)
    default_roots = Bool(_DEFAULTS.default_roots,
                         help="Also search ./skills, ./.agents/skills, ./.claude/skills, ~/.agents/skills, "
                              "~/.claude/skills.").tag(config=True)
    bundled_skills = Bool(_DEFAULTS.bundled_skills,
                          help="Include the skills shipped with ipyskills (lowest precedence).").tag(config=True)
    read_cap = Int(_DEFAULTS.read_cap, help="Bytes one level-3 resource read may return.").tag(config=True)
    manifest_cap = Int(_DEFAULTS.manifest_cap, help="Files listed in <skill_resources>.").tag(config=True)
    sandbox_backend = Enum(BACKENDS, default_value=_DEFAULTS.backend,
                           help="Where scripts run: docker, local, or auto (Docker when ready, "
                                "else local, with a visible notice).").tag(config=True)
    image = Unicode(_DEFAULTS.image, help="The Docker sandbox image.").tag(config=True)
    timeout = Float(_DEFAULTS.timeout, help="Seconds one script run may take.").tag(config=True)
    memory = Unicode(_DEFAULTS.memory, help="Memory limit of one run, like 256m or 1g.").tag(config=True)
    pids = Int(_DEFAULTS.pids, help="Processes one run may have.").tag(config=True)
    cpus = Float(_DEFAULTS.cpus, help="CPUs one run may use.").tag(config=True)
    network = Bool(_DEFAULTS.network, help="Give runs network access (off by default).").tag(config=True)
    output_cap = Int(_DEFAULTS.output_cap, help="Bytes kept of stdout and of stderr, each.").tag(config=True)
    # A size like '256m' or a number of bytes; the trait keeps what was given, settings() turns it to bytes.
    input_cap = Union([Int(), Unicode()], default_value=_DEFAULTS.input_cap,
                      help="Bytes of --input / inputs= files one run may stage into its workspace, like 64m "
                           "(a larger input is refused before the run starts).").tag(config=True)
    workspace_size = Union([Int(), Unicode()], default_value=_DEFAULTS.workspace_size,
                           help="Size of a run's writable working folder, like 128m (Docker: a tmpfs, counted "
                                "in the run's memory; grown to input_cap + 64m when smaller).").tag(config=True)
    guard = Bool(_DEFAULTS.guard, help="Run the static guard before every script.").tag(config=True)
    pool_size = Int(_DEFAULTS.pool_size,
                    help="Docker containers started ahead of runs, each used once (0 turns the warm pool "
                         "off).").tag(config=True)
    pool_max = Int(_DEFAULTS.pool_max,
                   help="The most containers the warm pool grows to for a burst of parallel runs (capped at "
                        "8); it shrinks back to pool_size when idle.").tag(config=True)
    runtime = Enum(RUNTIMES, default_value=_DEFAULTS.runtime,
                   help="The Docker runtime: runc (the host's kernel behind the sandbox's seccomp profile), "
                        "runsc (gVisor's user-space kernel; set it up with `sudo ipyskills sandbox gvisor`) "
                        "or auto (gVisor when the engine offers it).").tag(config=True)
    deps = Enum(DEPS_MODES, default_value=_DEFAULTS.deps,
                help="What a run installs into the sandbox before it starts: auto (every requirement found, "
                     "imports included), declared (PEP 723 blocks, requirements files and install lines in "
                     "SKILL.md), off (nothing).").tag(config=True)
    allow_sdist = Bool(_DEFAULTS.allow_sdist,
                       help="Provisioning builds a package that publishes no wheel from its source "
                            "distribution, in a throwaway container of the build image with the network off "
                            "(its build code never runs on this machine); on by default, False refuses."
                       ).tag(config=True)
    deps_max_count = Int(_DEFAULTS.deps_max_count,
                         help="Distributions one provisioning may add; more is refused before anything is "
                              "downloaded.").tag(config=True)
    deps_max_size = Union([Int(), Unicode()], default_value=_DEFAULTS.deps_max_size,
                          help="The total download size one provisioning may add (bytes, or e.g. 2g); more "
                               "is refused before anything is downloaded.").tag(config=True)
    gpu_wheels = Bool(_DEFAULTS.gpu_wheels,
                      help="Accept CUDA builds (PyPI's torch with its nvidia-* wheels, several GB) although "
                           "the sandbox has no GPU; they run on the CPU. Off: torch comes from PyTorch's CPU "
                           "index when it answers, else the run is refused with what to do.").tag(config=True)
    authoring_root = Unicode("./skills", help="Where %%skill writes a skill that does not exist yet."
                             ).tag(config=True)
    table_rows = Int(50, help="Catalog rows shown before the table says 'showing N of M'.").tag(config=True)
    agent_client = Unicode("", help="Name of the notebook variable holding the chat client (an OpenAI- or "
                           "Anthropic-style client) that %%skill_agent and %skills eval use without --client."
                           ).tag(config=True)
    agent_model = Unicode("", help="Model name %%skill_agent and %skills eval send without --model."
                          ).tag(config=True)
    agent_options = Dict(help="Request options every model call of %%skill_agent and %skills eval carries, like "
                         "{'temperature': 0, 'max_tokens': 512, 'tool_choice': 'auto'}; --option K=V adds to "
                         "them for one cell.").tag(config=True)
    eval_parallel = Int(4, help="Model calls %skills eval keeps in flight at once (1-32).").tag(config=True)

    @validate("timeout")
    def _check_timeout(self, proposal):
        if proposal["value"] <= 0:
            raise TraitError(f"IPySkills.timeout must be a positive number of seconds, got {proposal['value']!r}")
        return proposal["value"]

    @validate("memory")
    def _check_memory(self, proposal):
        from ..sandbox.policy import parse_size

        try:
            parse_size(proposal["value"], "IPySkills.memory")
        except ConfigError as exc:
            raise TraitError(str(exc)) from None
        return proposal["value"]

    @validate("input_cap", "workspace_size")
    def _check_size(self, proposal):
        from ..sandbox.policy import parse_size

        try:
            parse_size(proposal["value"], f"IPySkills.{proposal['trait'].name}")
        except ConfigError as exc:
            raise TraitError(str(exc)) from None
        return proposal["value"]

    @validate("pool_size", "pool_max")
    def _check_pool_size(self, proposal):
        if proposal["value"] < 0:
            raise TraitError(f"IPySkills.{proposal['trait'].name} must be 0 (off) or more, got {proposal['value']!r}")
        return proposal["value"]

    @validate("eval_parallel")
    def _check_eval_parallel(self, proposal):
        if not 1 <= proposal["value"] <= 32:
            raise TraitError(f"IPySkills.eval_parallel must be from 1 to 32, got {proposal['value']!r}")
        return proposal["value"]

    @validate("read_cap", "manifest_cap", "pids", "output_cap", "table_rows")
    def _check_positive(self, proposal):
        if proposal["value"] < 1:
            raise TraitError(f"IPySkills.{proposal['trait'].name} must be at least 1, got {proposal['value']!r}")
        return proposal["value"]

    def apply_environment(self, environ: dict | None = None) -> None:
        """Fill traits the IPython config left unset from `IPYSKILLS_*` variables (ConfigError if malformed)."""
        env = Settings.from_env(environ)
        configured = set()
        for cls in type(self).mro():
            if cls.__name__ in self.config:
                configured |= set(self.config[cls.__name__])
        for trait, field in TRAIT_FIELDS.items():
            value = getattr(env, field)
            if trait not in configured and value != getattr(_DEFAULTS, field):
                setattr(self, trait, list(value) if isinstance(value, tuple) else value)

    def settings(self) -> Settings:
        """The traits as a `Settings` (what the registry and the runner use)."""
        values = {field: getattr(self, trait) for trait, field in TRAIT_FIELDS.items()}
        values["skill_dirs"] = tuple(values["skill_dirs"])
        return Settings(**values)
