"""A folder whose SKILL.md is a FIFO (or socket, device) is listed in `skipped` with the reason, never
opened (it would block), and the scan of its siblings goes on."""

from __future__ import annotations

import os

import pytest

from ipyskills.core.discover import Discovery, make_root

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


def write_skill(folder, name):
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: A skill.\n---\nBody.\n")


def test_fifo_skill_md_is_skipped_with_a_reason(tmp_path):
    write_skill(tmp_path / "good", "good")
    (tmp_path / "pipe").mkdir()
    os.mkfifo(tmp_path / "pipe" / "SKILL.md")
    result = Discovery().scan([make_root(tmp_path)])
    assert [m.name for m in result.skills] == ["good"]
    [(folder, problems)] = result.skipped
    assert folder == tmp_path / "pipe"
    assert problems[0].code == "skill-md-not-file" and "not a regular file" in problems[0].message


def test_fifo_skill_md_as_the_root_itself(tmp_path):
    os.mkfifo(tmp_path / "SKILL.md")
    result = Discovery().scan([make_root(tmp_path)])
    assert result.skills == [] and [f for f, _ in result.skipped] == [tmp_path]


def test_regular_lowercase_file_wins_over_a_fifo(tmp_path):
    os.mkfifo(tmp_path / "SKILL.md")
    (tmp_path / "skill.md").write_text("---\nname: x\ndescription: A skill.\n---\n")
    result = Discovery().scan([make_root(tmp_path)])
    if result.skills:  # case-sensitive file system: the regular skill.md is used
        assert result.skipped == []
