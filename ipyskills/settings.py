"""Defaults shared by the Python API, the CLI and the magics, with `IPYSKILLS_*` environment overrides.

The notebook's traitlets config (`c.IPySkills.*`) starts from these same values.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, fields, replace

from .errors import ConfigError

# Searched after the configured roots, in this order (earlier wins a name collision).
DEFAULT_ROOTS = ("./skills", "./.agents/skills", "./.claude/skills", "~/.agents/skills", "~/.claude/skills")

DEFAULT_IMAGE = "ipyskills-sandbox:latest"
BACKENDS = ("auto", "docker", "local")
# What a run provisions before it starts: every requirement found, only declared ones, or nothing.
DEPS_MODES = ("auto", "declared", "off")
# The container runtime of Docker runs: runc, gVisor's runsc, or gVisor when the engine offers it.
RUNTIMES = ("runc", "runsc", "auto")
# Settings given in bytes that also take a size like '256m' or '1g' (IPYSKILLS_INPUT_CAP=256m).
SIZE_FIELDS = ("input_cap", "workspace_size", "deps_max_size")


@dataclass(frozen=True)
class Settings:
    skill_dirs: tuple[str, ...] = ()  # configured roots, searched first
    default_roots: bool = True  # also search DEFAULT_ROOTS
    bundled_skills: bool = True  # the skills shipped with ipyskills, lowest precedence
    read_cap: int = 65536  # bytes one level-3 resource read may return
    manifest_cap: int = 200  # files listed in <skill_resources>
    backend: str = "auto"
    image: str = DEFAULT_IMAGE
    timeout: float = 30.0  # seconds, per run
    memory: str = "256m"
    pids: int = 128
    cpus: float = 1.0
    network: bool = False
    output_cap: int = 1024 * 1024  # bytes kept of stdout and of stderr, each
    stdin_cap: int = 32 * 1024**2  # bytes of stdin one run may be given
    input_cap: int = 64 * 1024**2  # bytes of --input / inputs= files staged into one run's workspace
    workspace_size: int = 128 * 1024**2  # the run's writable working folder (Docker: a tmpfs of this size)
    level2_cap: int = 30_000  # characters of level-2 text (SKILL.md body cut visibly to fit)
    guard: bool = True  # static check before every run
    pool_size: int = 2  # Docker containers kept started ahead of runs (0: no warm pool)
    pool_max: int = 8  # the warm pool grows to the recent burst of parallel runs, up to this (at most 8)
    deps: str = "auto"  # provision a skill's Python requirements before its first run (see DEPS_MODES)
    allow_sdist: bool = True  # build a package that has no wheel from its sdist, in a network-off container
    deps_max_count: int = 100  # distributions one provisioning may add
    deps_max_size: int = 2 * 1024**3  # their total download size (a size like 2g)
    gpu_wheels: bool = False  # accept CUDA builds (PyPI's torch) though the sandbox has no GPU: they run on CPU
    runtime: str = "runc"  # Docker runs: runc, runsc (gVisor) or auto (gVisor when the engine offers it)

    def __post_init__(self):
        # Sizes may be given as '256m' or a number of bytes; stored as bytes, checked here so a bad value
        # fails when it is set, not at the first run.
        for name in SIZE_FIELDS:
            object.__setattr__(self, name, parse_size(getattr(self, name), name))
        check_runtime(self.runtime, "runtime")

    def with_overrides(self, **changes) -> Settings:
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @classmethod
    def from_env(cls, environ: dict | None = None) -> Settings:
        """Defaults, then `IPYSKILLS_<NAME>` variables (skill dirs are os.pathsep-separated)."""
        env = os.environ if environ is None else environ
        values = {}
        for f in fields(cls):
            raw = env.get("IPYSKILLS_" + f.name.upper())
            if raw is None or raw == "":
                continue
            values[f.name] = _coerce(f.name, f.default, raw)
        return cls(**values)


def _coerce(name: str, default, raw: str):
    what = f"IPYSKILLS_{name.upper()}={raw!r}"
    if isinstance(default, bool):
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{what}: expected 1/0, true/false, yes/no or on/off")
    if isinstance(default, tuple):
        return tuple(p for p in raw.split(os.pathsep) if p)
    if name in SIZE_FIELDS:
        return parse_size(raw, f"IPYSKILLS_{name.upper()}")
    try:
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
    except ValueError:
        raise ConfigError(f"{what}: expected a number") from None
    if name == "backend" and raw not in BACKENDS:
        raise ConfigError(f"{what}: expected one of {', '.join(BACKENDS)}")
    if name == "deps":
        return check_deps_mode(raw, what)
    if name == "runtime":
        return check_runtime(raw, what)
    return raw


def check_deps_mode(value, what: str = "deps") -> str:
    if value not in DEPS_MODES:
        raise ConfigError(f"{what}: expected one of {', '.join(DEPS_MODES)} (auto: every requirement found, "
                          f"declared: only PEP 723 blocks, requirements files and install lines, off: none), "
                          f"got {value!r}")
    return value


def check_runtime(value, what: str = "runtime") -> str:
    if value not in RUNTIMES:
        raise ConfigError(f"{what}: expected one of {', '.join(RUNTIMES)} (runc: the host's kernel behind the "
                          f"sandbox's seccomp profile; runsc: gVisor's user-space kernel; auto: gVisor when "
                          f"the engine offers it), got {value!r}")
    return value


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgKMG]?)(?:i?[bB])?\s*$")
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(value, what: str = "size") -> int:
    """Bytes from an int or a string like '256m', '1g', '64MiB', '4096'."""
    if isinstance(value, bool):
        raise ConfigError(f"{what}: expected a size like 256m or 1g, got {value!r}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ConfigError(f"{what}: expected a size like 256m or 1g, got {value!r}")
        n = int(value)
    else:
        m = _SIZE.match(str(value))
        if not m:
            raise ConfigError(f"{what}: expected a size like 256m, 1g or a number of bytes, got {value!r}")
        n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if n <= 0:
        raise ConfigError(f"{what}: must be greater than zero, got {value!r}")
    return n
