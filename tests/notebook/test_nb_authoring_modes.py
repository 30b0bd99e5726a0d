"""%%skill gives written files ordinary permissions, so a sandbox running as another user can read them."""

from __future__ import annotations

import os
import stat

import pytest

NEW = "---\nname: notes\ndescription: Keeps notes. Use when asked to remember.\n---\n# Notes\n"


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_new_files_follow_the_umask_not_mkstemps_0600(ip, workdir, umask_022):
    done = ip.run_cell_magic("skill", "notes", NEW)
    assert mode(done.path) == 0o644
    script = ip.run_cell_magic("skill", "notes/scripts/hi.py", "print('hi')\n")
    assert mode(script.path) == 0o644


def test_rewriting_keeps_the_files_mode(ip, workdir, umask_022):
    script = ip.run_cell_magic("skill", "notes", NEW)
    script = ip.run_cell_magic("skill", "notes/scripts/hi.sh", "echo hi\n")
    script.path.chmod(0o750)
    again = ip.run_cell_magic("skill", "notes/scripts/hi.sh", "echo hello\n")
    assert again.action == "updated" and mode(again.path) == 0o750
