"""`%load_ext ipyskills` / `%unload_ext ipyskills` / `%reload_ext ipyskills`.

Loading registers the magics, a completer for skill names and file paths, and mimebundle formatters for the
core objects (by module and class name, so nothing is imported until such an object is shown). Discovery
waits until a magic first needs the registry. Unloading removes exactly what loading added: IPython has no
public way to unregister magics, so our names are taken out of the magics manager's tables.
"""

from __future__ import annotations

# Core objects that render richly once the extension is loaded (module, class name).
FORMATTED_TYPES = (
    ("ipyskills.core.model", "SkillMeta"),
    ("ipyskills.core.prompt", "SkillContent"),
    ("ipyskills.core.prompt", "SkillResource"),
    ("ipyskills.core.validate", "ValidationReport"),
    ("ipyskills.sandbox.result", "ExecuteResult"),
    ("ipyskills.sandbox.guard", "GuardReport"),
)

_loaded: dict[int, object] = {}  # id(shell) -> our IPySkills magics instance


def _format(obj):
    from .display import bundle_for

    return bundle_for(obj)


def load_ipython_extension(ip) -> None:
    from .completion import make_completer
    from .magics import IPySkills

    if id(ip) in _loaded:
        return
    magics = IPySkills(shell=ip)
    ip.register_magics(magics)
    formatter = ip.display_formatter.mimebundle_formatter
    for module, name in FORMATTED_TYPES:
        formatter.for_type_by_name(module, name, _format)
    magics.completer = make_completer(magics)
    ip.Completer.custom_matchers.append(magics.completer)
    _loaded[id(ip)] = magics


def unload_ipython_extension(ip) -> None:
    magics = _loaded.pop(id(ip), None)
    if magics is None:
        return
    manager = ip.magics_manager
    for kind, names in magics.magics.items():
        table = manager.magics[kind]
        for name in names:
            bound = table.get(name)
            if getattr(bound, "__self__", None) is magics:
                del table[name]
    if manager.registry.get(type(magics).__name__) is magics:
        del manager.registry[type(magics).__name__]
    if magics in ip.configurables:
        ip.configurables.remove(magics)
    formatter = ip.display_formatter.mimebundle_formatter
    for module, name in FORMATTED_TYPES:
        if formatter.deferred_printers.get((module, name)) is _format:
            del formatter.deferred_printers[(module, name)]
        for cls in [c for c, fn in formatter.type_printers.items()
                    if fn is _format and (c.__module__, c.__name__) == (module, name)]:
            del formatter.type_printers[cls]
    if magics.completer in ip.Completer.custom_matchers:
        ip.Completer.custom_matchers.remove(magics.completer)
    _drain_pool()


def _drain_pool() -> None:
    """Pooled containers go with the extension (only if a pool was ever started: no docker import)."""
    import sys

    pool = sys.modules.get("ipyskills.sandbox.docker.pool")
    if pool is not None:
        pool.drain_all()
