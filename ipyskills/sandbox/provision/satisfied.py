"""Whether a run's interpreter already has everything a skill asks for, so no package index is asked.

Binder and hosted Jupyter install a demo's packages at build time and may have no index at run time (or a
slow one); a skill whose every requirement the interpreter already satisfies must run there offline. The
local backend's provisioning (local_site.ensure_site) asks this first: a plain requirement (a name, maybe
a version range and an environment marker) is satisfied when a distribution of that name is present at a
version in the range; one whose marker is false here is satisfied too. A requirement with extras, a URL,
or anything that does not parse is never taken as satisfied: the index decides as before.
"""

from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from ..wheels import normalize


def all_present(specs: list[str], present: dict[str, str]) -> bool:
    """True when every one of `specs` is met by `present` (normalised name -> version)."""
    for spec in specs:
        try:
            req = Requirement(spec)
        except InvalidRequirement:
            return False
        if req.marker is not None and not req.marker.evaluate():
            continue
        if req.extras or req.url:
            return False
        version = present.get(normalize(req.name))
        if version is None:
            return False
        try:
            if not req.specifier.contains(Version(version), prereleases=True):
                return False
        except InvalidVersion:
            return False
    return True
