"""The `backend` fixture of the conformance suite: every test here is written once and runs on each backend
(`docker`, `docker-gvisor`, `podman`, `local`), through an object whose `run` runs a real skill script and
returns the real result.

- docker / docker-gvisor: DockerBackend with runtime runc / runsc in this process. Not ready here: a skip,
  or a failure under IPYSKILLS_REQUIRE_DOCKER=1 (and IPYSKILLS_REQUIRE_GVISOR=1 for gVisor).
- podman: the package run as uid 1000 in a subprocess (its own venv) against that user's rootless
  `podman system service` (tests/sandbox/podman_helpers.py, one service for the whole suite); the result
  comes back as JSON and is rebuilt into the same ExecuteResult, artifacts' bytes included. Unavailable
  here (not root, no podman or uidmap): a skip. Rootless Podman on cgroup v1 refuses a run whose limits it
  cannot enforce: `run(..., opt_in=False)` shows that; by default runs carry the documented opt-in
  (IPYSKILLS_PODMAN_NO_LIMITS=1), and the tests of the limits it then does not enforce are expected
  failures quoting the run's isolation line (`expect_difference`).
- local: LocalBackend in this process.

Where a backend differs by design, the test says so with `expect_difference` and the documentation's
words; nothing else is allowed to differ.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .backends import Backend, DockerInProcess, LocalInProcess, PodmanAsUser
from local_helpers import user_venv  # noqa: I001 (on the path once .backends is imported)
from podman_helpers import podman_service


def _required(name: str) -> bool:
    return os.environ.get(name) == "1"


def _docker(backend_id: str, runtime: str) -> Backend:
    """DockerBackend with `runtime`, or a skip saying why it cannot run here (a failure when required)."""
    from ipyskills.sandbox.docker.runtime import GVISOR_RUNTIME, offered

    variable = "IPYSKILLS_REQUIRE_GVISOR" if runtime == "runsc" else "IPYSKILLS_REQUIRE_DOCKER"
    made = DockerInProcess(backend_id, runtime)
    ready, reason = made.docker.readiness()
    if ready and runtime == "runsc" and GVISOR_RUNTIME not in offered(made.docker.client()):
        ready, reason = False, f"the engine offers no {GVISOR_RUNTIME} runtime (sudo ipyskills sandbox gvisor)"
    if not ready:
        if _required(variable):
            pytest.fail(f"{variable}=1 but {backend_id} cannot run here: {reason}")
        pytest.skip(f"{backend_id} not available here: {reason}")
    return made


@pytest.fixture(scope="session")
def _podman_service():
    with podman_service() as found:
        yield found


@pytest.fixture(scope="session", params=[pytest.param("docker", marks=pytest.mark.docker),
                                         pytest.param("docker-gvisor", marks=pytest.mark.docker),
                                         pytest.param("podman", marks=pytest.mark.docker),
                                         pytest.param("local")])
def backend(request):
    if request.param == "local":
        made = LocalInProcess()
        yield made
        made.close()
    elif request.param == "podman":
        base, url = request.getfixturevalue("_podman_service")
        import docker as docker_package

        with user_venv([str(Path(docker_package.__file__).resolve().parents[1])]) as python:
            made = PodmanAsUser(base, url, python)
            yield made
            made.close()
    else:
        made = _docker(request.param, "runsc" if request.param == "docker-gvisor" else "runc")
        yield made
        made.close()
