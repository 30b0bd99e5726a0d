"""A skill's requirements win over the sandbox image's own pins: the derived image carries the versions the
skill needs, with no file of the image's old version left, and the notice says what it replaced."""

from __future__ import annotations

import pytest
from conftest import forget_deps_images

from ipyskills import SkillError, SkillRegistry
from ipyskills.settings import Settings

OLD_TQDM = """\
# /// script
# dependencies = ["tqdm<4.67"]
# ///
import glob, importlib.metadata as md, tqdm
print(tqdm.__version__, md.version("tqdm"))
print(len(glob.glob("/usr/local/lib/python3.11/dist-packages/tqdm-*.dist-info")))
import pandas, numpy, scipy  # the rest of the image still works
print("stack", pandas.__version__ >= "2")
"""


def registry(folder) -> SkillRegistry:
    return SkillRegistry([str(folder.parent)], settings=Settings(default_roots=False, bundled_skills=False,
                                                                pool_size=0))


@pytest.mark.docker
@pytest.mark.slow
def test_a_skill_that_needs_an_older_version_of_an_image_package_gets_it(docker_backend, make_skill):
    from ipyskills.sandbox.provision import base_lock
    from ipyskills.sandbox.wheels import lock_names

    image_tqdm = lock_names(base_lock())["tqdm"]
    assert image_tqdm >= "4.67", "the image's tqdm no longer conflicts with tqdm<4.67: pick another pin"
    client = docker_backend.client()
    forget_deps_images(client, "tqdm==4.66")
    skill = make_skill({"scripts/run.py": OLD_TQDM}, name="old-tqdm")
    lines: list[str] = []
    result = registry(skill).run("old-tqdm", "scripts/run.py", backend="docker", memory="1g", timeout=120,
                                 progress=lines.append)
    assert result.exit_code == 0, result.stderr
    version, same, infos, _stack, works = result.stdout.split()
    assert version.startswith("4.66") and same == version and infos == "1" and works == "True"
    assert f"replaced the image's tqdm {image_tqdm} → {version}" in result.notice
    from ipyskills.sandbox.docker.image import base_requirements

    # one resolve of the skill's set with the image's own, the image's versions as preferences
    assert any(f"resolving 1 requirement(s) with the image's {len(base_requirements())} for" in line
               for line in lines), lines
    forget_deps_images(client, "tqdm==4.66")


@pytest.mark.docker
def test_a_set_no_versions_satisfy_names_the_clash(docker_backend, make_skill):
    skill = make_skill({"scripts/run.py": "# /// script\n# dependencies = [\"tqdm<4.60,>4.68\"]\n"
                                          "# ///\nimport tqdm\n"}, name="impossible")
    with pytest.raises(SkillError) as caught:
        registry(skill).run("impossible", "scripts/run.py", backend="docker")
    message = str(caught.value)
    assert "cannot be satisfied" in message and "tqdm" in message
    assert "No versions satisfy the skill's requirements together with the sandbox image's packages" in message
