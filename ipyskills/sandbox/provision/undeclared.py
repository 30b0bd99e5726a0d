"""Dependencies that some published packages import without declaring them, added when they are resolved.

A package's metadata is its author's word, and a few unmaintained ones leave out what they import at
module level, so `import ete3` fails with "No module named 'six'" in an environment built exactly from the
metadata (pip's and uv's alike; a long-lived environment usually has the module by accident). Resolvers
patch such metadata in a table (conda-forge's repodata patches, uv's `dependency-metadata`); this is ours,
kept to packages whose fix is not coming (no release in years) and each entry says what imports what.
Only names on the index are added, as ordinary requirements, resolved with everything else.
"""

from __future__ import annotations

from ..wheels import lock_names

# distribution -> (requirements it needs but does not declare, where it imports them)
KNOWN: dict[str, tuple[tuple[str, ...], str]] = {
    "ete3": (("six", "numpy"), "ete3 3.1.3 (2020, its last release) imports six in ncbi_taxonomy/ncbiquery.py "
                               "and numpy in evol/utils.py"),
}


def missing(lock: str) -> list[tuple[str, str]]:
    """(requirement, why) for each undeclared dependency of a distribution in `lock` that it lacks."""
    names = lock_names(lock)
    out = []
    for dist, (needs, where) in KNOWN.items():
        if dist in names:
            out += [(need, where) for need in needs if need not in names]
    return out


def complete(lock: str, specs: list[str], resolve, log) -> tuple[str, list[str]]:
    """(lock, specs): `lock` again with the undeclared dependencies added to `specs` (`resolve(specs)`
    gives the new lock), or both unchanged when nothing is missing."""
    extra = missing(lock)
    if not extra:
        return lock, specs
    for need, where in extra:
        log(f"dependencies: adding {need}, which the package imports without declaring it ({where})")
    specs = [*specs, *(need for need, _ in extra)]
    return resolve(specs), specs
