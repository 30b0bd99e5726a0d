"""The sandbox image: its recipe hash, what is inside it, and the offline build path."""

from __future__ import annotations

import contextlib
import shutil

import pytest

from ipyskills.errors import SandboxError
from ipyskills.sandbox import image


def test_recipe_hash_follows_the_dockerfile_and_package_list(tmp_path, monkeypatch):
    for name in image.RECIPE_FILES:
        shutil.copy(image.IMAGES_DIR / name, tmp_path / name)
    monkeypatch.setattr(image, "IMAGES_DIR", tmp_path)
    original = image.recipe_hash()
    assert original == image.recipe_hash()
    (tmp_path / "packages.txt").write_text((tmp_path / "packages.txt").read_text() + "jq\n")
    changed = image.recipe_hash()
    assert changed != original and "jq" in image.packages()
    (tmp_path / "Dockerfile").write_text((tmp_path / "Dockerfile").read_text() + "# tweak\n")
    assert image.recipe_hash() not in (original, changed)


def test_package_list_has_what_skills_need():
    pkgs = image.packages()
    assert {"python3", "python3-numpy", "python3-pandas", "python3-matplotlib", "bash"} <= set(pkgs)
    assert not any(p.startswith("#") or " " in p for p in pkgs)


def test_offline_build_explains_missing_debootstrap(monkeypatch):
    class NoBaseClient:
        class images:  # mimics docker-py's client.images
            @staticmethod
            def get(tag):
                import docker.errors

                raise docker.errors.ImageNotFound(tag)

    monkeypatch.setattr(image.shutil, "which", lambda name: None)
    with pytest.raises(SandboxError, match="install it \\(apt-get install debootstrap\\)"):
        image.build_image(tag="ipyskills-test:never", offline=True, client=NoBaseClient(), log=lambda s: None)


@pytest.mark.docker
def test_built_image_is_current_and_has_the_tools(docker_backend, run_in_docker):
    client = docker_backend.client()
    info = image.image_info(client, docker_backend.image)
    assert info["current"], "the sandbox image is older than images/Dockerfile: run ipyskills sandbox build"
    script = (
        "import os, pwd, shutil, time; t = time.monotonic(); import numpy, pandas, matplotlib.pyplot as plt; "
        "print(pwd.getpwuid(1000).pw_name, os.getuid(), plt.get_backend(), bool(shutil.which('bash')), "
        "numpy.__version__ > '1', pandas.__version__ > '1', time.monotonic() - t < 5)"
    )
    result = run_in_docker({"check.py": script}, "check.py")
    assert result.stdout.split() == ["sandbox", "1000", "agg", "True", "True", "True", "True"]
    assert result.stderr == ""  # no "Matplotlib is building the font cache" (the image seeds it)


@pytest.mark.docker
@pytest.mark.slow
def test_offline_build_on_the_kept_base_needs_no_network(docker_backend):
    import docker.errors

    client = docker_backend.client()
    try:
        client.images.get(image.offline_base_tag())
    except docker.errors.ImageNotFound:
        pytest.skip("no imported offline base for this package list yet (ipyskills sandbox build --offline)")
    tag = "ipyskills-sandbox-test:offline"
    lines = []
    try:
        image.build_image(tag=tag, offline=True, client=client, log=lines.append)
        info = image.image_info(client, tag)
        assert info["current"] and info["build"] == "offline"
        assert any("reusing ipyskills-base:" in line for line in lines)
        assert any("stage 3/3: docker build" in line for line in lines)
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(tag)
