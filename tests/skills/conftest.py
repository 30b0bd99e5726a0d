"""Helpers for running bundled skill scripts as real subprocesses, the way ipyskills runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "skills"
EXAMPLES = REPO / "examples" / "skills"


class ScriptRun:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.code = proc.returncode
        self.stdout = proc.stdout.decode("utf-8")
        self.stderr = proc.stderr.decode("utf-8")

    def json(self):
        assert self.code == 0, f"exit {self.code}: {self.stderr}"
        return json.loads(self.stdout)


def run_script(skill_dir: Path, script: str, *args: str, stdin: str | bytes = "", env=None, cwd=None,
               timeout: float = 60) -> ScriptRun:
    """`python scripts/x.py ARGS` with the skill folder as working directory (as ipyskills runs it)."""
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    proc = subprocess.run(
        [sys.executable, script, *args],
        input=data,
        capture_output=True,
        check=False,
        cwd=cwd or skill_dir,
        env=env,
        timeout=timeout,
    )
    return ScriptRun(proc)


@pytest.fixture
def data_processor():
    def run(script: str, *args: str, **kw) -> ScriptRun:
        return run_script(BUNDLED / "data-processor", f"scripts/{script}", *args, **kw)

    return run
