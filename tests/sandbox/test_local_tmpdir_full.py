"""When TMPDIR is full the local backend says so, instead of quietly making its run folder in /tmp."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from local_helpers import run

from ipyskills.errors import SandboxError


@pytest.fixture
def full_tmpfs():
    """A 1 MiB tmpfs, filled up (needs root and mount)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs")
    where = Path(tempfile.mkdtemp(prefix="ipyskills-fulltmp-"))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
                      capture_output=True, check=False).returncode != 0:
        where.rmdir()
        pytest.skip("cannot mount a tmpfs here")
    try:
        with open(where / "filler", "wb") as fh:
            try:
                fh.write(b"\0" * (2 * 1024**2))
            except OSError:
                pass
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)
        shutil.rmtree(where, ignore_errors=True)


def test_full_tmpdir_is_reported(full_tmpfs, skill_maker, monkeypatch):
    skill = skill_maker({"scripts/x.py": "print('hi')\n"}, name="tmpfull")
    monkeypatch.setenv("TMPDIR", str(full_tmpfs))
    before = set(os.listdir("/tmp"))
    with pytest.raises(SandboxError, match=r"TMPDIR\) is full"):
        run(skill, "scripts/x.py")
    assert not {n for n in set(os.listdir("/tmp")) - before if n.startswith("ipyskills-local-")}


def test_missing_tmpdir_is_reported(skill_maker, monkeypatch, tmp_path):
    skill = skill_maker({"scripts/x.py": "print('hi')\n"}, name="tmpgone")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "gone"))
    with pytest.raises(SandboxError, match="TMPDIR"):
        run(skill, "scripts/x.py")


def test_tmpdir_with_space_is_used(skill_maker, monkeypatch):
    skill = skill_maker({"scripts/x.py": "print('hi')\n"}, name="tmpok")
    tmp_path = Path(tempfile.mkdtemp(prefix="ipyskills-tmpdir-"))  # reachable by a run uid, unlike tmp_path
    os.chmod(tmp_path, 0o755)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    try:
        _check_used(skill, tmp_path, monkeypatch)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _check_used(skill, tmp_path, monkeypatch):
    made = []
    real = tempfile.mkdtemp

    def spy(*args, **kwargs):
        path = real(*args, **kwargs)
        made.append(path)
        return path

    monkeypatch.setattr(tempfile, "mkdtemp", spy)
    result = run(skill, "scripts/x.py")
    assert result.stdout.strip() == "hi"
    assert made and made[0].startswith(str(tmp_path))
