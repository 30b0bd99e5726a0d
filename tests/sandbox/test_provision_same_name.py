"""An import in no map is installed from the distribution of the same name only when that distribution's
wheel is seen to provide the module."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from local_helpers import needs_index

from ipyskills import SkillRegistry
from ipyskills.sandbox.provision import same_name
from ipyskills.settings import Settings



PLOT = 'import asciichartpy\nprint(asciichartpy.plot([1, 3, 2, 4], {"height": 3}).splitlines()[0].strip())\n'
SLUG = "import python_slugify\n"  # python-slugify exists, but provides `slugify`


@pytest.fixture
def charts(make_skill, monkeypatch):
    import shutil
    import tempfile

    cache = tempfile.mkdtemp(prefix="ipyskills-cache-")  # every run uid can read it (root's runs switch)
    os.chmod(cache, 0o755)
    monkeypatch.setenv("IPYSKILLS_CACHE_DIR", cache)
    same_name._verified.clear()
    assert importlib.util.find_spec("asciichartpy") is None and importlib.util.find_spec("slugify") is None
    skill = make_skill({"scripts/plot.py": PLOT, "scripts/slug.py": SLUG}, name="charts")
    yield SkillRegistry([str(skill.parent)], settings=Settings(default_roots=False, bundled_skills=False,
                                                              pool_size=0))
    shutil.rmtree(cache, ignore_errors=True)


@needs_index
@pytest.mark.slow
def test_a_same_name_distribution_that_provides_the_module_is_installed(charts):
    reqs = charts.requirements("charts")
    assert {s[0] for s in reqs.skipped if s[3].startswith("unknown import name")} == {"asciichartpy",
                                                                                        "python_slugify"}
    lines: list[str] = []
    result = charts.run("charts", "scripts/plot.py", backend="local", progress=lines.append)
    assert result.exit_code == 0 and result.stdout.startswith("4.00"), result.stderr
    assert "installed asciichartpy==" in result.notice and "slugify" not in result.notice
    assert any("the distribution asciichartpy provides it (seen in its wheel)" in line for line in lines)
    assert any("no distribution named python-slugify is seen to provide it: not installed" in line
               for line in lines)
    slug = charts.run("charts", "scripts/slug.py", backend="local")
    assert "No module named 'python_slugify'" in slug.stderr


@needs_index
def test_declared_mode_never_guesses(charts):
    result = charts.run("charts", "scripts/plot.py", backend="local", deps="declared")
    assert "No module named 'asciichartpy'" in result.stderr and result.notice == ""


def test_a_wheel_provides_a_module_as_a_package_a_file_or_an_extension(tmp_path: Path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "single.py").write_text("")
    (tmp_path / "fast.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    (tmp_path / "other-1.0.dist-info").mkdir()
    assert all(same_name.has_top_level(tmp_path, m) for m in ("pkg", "single", "fast"))
    assert not same_name.has_top_level(tmp_path, "other") and not same_name.has_top_level(tmp_path, "missing")
