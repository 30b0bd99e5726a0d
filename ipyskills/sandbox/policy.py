"""Resource limits for one script run, checked once so every backend gets sane values."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..errors import ConfigError
from ..settings import parse_size  # sizes are read in settings, where every layer reaches (also re-exported)


@dataclass(frozen=True)
class Limits:
    """What one run may use. Every backend enforces what it can and says what it could not."""

    timeout: float = 30.0  # seconds of wall time, enforced from the host
    memory: int = 256 * 1024**2  # bytes; Docker sets swap equal to it (no extra swap)
    pids: int = 128
    cpus: float = 1.0
    tmp_size: int = 64 * 1024**2  # the /tmp tmpfs
    network: bool = False
    output_cap: int = 1024 * 1024  # bytes kept of stdout and of stderr, each
    artifact_cap: int = 16 * 1024**2  # total bytes of output files returned
    artifact_files: int = 100  # output files returned at most
    stdin_cap: int = 32 * 1024**2  # bytes of stdin one run may be given (a SandboxError past it)
    input_cap: int = 64 * 1024**2  # bytes of --input files staged into the workspace (a SandboxError past it)
    workspace_size: int = 128 * 1024**2  # the writable working folder (Docker: a tmpfs of this size)

    def __post_init__(self):
        if not isinstance(self.timeout, (int, float)) or isinstance(self.timeout, bool) or not self.timeout > 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {self.timeout!r}")
        if self.timeout > 24 * 3600:
            raise ConfigError(f"timeout must be at most one day (86400 s), got {self.timeout!r}")
        for name in ("memory", "tmp_size", "output_cap", "artifact_cap", "stdin_cap", "input_cap",
                     "workspace_size"):
            object.__setattr__(self, name, parse_size(getattr(self, name), name))
        if self.memory < 6 * 1024**2:
            raise ConfigError(f"memory must be at least 6m (Docker's minimum), got {self.memory} bytes")
        for name in ("pids", "artifact_files"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ConfigError(f"{name} must be a whole number of at least 1, got {v!r}")
        if not isinstance(self.cpus, (int, float)) or isinstance(self.cpus, bool) or not 0 < self.cpus < math.inf:
            raise ConfigError(f"cpus must be a positive number, got {self.cpus!r}")
        if self.input_cap > self.workspace_size:
            object.__setattr__(self, "workspace_size", self.input_cap + 64 * 1024**2)  # inputs leave room
        if not isinstance(self.network, bool):
            raise ConfigError(f"network must be True or False, got {self.network!r}")

    @classmethod
    def from_settings(cls, settings, **overrides) -> Limits:
        base = {name: getattr(settings, name) for name in ("timeout", "memory", "pids", "cpus", "network", "output_cap",
                                                       "stdin_cap", "input_cap", "workspace_size")}
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**base)

    def to_dict(self) -> dict:
        return asdict(self)
