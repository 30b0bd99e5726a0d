"""ipyskills: Agent Skills in Jupyter.

`import ipyskills` stays cheap: heavy modules (docker, IPython, ipywidgets) load only when used.
"""

from __future__ import annotations

from .errors import SkillError

__version__ = "0.1.0"
__all__ = ["SkillError", "SkillRegistry", "__version__", "registry"]


def __getattr__(name: str):
    # Lazy so that `import ipyskills` does not pay for YAML or the registry until first use.
    if name == "SkillRegistry":
        from .core.registry import SkillRegistry

        return SkillRegistry
    raise AttributeError(f"module 'ipyskills' has no attribute {name!r}")


def registry():
    """The process-wide registry the magics and `ipyskills.browse()` use (created on first call)."""
    from .core.registry import shared_registry

    return shared_registry()


def load_ipython_extension(ip) -> None:
    """`%load_ext ipyskills`: the magics, completion and rich display (see ipyskills.notebook.extension)."""
    from .notebook.extension import load_ipython_extension as load

    load(ip)


def unload_ipython_extension(ip) -> None:
    """`%unload_ext ipyskills`: removes exactly what loading added."""
    from .notebook.extension import unload_ipython_extension as unload

    unload(ip)


def browse(registry=None):
    """The skill browser widget (ipywidgets) over `registry`, default the process-wide one."""
    from .notebook.browser import browse as make

    return make(registry)
