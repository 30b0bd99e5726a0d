"""Source builds by default, in the build image: a real C-extension sdist from the registry is compiled
there and imported in the run; a real sdist whose build fails is remembered and not built again; the build
image never runs a script; the profile images check themselves."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from conftest import forget_deps_images

from ipyskills import SkillError, SkillRegistry
from ipyskills.settings import Settings

# crcmod 1.7 publishes only an sdist (and Windows installers). Its setup.py builds the C extension
# crcmod._crcfunext when a compiler is there and quietly falls back to pure Python when not, so importing
# that module proves the wheel was compiled.
CRC_SCRIPT = """\
import crcmod.predefined
import crcmod._crcfunext
crc32 = crcmod.predefined.mkCrcFun("crc-32")
print(hex(crc32(b"123456789")), crcmod._crcfunext.__file__.endswith(".so"))
"""
# pycairo 1.29.2 publishes wheels for Windows only; its meson build needs cairo's headers, which the build
# image does not have, so the build fails in the same way every time.
CAIRO_SCRIPT = "import cairo\nprint(cairo.version)\n"


def registry(folder: Path, **settings) -> SkillRegistry:
    base = Settings(default_roots=False, bundled_skills=False, pool_size=0)
    return SkillRegistry([str(folder)], settings=base.with_overrides(**settings))


@pytest.fixture
def failures(tmp_path, monkeypatch):
    """Remembered build failures go to a folder of this test."""
    from ipyskills.sandbox.provision import sdist

    folder = tmp_path / "failures"
    monkeypatch.setattr(sdist, "failures_dir", lambda: folder)
    return folder


def build_image_ready(client) -> None:
    from ipyskills.sandbox.docker.image import image_info, profile_image

    info = image_info(client, profile_image("build"))
    if not (info and info["current"]):
        if os.environ.get("IPYSKILLS_REQUIRE_DOCKER") == "1":
            pytest.fail("no current build image: scripts/setup.sh builds it (ipyskills sandbox build --profile "
                        "build --offline)")
        pytest.skip("no current build image (ipyskills sandbox build --profile build --offline)")


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_c_extension_sdist_is_compiled_in_the_build_image_by_default(docker_backend, make_skill, failures):
    client = docker_backend.client()
    build_image_ready(client)
    forget_deps_images(client, "crcmod")
    skill = make_skill({"requirements.txt": "crcmod==1.7\n", "scripts/crc.py": CRC_SCRIPT}, name="crc")
    lines: list[str] = []
    t0 = time.monotonic()
    result = registry(skill).run("crc", "scripts/crc.py", backend="docker", progress=lines.append)
    first = time.monotonic() - t0
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == ["0xcbf43926", "True"]  # CRC-32 of "123456789", from the C extension
    assert "crcmod==1.7" in result.notice
    assert any("building crcmod-1.7.tar.gz in ipyskills-sandbox-build:latest (network off" in line
               for line in lines), lines
    assert any("built crcmod-1.7-cp311-cp311-linux_x86_64.whl" in line for line in lines), lines
    # the built wheel is in the derived image: the second run builds nothing
    again: list[str] = []
    result = registry(skill).run("crc", "scripts/crc.py", backend="docker", progress=again.append)
    assert result.exit_code == 0 and not any("building" in line for line in again), again
    print(f"first provisioning with the C-extension build: {first:.1f} s")
    forget_deps_images(client, "crcmod")


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_failed_build_is_remembered_and_not_tried_again(docker_backend, make_skill, failures):
    client = docker_backend.client()
    build_image_ready(client)
    skill = make_skill({"requirements.txt": "pycairo==1.29.2\n", "scripts/draw.py": CAIRO_SCRIPT}, name="cairo")
    lines: list[str] = []
    with pytest.raises(SkillError) as first:
        registry(skill).run("cairo", "scripts/draw.py", backend="docker", progress=lines.append)
    message = str(first.value)
    assert "building pycairo from its source distribution (pycairo-1.29.2.tar.gz) failed" in message
    assert "ipyskills-sandbox-build:latest" in message and "cairo" in message.split("build log:", 1)[1]
    assert any("building pycairo-1.29.2.tar.gz in" in line for line in lines)
    assert len(list(failures.glob("*.json"))) == 1

    lines.clear()
    t0 = time.monotonic()
    with pytest.raises(SkillError) as second:
        registry(skill).run("cairo", "scripts/draw.py", backend="docker", progress=lines.append)
    took = time.monotonic() - t0
    assert "remembered: this build failed" in str(second.value) and "sandbox cleanup" in str(second.value)
    assert str(second.value).startswith(message.split(" The end of the build log")[0][:60])
    assert not any("building pycairo-1.29.2.tar.gz in" in line for line in lines), lines
    assert took < 30, f"the remembered failure took {took:.1f} s"

    from ipyskills.sandbox.provision.sdist import forget_failures

    assert forget_failures() == 1 and list(failures.glob("*.json")) == []


def test_a_remembered_failure_expires(failures):
    from ipyskills.sandbox.provision import sdist

    sdist._remember("k1", "pkg", Path("pkg-1.0.tar.gz"), "building pkg failed")
    record = json.loads((failures / "k1.json").read_text())
    assert record["name"] == "pkg" and record["message"] == "building pkg failed"
    assert sdist.remembered_failure("k1").startswith("building pkg failed\n(remembered: this build failed ")
    later = record["at"] + sdist.FAILED_BUILD_TTL + 1
    assert sdist.remembered_failure("k1", now=later) == ""
    assert not (failures / "k1.json").exists()  # an expired record is removed, the next build runs
    assert sdist.remembered_failure("missing") == ""


def test_no_sdist_and_allow_sdist_flags_reach_the_settings():
    import argparse

    from ipyskills.cli.deps_cmd import add_allow_sdist_option, apply_allow_sdist

    parser = argparse.ArgumentParser()
    add_allow_sdist_option(parser)

    class Reg:
        settings = Settings(allow_sdist=False)

    for argv, want in (([], False), (["--allow-sdist"], True), (["--no-sdist"], False)):
        reg = Reg()
        apply_allow_sdist(reg, parser.parse_args(argv))
        assert reg.settings.allow_sdist is want, argv
    reg = Reg()
    reg.settings = Settings()
    apply_allow_sdist(reg, parser.parse_args(["--no-sdist"]))
    assert reg.settings.allow_sdist is False
    with pytest.raises(SystemExit):
        parser.parse_args(["--no-sdist", "--allow-sdist"])


@pytest.mark.docker
def test_scripts_never_run_in_the_build_image(docker_backend, make_skill):
    from ipyskills.sandbox.docker.image import profile_image

    skill = make_skill({"scripts/x.py": "print('ran')\n"}, name="builder")
    with pytest.raises(SkillError, match="scripts never run in it"):
        registry(skill, image=profile_image("build")).run("builder", "scripts/x.py", backend="docker")


# -- the profile images check themselves ---------------------------------------------------------------------

def _present(client, profile: str, require: str) -> str:
    from ipyskills.sandbox.docker.image import image_info, profile_image

    tag = profile_image(profile)
    info = image_info(client, tag)
    if not (info and info["current"]):
        if os.environ.get(require) == "1":
            pytest.fail(f"{require}=1 but there is no current {profile} image")
        pytest.skip(f"no current {profile} image (ipyskills sandbox build --profile {profile} --offline)")
    return tag


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_office_image_recalculates_a_workbook_by_macro_converts_docx_and_reads_it_back_by_ocr(docker_backend):
    from ipyskills.sandbox.docker.profile_images import self_check

    client = docker_backend.client()
    tag = _present(client, "office", "IPYSKILLS_REQUIRE_OFFICE")
    summary = self_check(client, "office", tag)
    assert "LibreOffice 25." in summary
    assert "a macro recalculated [7, 12] with 1 error cell" in summary and "DOCX to PDF, 1 page" in summary
    assert "OFFICE CHECK 4217" in summary


@pytest.mark.docker
@pytest.mark.slow
def test_the_office_self_check_fails_on_an_image_without_office(docker_backend):
    """The check's verdict comes from the run: the core image has none of the programs."""
    from ipyskills.errors import SandboxError
    from ipyskills.sandbox.docker.profile_images import self_check

    with pytest.raises(SandboxError) as caught:
        self_check(docker_backend.client(), "office", docker_backend.image)
    message = str(caught.value)
    assert message.startswith("the office image failed its self-check: the macro recalculation gave [None, None]")
    assert "OCR of the rendered page" in message and "programs missing: qpdf, pandoc, gs, pdftotext" in message


@pytest.mark.docker
def test_the_build_image_compiles_a_c_extension_and_the_core_image_cannot(docker_backend):
    from ipyskills.errors import SandboxError
    from ipyskills.sandbox.docker.profile_images import self_check

    client = docker_backend.client()
    build_image_ready(client)
    assert "a C extension compiled against the Python headers" in self_check(client, "build")
    with pytest.raises(SandboxError, match="compiling a C extension against the Python headers failed"):
        self_check(client, "build", docker_backend.image)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_absent_build_image_is_made_on_first_need(docker_backend, monkeypatch):
    """Provisioning that needs a source build makes the build image when it is absent (here under a tag of
    the test's own, so the shared one stays), with progress, and builds in it."""
    import dataclasses

    from ipyskills.sandbox.docker import image, profile_images
    from ipyskills.sandbox.provision import sdist

    client = docker_backend.client()
    tag = f"ipyskills-sandbox-build:test-{os.getpid()}"
    monkeypatch.setitem(image.PROFILES, "build", tag)
    monkeypatch.setitem(profile_images.PROFILE_IMAGES, "build",
                        dataclasses.replace(profile_images.PROFILE_IMAGES["build"], tag=tag))
    lines: list[str] = []
    try:
        assert sdist.build_image(client, docker_backend.image, lines.append) == tag
        assert image.image_info(client, tag)["current"]
        assert any(f"making the build image {tag}" in line for line in lines), lines
        assert any("self-check passed" in line for line in lines), lines
        lines.clear()
        assert sdist.build_image(client, docker_backend.image, lines.append) == tag and lines == []  # made once
    finally:
        try:
            client.images.remove(tag, force=True)
        except Exception:  # noqa: BLE001 - absent when the build failed
            pass
