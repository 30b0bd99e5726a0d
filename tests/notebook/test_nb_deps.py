"""`%skills deps NAME [--install]` and the provisioning progress display, in a real InteractiveShell."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from IPython.core.error import UsageError

from .conftest import write


@pytest.fixture
def deps_skill(workdir):
    skill = workdir / "skills" / "tables"
    write(skill / "SKILL.md", "---\nname: tables\ndescription: Prints tables. Use for tables.\n---\n"
                              "# Tables\n\n```bash\npip install tabulate==0.9.0\n```\n")
    write(skill / "scripts" / "t.py", "import tabulate, yaml\nprint(tabulate.tabulate([[1, 2]]))\n")
    return skill


def test_skills_deps_shows_each_requirement_with_its_source(ip, deps_skill):
    view = ip.run_line_magic("skills", "deps tables")
    bundle = view._repr_mimebundle_()
    assert "tabulate==0.9.0" in bundle["text/plain"] and "SKILL.md:8" in bundle["text/plain"]
    html = bundle["text/html"]
    assert "<code>tabulate==0.9.0</code>" in html and "<code>SKILL.md:8</code>" in html
    assert "in the image" in html  # yaml: the sandbox image has PyYAML
    assert [r.name for r in view.requirements.python] == ["tabulate"]


def test_skills_deps_needs_a_name_and_its_options_need_deps(ip, deps_skill):
    with pytest.raises(UsageError, match="needs a skill"):
        ip.run_line_magic("skills", "deps")
    with pytest.raises(UsageError, match="go with %skills deps"):
        ip.run_line_magic("skills", "list --install")


@pytest.mark.slow
def test_skills_deps_install_shows_progress_then_the_summary(ip, deps_skill, monkeypatch):
    from IPython.utils.capture import capture_output

    cache = tempfile.mkdtemp(prefix="ipyskills-cache-")
    os.chmod(cache, 0o755)
    monkeypatch.setenv("IPYSKILLS_CACHE_DIR", cache)  # a fresh cache: the install really happens
    ip.run_line_magic("config", "IPySkills.sandbox_backend = 'local'")
    try:
        with capture_output() as cap:
            view = ip.run_line_magic("skills", "deps tables --install --deps declared")
        shown = "\n".join(o.data.get("text/plain", "") for o in cap.outputs)
        assert "dependencies: resolving" in shown  # the live progress display
        assert view.installed.installed == ["tabulate==0.9.0"] and view.installed.site.startswith(cache)
        assert "tabulate==0.9.0" in view.text().splitlines()[-1]
    finally:
        shutil.rmtree(cache, ignore_errors=True)
