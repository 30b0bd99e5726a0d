"""Deprecated: the tool loop moved to `ipyskills.agent.loop`; this name keeps working for one release.

`from ipyskills.agent_loop import run_agent, ScriptedClient, MatchingClient` (as the README showed) still
works and warns once; import from `ipyskills.agent.loop` instead.
"""

from __future__ import annotations

import warnings

from .agent import loop as _loop
from .agent.loop import *  # the old module's public names

# stacklevel 2 names the importing line (warnings skips the import machinery's frames).
warnings.warn("ipyskills.agent_loop is deprecated; import from ipyskills.agent.loop instead",
              DeprecationWarning, stacklevel=2)


def __getattr__(name: str):
    # Anything else the old module held (its private helpers too) comes from the new one.
    return getattr(_loop, name)
