"""Import paths the README once showed keep working for one release, with a DeprecationWarning that names
the new place."""

from __future__ import annotations

import importlib
import sys

import pytest


def test_agent_loop_path_warns_and_gives_the_same_objects():
    sys.modules.pop("ipyskills.agent_loop", None)
    with pytest.warns(DeprecationWarning, match=r"ipyskills\.agent\.loop"):
        old = importlib.import_module("ipyskills.agent_loop")
    from ipyskills.agent import loop

    for name in ("run_agent", "ScriptedClient", "MatchingClient", "ClientError", "Transcript", "ANSWERED",
                 "_compact"):
        assert getattr(old, name) is getattr(loop, name)
    with pytest.raises(AttributeError):
        old.no_such_name  # noqa: B018
