"""Getting a skill's Python requirements into the sandbox before its run, with the run itself network-off.

The requirements come from `ipyskills.core.requirements` (declared sources and inferred imports). Both
backends do the same three steps, only the place the packages end up differs:
1. resolve on the host, wheels only, with every distribution pinned and hash-checked (`wheels.py`), using
   what the run's Python already has as constraints, so nothing it ships is replaced under it;
2. keep only what is missing, and unpack exactly those wheels;
3. Docker: bake them into an image built FROM the sandbox image with the network off (`docker_image.py`);
   local: a folder in the user's cache that goes first on the run's PYTHONPATH (`local_site.py`).
Both are keyed by a hash of what they were made for, so a second skill with the same set reuses them and a
cache hit costs one lookup. Provisioning happens before the run starts: its time never counts against
the script's timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...core.requirement_text import shown

Progress = Callable[[str], None]


def _quiet(_line: str) -> None:
    pass


@dataclass
class Provisioned:
    """What provisioning did for one run."""

    installed: list[str] = field(default_factory=list)  # "name==version" added for this skill
    image: str = ""  # docker: the image to run in
    site: str = ""  # local: the folder put first on PYTHONPATH
    built: bool = False  # False: reused from the cache (or nothing was missing)
    seconds: float = 0.0
    reasons: list[str] = field(default_factory=list)  # one per requirement: "pypdf (requirements.txt:2)"
    replaced: list[str] = field(default_factory=list)  # docker: "name old → new" of the image's own packages
    verified: bool = False  # local: the folder's files were checked against their RECORD hashes before use
    skipped: list[str] = field(default_factory=list)  # "name (SKILL.md:12)": loose lines the index lacks

    def notice(self) -> str:
        """The line a result carries when this run installed something or skipped a requirement."""
        skipped = (f"dependencies: skipped {', '.join(self.skipped)}: not on the package index"
                   if self.skipped else "")
        if not self.built or not self.installed:
            return skipped
        return "; ".join(p for p in (self._installed(), skipped) if p)

    def _installed(self) -> str:
        where = f"image {self.image}" if self.image else f"{self.site}"
        names = ", ".join(self.installed[:8]) + (f" and {len(self.installed) - 8} more"
                                                  if len(self.installed) > 8 else "")
        why = "; ".join(self.reasons[:6]) + (" …" if len(self.reasons) > 6 else "")
        offline = " (the run itself stays offline)" if self.image else ""
        swapped = f"; replaced the image's {', '.join(self.replaced)}" if self.replaced else ""
        return (f"dependencies: installed {names} into {where} in {self.seconds:.1f} s, for {why}{swapped}"
                f"{offline}")


# Part of every provisioning's cache key: bumped when the same requirements resolve to other sets than
# before (2: the image's versions are preferences, undeclared dependencies are added, torch's CPU builds),
# so an image or folder made the old way is not reused for them.
RESOLVE_POLICY = 2
BASE_LOCK = Path(__file__).parent.parent / "docker" / "images" / "base.lock"


def base_lock() -> str:
    """The lock the sandbox image's Python packages were installed from (its versions are constraints
    for everything added on top of it)."""
    try:
        return BASE_LOCK.read_text()
    except OSError:
        return ""


def wanted_requirements(reqs, mode: str, backend: str) -> list:
    """The requirements a run resolves: all found (mode auto) or only declared ones. What the sandbox
    image has is left out when merely imported, but kept when declared, since a declaration may ask for
    another version (the image's versions are constraints, so a clash is reported, and a satisfied one
    installs nothing). On the local backend this Python is the baseline instead, so all of those count."""
    if reqs is None or mode == "off":
        return []
    provided = reqs.provided if backend == "local" else [r for r in reqs.provided if r.declared]
    return [r for r in [*reqs.python, *provided] if mode == "auto" or r.declared]


def reasons_for(requirements: list) -> list[str]:
    """'name (where it came from)' for each requirement, for the notice."""
    out = []
    for req in requirements:
        origin = f"import in {req.file}:{req.line}" if req.source == "import" else f"{req.file}:{req.line}"
        out.append(shown(f"{req.name} ({origin})", 300))  # a file name may hold a line break
    return out


def missing_from(lock: str, present: dict[str, str]) -> tuple[str, list[str]]:
    """The entries of `lock` whose name and version `present` does not already have: (lock text of
    just those, their "name==version" list)."""
    from ..wheels import lock_names, normalize

    wanted = lock_names(lock)
    keep = {name for name, version in wanted.items() if present.get(name) != version}
    entries, current = [], []
    for line in lock.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            name = normalize(line.split("==", 1)[0].strip())
            current = entries if name in keep else []
            if name in keep:
                entries.append(line)
            continue
        if current is entries and line.strip() and not line.strip().startswith("#"):
            entries.append(line)  # a hash continuation line of a kept entry
    text = "\n".join(entries) + ("\n" if entries else "")
    return text, sorted(f"{name}=={wanted[name]}" for name in keep)


class Timer:
    def __init__(self):
        self.t0 = time.monotonic()

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.t0
