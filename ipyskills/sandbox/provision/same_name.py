"""An import no map knows, resolved to the distribution of the same name only when its wheel provides it.

The requirement scan never guesses: an import name that is neither in the curated table nor in the
generated map is reported as unknown (`import opentrons`, `import asciichartpy`). With `deps = auto`,
provisioning then looks at the distribution whose normalised name is the import's: it resolves it (wheels
only, hash-checked, like everything else), unpacks just that one wheel into a scratch folder and keeps it
only if the wheel really has the top-level module (a package folder, a `.py` or an extension module).
Anything else (no such distribution, no wheel, a wheel that installs other modules: `import
python_dateutil` finds python-dateutil, which provides `dateutil`) stays unknown with the scan's "declare
it" message. Generic names (`core.import_names.GENERIC_IMPORT_NAMES`) never get here. Answers are kept for
the process, per target.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ...core.requirements import Requirement, normalise
from ...errors import ProvisionError
from ..scratch import scratch_dir
from ..wheels import Target, compile_lock, install_target, lock_names
from . import missing_from

UNKNOWN = "unknown import name "
_verified: dict[tuple[str, str], bool] = {}  # (target, module) -> the same-name wheel provides it
_lock = threading.Lock()


def unknown_imports(reqs) -> list[tuple[str, str, int]]:
    """(module, file, line) of each import the scan could not map, once per module."""
    seen, out = set(), []
    for text, file, line, why in getattr(reqs, "skipped", []):
        if why.startswith(UNKNOWN) and text.isidentifier() and text not in seen:
            seen.add(text)
            out.append((text, file, line))
    return out


def verified_requirements(reqs, target: Target, constraints: str, log) -> list[Requirement]:
    """A requirement for each unknown import whose same-name distribution's wheel provides it."""
    found = []
    for module, file, line in unknown_imports(reqs):
        key = (target.describe(), module)
        with _lock:
            known = _verified.get(key)
        if known is None:
            known = provides_module(module, target, constraints)
            with _lock:
                _verified[key] = known
        dist = normalise(module)
        if known:
            log(f"dependencies: import {module} is in no map; the distribution {dist} provides it (seen in its "
                "wheel), so it is installed")
            found.append(Requirement(dist, dist, "import", file, line,
                                     f"import {module} (same-name distribution, checked in its wheel)"))
        else:
            log(f"dependencies: import {module} is in no map, and no distribution named {dist} is seen to "
                f"provide it: not installed (declare the package that does)")
    return found


def provides_module(module: str, target: Target, constraints: str) -> bool:
    """True when the distribution named like `module` has a wheel for `target` with that top-level module."""
    name = normalise(module)
    try:
        lock = compile_lock([name], target, constraints=constraints, log=lambda _line: None)
    except ProvisionError:
        return False
    others = {n: v for n, v in lock_names(lock).items() if n != name}
    just_it, picked = missing_from(lock, others)  # the entry of that distribution alone, with its hashes
    if not picked:
        return False  # already pinned by the constraints: then the scan would have known it
    with scratch_dir("probe") as tmp:
        try:
            install_target(just_it, tmp / "site", target, log=lambda _line: None)
        except ProvisionError:
            return False
        return has_top_level(tmp / "site", module)


def has_top_level(site: Path, module: str) -> bool:
    return ((site / module).is_dir() or (site / f"{module}.py").is_file()
            or any(site.glob(f"{module}.*.so")) or any(site.glob(f"{module}.*.pyd")))
