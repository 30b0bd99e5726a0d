"""%%skill: write, validate at once, refresh; refuse escapes, bundled skills, and silent overwrites."""

from __future__ import annotations

import os

import pytest
from IPython.core.error import UsageError

from ipyskills.notebook.magics import MagicError

NEW = "---\nname: notes\ndescription: Keeps notes. Use when asked to remember.\n---\n# Notes\n\nWrite them down.\n"


def test_new_skill_is_written_validated_and_loaded(ip, workdir):
    done = ip.run_cell_magic("skill", "notes", NEW)
    target = workdir / "skills" / "notes" / "SKILL.md"
    assert done.path == target and done.action == "created"
    assert target.read_text() == NEW
    assert done.valid
    assert "Valid skill" in ip.display_formatter.format(done)[0]["text/plain"]
    assert "notes" in ip.run_line_magic("skills", "").names


def test_invalid_skill_is_written_and_reported(ip, workdir):
    done = ip.run_cell_magic("skill", "broken", "---\nname: broken\n---\nNo description.\n")
    assert (workdir / "skills" / "broken" / "SKILL.md").exists()
    assert not done.valid
    bundle = ip.display_formatter.format(done)[0]
    assert "Invalid skill" in bundle["text/plain"] and "description" in bundle["text/plain"]
    assert "invalid" in bundle["text/html"]


def test_authoring_root_is_configurable(ip, workdir):
    ip.run_line_magic("config", f"IPySkills.authoring_root = {str(workdir / 'mine')!r}")
    done = ip.run_cell_magic("skill", "notes", NEW)
    assert done.path == workdir / "mine" / "notes" / "SKILL.md"
    assert ip.run_line_magic("skill_load", "notes").value.directory == workdir / "mine" / "notes"


def test_authoring_root_in_an_unknown_users_home_is_one_clear_error(ip, workdir):
    ip.run_line_magic("config", "IPySkills.authoring_root = '~no-such-user-ipyskills/skills'")
    with pytest.raises(MagicError, match="authoring_root"):
        ip.run_cell_magic("skill", "notes", NEW)


def test_rewriting_our_own_file_just_works(ip, workdir):
    ip.run_cell_magic("skill", "notes", NEW)
    done = ip.run_cell_magic("skill", "notes", NEW.replace("Write them down.", "Write them all down."))
    assert done.action == "updated" and done.backup is None
    assert "Write them all down." in ip.run_line_magic("skill_load", "notes --raw")
    assert ip.run_cell_magic("skill", "notes", NEW.replace("Write them down.", "Write them all down.")
                             ).action == "unchanged"


def test_someone_elses_file_needs_force_and_keeps_a_backup(ip, workdir):
    target = workdir / "skills" / "hello" / "SKILL.md"
    original = target.read_text()
    with pytest.raises(MagicError, match="--force"):
        ip.run_cell_magic("skill", "hello", NEW.replace("notes", "hello"))
    assert target.read_text() == original
    done = ip.run_cell_magic("skill", "--force hello", NEW.replace("notes", "hello"))
    assert done.backup == target.with_name("SKILL.md.bak")
    assert done.backup.read_text() == original
    assert target.read_text() == NEW.replace("notes", "hello")
    # a second forced write of a file changed behind our back keeps both old versions
    target.write_text(original)
    again = ip.run_cell_magic("skill", "--force hello", NEW.replace("notes", "hello"))
    assert again.backup == target.with_name("SKILL.md.bak.2")


def test_file_changed_behind_our_back_is_protected(ip, workdir):
    ip.run_cell_magic("skill", "notes", NEW)
    target = workdir / "skills" / "notes" / "SKILL.md"
    target.write_text(NEW + "\nEdited in another editor.\n")
    with pytest.raises(MagicError, match="already exists"):
        ip.run_cell_magic("skill", "notes", NEW)
    assert "another editor" in target.read_text()


def test_writing_a_resource_file(ip, workdir):
    done = ip.run_cell_magic("skill", "hello/references/faq.md", "# FAQ\n")
    assert done.path == workdir / "skills" / "hello" / "references" / "faq.md"
    assert "references/faq.md" in ip.run_line_magic("skill_load", "hello").value.resources


@pytest.mark.parametrize("locator, message", [
    ("hello/../../evil.md", "leaves the skill folder"),
    ("hello//x.md", "must be relative"),
    ("../evil", "cannot be a skill folder name"),
    ("hello/C:/x", "drive"),
])
def test_paths_that_escape_are_refused(ip, workdir, locator, message):
    before = sorted(p for p in workdir.rglob("*"))
    with pytest.raises(MagicError, match=message):
        ip.run_cell_magic("skill", locator, "x\n")
    assert sorted(p for p in workdir.rglob("*")) == before


def test_symlink_out_of_the_skill_is_refused(ip, workdir, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    os.symlink(outside, workdir / "skills" / "hello" / "linked")
    with pytest.raises(MagicError, match="escapes|link"):
        ip.run_cell_magic("skill", "hello/linked/pwned.md", "x\n")
    assert list(outside.iterdir()) == []


def test_a_file_name_the_os_refuses_is_one_clear_error(ip, workdir):
    # A name over NAME_MAX: stat() fails with ENAMETOOLONG, which must not surface as a bare OSError.
    with pytest.raises(MagicError, match="cannot write"):
        ip.run_cell_magic("skill", "hello/" + "a" * 5000 + ".md", "text\n")


def test_file_for_a_missing_skill_is_refused(ip, workdir):
    with pytest.raises(MagicError, match="write its SKILL.md first"):
        ip.run_cell_magic("skill", "ghost/references/a.md", "x\n")
    assert not (workdir / "skills" / "ghost").exists()


def test_bundled_skill_is_never_written(ip, workdir, monkeypatch):
    from ipyskills.core import discover

    bundled = workdir / "bundled"
    (bundled / "shipped").mkdir(parents=True)
    (bundled / "shipped" / "SKILL.md").write_text("---\nname: shipped\ndescription: Shipped.\n---\nBody\n")
    monkeypatch.setattr(discover, "bundled_skills_dir", lambda: bundled)
    ip.run_line_magic("config", "IPySkills.default_roots = False")
    ip.run_line_magic("config", "IPySkills.bundled_skills = True")
    assert ip.run_line_magic("skills", "").names == ["shipped"]
    with pytest.raises(MagicError, match="bundled"):
        ip.run_cell_magic("skill", "--force shipped", "---\nname: shipped\ndescription: Mine\n---\n")
    assert "Shipped." in (bundled / "shipped" / "SKILL.md").read_text()


def test_line_form_is_usage_error(ip):
    with pytest.raises(UsageError, match="cell magic"):
        ip.run_line_magic("skill", "notes")
