"""ipyskills: Agent Skills in Jupyter.

`import ipyskills` stays cheap: heavy modules (docker, IPython, ipywidgets) load only when used.
"""

from __future__ import annotations

from .errors import SkillError

__version__ = "0.1.0"
__all__ = ["SkillError", "SkillRegistry", "registry", "__version__"]


def __getattr__(name: str):
    # Lazy so that `import ipyskills` does not pay for YAML or the registry until first use.
    if name == "SkillRegistry":
        from .core.registry import SkillRegistry

        return SkillRegistry
    raise AttributeError(f"module 'ipyskills' has no attribute {name!r}")


_default_registry = None


def registry():
    """The process-wide registry the magics and `ipyskills.browse()` use (created on first call)."""
    global _default_registry
    if _default_registry is None:
        from .core.registry import SkillRegistry

        _default_registry = SkillRegistry()
    return _default_registry
