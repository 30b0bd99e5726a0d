"""%%skill_run --runtime: the option reaches the run (a real Docker run under gVisor when the engine has it)."""

from __future__ import annotations

import os

import pytest
from IPython.core.error import UsageError


def test_an_unknown_runtime_is_a_usage_error(ip):
    with pytest.raises(UsageError, match="invalid choice: 'kata'"):
        ip.run_line_magic("skill_run", "--runtime kata hello scripts/hi.py")


@pytest.mark.docker
def test_skill_run_under_gvisor_says_so(ip):
    from ipyskills.sandbox.docker.backend import DockerBackend
    from ipyskills.sandbox.docker.runtime import GVISOR_RUNTIME, offered

    backend = DockerBackend()
    ready, reason = backend.readiness()
    if not ready or GVISOR_RUNTIME not in offered(backend.client()):
        if os.environ.get("IPYSKILLS_REQUIRE_GVISOR") == "1":
            pytest.fail(f"IPYSKILLS_REQUIRE_GVISOR=1 but gVisor is not ready ({reason})")
        pytest.skip("no Docker engine with the gVisor runtime")
    result = ip.run_cell_magic("skill_run", "--backend docker --runtime runsc hello scripts/hi.py Ada", "some text\n")
    assert result.exit_code == 0, result.stderr
    assert result.isolation.startswith("docker, gVisor (systrap) kernel")
    result = ip.run_cell_magic("skill_run", "--backend docker hello scripts/hi.py Ada", "some text\n")
    assert "gVisor" not in result.isolation  # the setting's default, runc
