"""The suite's own safety nets (tests/conftest.py), run in an inner pytest on a copy of it: a test that
loops fails with pytest-timeout's message, a test that leaves a process running fails and the process is
ended, and each folder gets the time limit it should."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]  # the suite's folder: its conftest.py is what is tested

INNER = {
    "core/test_inner.py": """
        import subprocess, sys, time
        import pytest

        @pytest.mark.timeout(2)
        def test_loops():
            while True:
                time.sleep(0.01)

        def test_leaves_a_process(tmp_path):
            proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            (tmp_path.parent / "leftover.pid").write_text(str(proc.pid))

        def test_waits_for_its_process():
            subprocess.run([sys.executable, "-c", "pass"], check=True)

        def test_limit_here(request):
            assert request.node.get_closest_marker("timeout").args == (60,)

        @pytest.mark.slow
        def test_limit_slow(request):
            assert request.node.get_closest_marker("timeout").args == (600,)
        """,
    "skills/test_elsewhere.py": """
        def test_default_limit(request):
            assert request.node.get_closest_marker("timeout") is None
            assert float(request.config.getini("timeout")) == 300  # pyproject.toml's default applies
        """,
}


def test_hang_and_leftover_process_fail_with_a_message(tmp_path):
    inner = tmp_path / "inner"
    inner.mkdir()
    shutil.copy(TESTS / "conftest.py", inner / "conftest.py")
    # The project's own pytest settings (the timeout, the markers), as pyproject.toml has them.
    settings = (TESTS.parent / "pyproject.toml").read_text().split("[tool.pytest.ini_options]\n", 1)[1]
    (inner / "pyproject.toml").write_text("[tool.pytest.ini_options]\n" + settings.split("\n[", 1)[0])
    for rel, source in INNER.items():
        (inner / rel).parent.mkdir(exist_ok=True)
        (inner / rel).write_text(textwrap.dedent(source))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "IPYSKILLS_"))}
    env["DOCKER_HOST"] = "unix:///nonexistent/docker.sock"  # the container check has no engine to ask
    env["COLUMNS"] = "400"  # whole summary lines
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE",
                           f"--basetemp={tmp_path / 'base'}", str(inner)],
                          cwd=inner, env=env, capture_output=True, text=True, timeout=50, check=False)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "1 failed, 5 passed, 1 error" in out, out
    assert "FAILED core/test_inner.py::test_loops - Failed: Timeout (>2.0s) from pytest-timeout" in out
    assert "ERROR core/test_inner.py::test_leaves_a_process - AssertionError: processes the test started " \
           "are still running (now killed)" in out
    leftover = int((tmp_path / "base" / "leftover.pid").read_text())
    assert not Path(f"/proc/{leftover}").exists() or "Z" in Path(f"/proc/{leftover}/stat").read_text().split()[2]
