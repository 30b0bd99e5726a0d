"""Docker fixtures: a ready backend (or a skip, or a failure under IPYSKILLS_REQUIRE_DOCKER=1), real skill
folders on disk. The check that no container or process is left after a test is in tests/conftest.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from local_helpers import RunDirs, SkillFactory
from private_engine import PrivateEngine

from ipyskills.settings import DEFAULT_IMAGE


def _require_docker() -> bool:
    return os.environ.get("IPYSKILLS_REQUIRE_DOCKER") == "1"


def test_runtime() -> str:
    """The Docker runtime these tests run under: IPYSKILLS_TEST_RUNTIME=runsc runs them under gVisor
    (scripts/test.sh does that for the attack lab, the limit measurements and files in and out)."""
    return os.environ.get("IPYSKILLS_TEST_RUNTIME", "runc")


test_runtime.__test__ = False  # a helper, not a test


def forget_deps_images(client, installed: str) -> None:
    """Remove every dependency image whose installed set mentions `installed`, so the next run provisions
    for real (and forget this process's recent hits)."""
    from ipyskills.sandbox.provision import docker_image

    docker_image._hits.clear()
    for image in client.images.list(name=docker_image.REPOSITORY):
        if installed in (image.labels or {}).get(docker_image.LABEL_INSTALLED, ""):
            for tag in image.tags:
                client.images.remove(tag, force=True)


def gvisor_backend_from(docker_backend):
    """A DockerBackend with runtime runsc on the same engine and image; skips when the engine offers no
    gVisor runtime, and fails then under IPYSKILLS_REQUIRE_GVISOR=1."""
    from ipyskills.sandbox.docker import runtime
    from ipyskills.sandbox.docker.backend import DockerBackend

    client = docker_backend.client()
    runtime.forget_offered()
    if runtime.GVISOR_RUNTIME not in runtime.offered(client):
        if os.environ.get("IPYSKILLS_REQUIRE_GVISOR") == "1":
            pytest.fail("IPYSKILLS_REQUIRE_GVISOR=1 but the engine offers no gVisor runtime")
        pytest.skip("no gVisor runtime in the engine (sudo ipyskills sandbox gvisor)")
    return DockerBackend(image=docker_backend.image, client=client, runtime="runsc")


@pytest.fixture(scope="session")
def docker_backend():
    from ipyskills.sandbox.docker.backend import DockerBackend

    backend = DockerBackend(runtime=test_runtime())
    ready, reason = backend.readiness()
    if not ready:
        if _require_docker():
            pytest.fail(f"IPYSKILLS_REQUIRE_DOCKER=1 but the Docker backend is not ready: {reason}")
        pytest.skip(f"Docker backend not ready: {reason}")
    if backend.runtime == "runsc":
        from ipyskills.sandbox.docker.runtime import GVISOR_RUNTIME, offered

        if GVISOR_RUNTIME not in offered(backend.client()):
            pytest.fail("IPYSKILLS_TEST_RUNTIME=runsc but the engine offers no gVisor runtime: run "
                        "`sudo ipyskills sandbox gvisor`")
    return backend


@pytest.fixture
def make_skill():
    """`make_skill({"scripts/x.py": source}, name=...)`: a real skill folder every sandbox uid can read."""
    factory = SkillFactory()
    yield factory
    factory.cleanup()


@pytest.fixture
def skill_maker(make_skill):
    return make_skill


@pytest.fixture
def run_dirs(monkeypatch):
    return RunDirs(monkeypatch)


@pytest.fixture
def run_in_docker(docker_backend, skill_maker):
    """`run_in_docker({"scripts/x.py": src}, "scripts/x.py", stdin=b"", transfer="auto", **limits)`."""
    from ipyskills.sandbox.docker.backend import DockerBackend
    from ipyskills.sandbox.policy import Limits
    from ipyskills.sandbox.request import RunRequest

    def run(files, script, *, args=(), stdin=b"", env=None, transfer="auto", skill=None, **limits):
        folder = skill or skill_maker(files)
        backend = docker_backend if transfer == "auto" else DockerBackend(
            image=docker_backend.image, client=docker_backend.client(), skill_transfer=transfer,
            runtime=docker_backend.runtime)
        request = RunRequest(skill_name=folder.name, skill_dir=folder, script=script, args=list(args),
                             stdin=stdin, limits=Limits(**limits), env=dict(env or {}))
        return backend.run(request)

    return run


@pytest.fixture(scope="session")
def private_engine():
    if shutil.which("dockerd") is None or shutil.which("ip") is None or os.geteuid() != 0:
        pytest.skip("a private Docker engine needs dockerd, ip and root")
    if subprocess.run(["docker", "image", "inspect", DEFAULT_IMAGE], capture_output=True, check=False).returncode != 0:
        pytest.skip(f"the sandbox image {DEFAULT_IMAGE} is not on the shared engine")
    # tcp: test_remote_engine.py reaches the same engine over a loopback port, as a remote engine
    engine = PrivateEngine(Path(tempfile.mkdtemp(prefix="ipyskills-engine-", dir="/tmp")), tcp=True)
    try:
        engine.start()
        engine.load_image(DEFAULT_IMAGE)
        yield engine
    finally:
        engine.close()
