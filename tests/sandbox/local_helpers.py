"""Helpers for the local backend tests: real skill folders on disk and one-call runs."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ipyskills.sandbox.local.backend import LocalBackend
from ipyskills.sandbox.policy import Limits
from ipyskills.sandbox.runner import RunRequest

AS_ROOT = os.geteuid() == 0
SKILL_MD = "---\nname: {name}\ndescription: A skill used by the sandbox tests.\n---\nBody.\n"


class SkillFactory:
    """Makes skill folders under the system temp dir (reachable by uid 65534, like a real install would
    be) and removes them afterwards."""

    def __init__(self):
        self.made: list[Path] = []

    def __call__(self, files: dict[str, str | bytes], name: str = "attack") -> Path:
        base = Path(tempfile.mkdtemp(prefix="ipyskills-test-"))
        os.chmod(base, 0o755)
        self.made.append(base)
        skill = base / name
        skill.mkdir(mode=0o755)
        (skill / "SKILL.md").write_text(SKILL_MD.format(name=name))
        for rel, content in files.items():
            path = skill / rel
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
            os.chmod(path, 0o755 if rel.endswith(".sh") else 0o644)
        return skill

    def cleanup(self):
        for base in self.made:
            shutil.rmtree(base, ignore_errors=True)


def run(skill: Path, script: str, args=(), stdin: bytes = b"", env=None, **limits):
    request = RunRequest(
        skill_name=skill.name,
        skill_dir=skill,
        script=script,
        args=list(args),
        stdin=stdin,
        limits=Limits(**{"timeout": 20, **limits}),
        env=dict(env or {}),
    )
    return LocalBackend().run(request)


class RunDirs:
    """Records the run folders the local backend creates in this process (other processes on the machine
    may be running it too), so a test can check that every one of them is gone."""

    def __init__(self, monkeypatch):
        from ipyskills.sandbox.local import backend as local_backend

        self.made: list[str] = []
        real = tempfile.mkdtemp

        def recording_mkdtemp(*args, **kwargs):
            path = real(*args, **kwargs)
            if os.path.basename(path).startswith("ipyskills-local-"):
                self.made.append(path)
            return path

        monkeypatch.setattr(local_backend.tempfile, "mkdtemp", recording_mkdtemp)

    def left_behind(self) -> list[str]:
        return [p for p in self.made if os.path.lexists(p)]


def pids_alive(pids) -> list[int]:
    """Those of `pids` that still exist and are not zombies."""
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if state != "Z":
            alive.append(pid)
    return alive
