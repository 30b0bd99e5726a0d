"""Which Python distributions (and which programs) a skill needs, and where each one came from.

The Agent Skills specification has no dependencies field, so published skills say what they need in
several informal ways. `analyze(skill_dir)` reads them all, bounded and without running anything:

1. PEP 723 blocks (`# /// script` ... `dependencies = [...]`) in every `*.py` of the skill;
2. `requirements*.txt` anywhere in the skill (with `-r` includes that stay inside it), and
   `[project].dependencies` of a `pyproject.toml`;
3. `pip install` / `pip3 install` / `python -m pip install` / `uv pip install` / `uv add` commands in
   SKILL.md, in fenced code blocks and inline code; lines marked optional are skipped;
4. imports in the scripts' syntax trees, mapped to distributions (`import_names.IMPORT_NAMES`, then the
   generated `data/import_map.json`); an import that maps to nothing known is reported, never guessed;
5. calls of known programs (soffice, pdftoppm, pandoc, node, ...) from Python and shell scripts and from
   shell blocks in SKILL.md, which decide the sandbox image profile.

Sources 1-3 are "declared"; imports are "inferred". One entry is kept per distribution: declared beats
inferred, and among declared ones pep723 > requirements > pyproject > skill-md. A distribution the
sandbox image already has goes to `provided` instead of `python`. Anything not turned into a requirement
(optional lines, GPU-only packages, URLs, unknown imports, unreadable files) goes to `skipped` with why.
"""


from __future__ import annotations

from .records import (
    BASE_REQUIREMENTS,
    IMPORT_MAP,
    KNOWN_PROGRAMS,
    MAX_BYTES,
    MAX_FILES,
    OFFICE_PROGRAMS,
    SOURCE_ORDER,
    ProgramUse,
    Requirement,
    SkillRequirements,
    default_provided,
    normalise,
)
from .scan import _Scan, analyze, analyze_cached

__all__ = ["BASE_REQUIREMENTS", "IMPORT_MAP", "KNOWN_PROGRAMS", "MAX_BYTES", "MAX_FILES", "OFFICE_PROGRAMS",
           "SOURCE_ORDER", "ProgramUse", "Requirement", "SkillRequirements", "_Scan", "analyze", "analyze_cached",
           "default_provided", "normalise"]
