"""Fixtures for the published-skill imitations in tests/published/skills: a registry over a readable copy
of them, the Docker backend (a skip, or a failure under IPYSKILLS_REQUIRE_DOCKER=1), the office image (a
skip, or a failure under IPYSKILLS_REQUIRE_OFFICE=1). tests/conftest.py checks that no container is left."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "skills"


def _required(variable: str) -> bool:
    return os.environ.get(variable) == "1"


@pytest.fixture(scope="session")
def published_root():
    """A copy of the fixture skills every sandbox uid can read (a checkout may sit in a private home)."""
    base = Path(tempfile.mkdtemp(prefix="ipyskills-published-"))
    os.chmod(base, 0o755)
    root = base / "skills"
    shutil.copytree(FIXTURES, root, ignore=shutil.ignore_patterns("__pycache__"))
    for folder, dirs, files in os.walk(root):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    yield root
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def published_registry(published_root):
    from ipyskills import SkillRegistry
    from ipyskills.settings import Settings

    settings = Settings(default_roots=False, bundled_skills=False, backend="docker", pool_size=0)
    return SkillRegistry([str(published_root)], settings=settings)


@pytest.fixture(scope="session")
def docker_backend():
    from ipyskills.sandbox.docker.backend import DockerBackend

    backend = DockerBackend()
    ready, reason = backend.readiness()
    if not ready:
        if _required("IPYSKILLS_REQUIRE_DOCKER"):
            pytest.fail(f"IPYSKILLS_REQUIRE_DOCKER=1 but the Docker backend is not ready: {reason}")
        pytest.skip(f"Docker backend not ready: {reason}")
    return backend


@pytest.fixture(scope="session")
def office_image(docker_backend):
    """The office profile image's tag; skips (fails under IPYSKILLS_REQUIRE_OFFICE=1) when it is absent."""
    def missing(reason: str):
        if _required("IPYSKILLS_REQUIRE_OFFICE"):
            pytest.fail(f"IPYSKILLS_REQUIRE_OFFICE=1 but {reason}")
        pytest.skip(reason)

    from ipyskills.sandbox.docker.image import image_info, profile_image  # a rename fails, never skips

    tag = profile_image("office")
    if image_info(docker_backend.client(), tag) is None:
        missing(f"the office image {tag} is not built (ipyskills sandbox build --profile office --offline)")
    return tag
