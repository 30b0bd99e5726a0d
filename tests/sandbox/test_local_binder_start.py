"""binder/start: one trial run on the local backend tells, at start, what held on this machine (as root
and as the notebook's own user, uid 1000 as on Binder); then the start script hands over to its command.
Nothing of the trial run is left."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from local_helpers import AS_ROOT, REPO, USER_UID, as_user, landlock_abi, user_venv

START = Path(REPO) / "binder" / "start"


def start(python: Path, **popen) -> subprocess.CompletedProcess:
    tmp = Path(tempfile.mkdtemp(prefix="ipyskills-test-start-"))
    try:
        if popen:
            os.chown(tmp, USER_UID, USER_UID)
        env = {**popen.pop("env", {"HOME": str(tmp)}), "PATH": f"{python.parent}:/usr/bin:/bin", "TMPDIR": str(tmp)}
        done = subprocess.run(["bash", str(START), "echo", "handed over"], capture_output=True, text=True,
                              timeout=60, check=False, env=env, **popen)
        assert os.listdir(tmp) == [], "the trial run left something in TMPDIR"
        return done
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0 and done.stdout == "handed over\n", done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == "ipyskills local backend on this machine:", done.stderr
    assert lines[1].startswith("  confined: ") and lines[2].startswith("  NOT confined: "), done.stderr
    if landlock_abi() >= 1:
        assert "writes only the run folder (Landlock ABI" in lines[1]
    return done.stderr


def test_binder_start_as_root_prints_what_held():
    if not AS_ROOT:
        pytest.skip("the uid 1000 case below is the ordinary user's")
    check(start(Path(sys.executable)))


def test_binder_start_as_uid_1000_prints_what_held():
    with user_venv() as python:
        text = check(start(python, **as_user()))
    assert f"runs as the current user (uid {USER_UID})" in text
