"""The local skill copy is read-only to the run, and a file a script copies out of it is the script's to
change, as on Docker.

Found with benchmarks/real_tasks.py: anthropics' docx `comment.py` does `shutil.copy(template, unpacked/...)`
and then writes the copy; `shutil.copy` copies the mode, and the local copy's files were 0444 even where the
run's uid is not their owner, so the write failed with PermissionError on the local backend only."""

from __future__ import annotations

import os
import stat

import pytest

from ipyskills import SkillRegistry
from ipyskills.sandbox.local.skill_copy import copy_skill
from ipyskills.settings import Settings

COPY_AND_EDIT = """\
import os, shutil
here = os.path.dirname(os.path.abspath(__file__))
template = os.path.join(here, "..", "assets", "template.xml")
shutil.copy(template, "mine.xml")
with open("mine.xml", "a") as fh:
    fh.write("<edited/>")
print(open("mine.xml").read())
try:
    with open(template, "a") as fh:
        fh.write("x")
    print("SKILL WRITTEN")
except OSError as exc:
    print("skill read-only:", type(exc).__name__)
try:
    open(os.path.join(here, "new.txt"), "w")
    print("SKILL FOLDER WRITTEN")
except OSError as exc:
    print("skill folder read-only:", type(exc).__name__)
"""


def modes(folder):
    return {str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode) for p in sorted(folder.rglob("*"))}


def test_the_copy_keeps_only_the_owners_write_bit_when_asked(tmp_path):
    src = tmp_path / "src"
    (src / "scripts").mkdir(parents=True)
    (src / "scripts" / "run.sh").write_text("echo hi\n")
    os.chmod(src / "scripts" / "run.sh", 0o777)
    (src / "data.txt").write_text("x")
    os.chmod(src / "data.txt", 0o666)
    copy_skill(src, tmp_path / "by-mode")
    assert modes(tmp_path / "by-mode") == {"data.txt": 0o444, "scripts": 0o555, "scripts/run.sh": 0o555}
    copy_skill(src, tmp_path / "by-owner", owner_writable=True)
    assert modes(tmp_path / "by-owner") == {"data.txt": 0o644, "scripts": 0o755, "scripts/run.sh": 0o755}
    for folder in ("by-mode", "by-owner"):  # the test's own clean-up needs write access back
        for p in (tmp_path / folder).rglob("*"):
            os.chmod(p, 0o755)
        os.chmod(tmp_path / folder, 0o755)


@pytest.mark.skipif(os.geteuid() != 0, reason="runs take a uid of their own only when started as root")
def test_as_root_a_file_copied_out_of_the_skill_is_writable_and_the_skill_is_not(make_skill):
    skill = make_skill({"scripts/edit.py": COPY_AND_EDIT, "assets/template.xml": "<t/>"}, name="copier")
    reg = SkillRegistry([str(skill)], settings=Settings(default_roots=False, bundled_skills=False, pool_size=0))
    result = reg.run("copier", "scripts/edit.py", backend="local")
    assert result.exit_code == 0, result.stderr
    assert "<t/><edited/>" in result.stdout
    assert "skill read-only: PermissionError" in result.stdout, result.stdout
    assert "skill folder read-only: PermissionError" in result.stdout, result.stdout
    assert [a.path for a in result.artifacts] == ["mine.xml"]
    assert result.isolation.startswith("local: read-only copy of the skill")
    assert (skill / "assets" / "template.xml").read_text() == "<t/>"
