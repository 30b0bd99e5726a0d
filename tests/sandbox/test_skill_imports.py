"""A script can import its own skill's modules the way agent clients run it (from the skill folder, or as
`python -m scripts.x`), on both backends, and a skill file never shadows the standard library or the
image's packages."""

from __future__ import annotations

import pytest

from ipyskills import SkillRegistry
from ipyskills.sandbox.interpreter import skill_import_shape
from ipyskills.settings import Settings

FILES = {
    "scripts/quick_validate.py": "def validate():\n    return 'valid'\n",
    # the published shape: `python -m scripts.package_skill` in SKILL.md, an absolute import in the script
    "scripts/package_skill.py": ("import json, sys\nfrom scripts.quick_validate import validate\n"
                                 "print('path', validate(), json.dumps(sys.argv[1:]), __name__)\n"),
    # a package-relative import: only works when run as the module it is
    "scripts/relative.py": ("import sys\nfrom .quick_validate import validate\n"
                            "print('module', validate(), sys.argv[1:], __name__, __package__)\n"),
    "scripts/helpers/__init__.py": "",
    "scripts/helpers/fmt.py": "def shout(s):\n    return s.upper()\n",
    "scripts/uses_package.py": "from scripts.helpers.fmt import shout\nprint(shout('deep'))\n",
    # files at the skill root named like the standard library and an image package
    "json.py": "raise SystemExit('the skill shadowed json')\n",
    "numpy.py": "raise SystemExit('the skill shadowed numpy')\n",
    "scripts/stdlib_first.py": ("from scripts.quick_validate import validate\nimport json\n"
                                "print('json from', json.__file__.rsplit('/', 3)[-3])\n"),
    "scripts/plain.py": "import sys\nprint('plain', sys.path[0].rsplit('/', 1)[-1])\n",
}


@pytest.fixture
def skill(make_skill):
    files = {**FILES, "SKILL.md": "---\nname: packager\ndescription: Packages a skill.\n---\n# Packager\n\n"
                                  "Run `python -m scripts.package_skill DIR` from the skill folder.\n"}
    return make_skill(files, name="packager")


def registry(folder) -> SkillRegistry:
    return SkillRegistry([str(folder.parent)], settings=Settings(default_roots=False, bundled_skills=False,
                                                                pool_size=0))


def test_which_scripts_get_the_skill_root(skill):
    assert skill_import_shape(skill / "scripts/package_skill.py", "scripts/package_skill.py") == "path"
    assert skill_import_shape(skill / "scripts/relative.py", "scripts/relative.py") == "module"
    assert skill_import_shape(skill / "scripts/uses_package.py", "scripts/uses_package.py") == "path"
    assert skill_import_shape(skill / "scripts/plain.py", "scripts/plain.py") is None  # run by path as before
    assert skill_import_shape(skill / "scripts/helpers/fmt.py", "scripts/helpers/fmt.py") is None


BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_both_import_shapes_run(skill, backend, request):
    if backend == "docker":
        request.getfixturevalue("docker_backend")
    reg = registry(skill)
    absolute = reg.run("packager", "scripts/package_skill.py", args=["out dir", "-v"], backend=backend)
    assert (absolute.exit_code, absolute.stdout) == (0, 'path valid ["out dir", "-v"] __main__\n'), absolute.stderr
    relative = reg.run("packager", "scripts/relative.py", args=["x"], backend=backend)
    assert (relative.exit_code, relative.stdout) == (0, "module valid ['x'] __main__ scripts\n"), relative.stderr
    deep = reg.run("packager", "scripts/uses_package.py", backend=backend)
    assert deep.stdout == "DEEP\n", deep.stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_skill_file_never_shadows_the_standard_library_or_the_images_packages(skill, backend, request):
    if backend == "docker":
        request.getfixturevalue("docker_backend")
    reg = registry(skill)
    first = reg.run("packager", "scripts/stdlib_first.py", backend=backend)
    assert first.exit_code == 0 and first.stdout == "json from python3.11\n", (first.stdout, first.stderr)
    plain = reg.run("packager", "scripts/plain.py", backend=backend)
    assert plain.stdout == "plain scripts\n"  # a script without skill imports starts exactly as before
    if backend == "docker":  # numpy is one of the image's packages; json.py/numpy.py sit at the skill root
        (skill / "scripts" / "np.py").write_text("from scripts.quick_validate import validate\nimport numpy\n"
                                                 "print(numpy.__name__, hasattr(numpy, 'ndarray'))\n")
        numpy = reg.run("packager", "scripts/np.py", backend=backend)
        assert numpy.stdout == "numpy True\n", numpy.stderr
