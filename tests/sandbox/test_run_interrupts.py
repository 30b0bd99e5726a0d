"""Ctrl-C pressed twice around a plain `reg.run(...)` (no notebook, no CLI): the second SIGINT, arriving
while the first one's clean-up runs, does not cut it short. The caller gets one RunInterrupted carrying
the output so far, no KeyboardInterrupt from inside the backend, and nothing of the run is left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

CALLER = textwrap.dedent("""
    import sys
    from ipyskills import SkillRegistry
    from ipyskills.errors import RunInterrupted
    from ipyskills.settings import Settings

    reg = SkillRegistry([sys.argv[1]], settings=Settings(default_roots=False, bundled_skills=False,
                                                         backend=sys.argv[2], pool_size=0))
    try:
        reg.run("ticker", "scripts/ticks.py", on_output=lambda s, t: print(t, end="", flush=True))
    except RunInterrupted as stop:
        print("CAUGHT", repr(stop.result.stdout.splitlines()[:2]), flush=True)
    else:
        print("NOT INTERRUPTED", flush=True)
""")
TICKS = "import time\nfor i in range(600):\n    print(f'tick {i}', flush=True); time.sleep(0.1)\n"


@pytest.fixture
def ticker(tmp_path):
    skill = tmp_path / "ticker"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: ticker\ndescription: Ticks. Use to try interrupts.\n---\n")
    (skill / "scripts" / "ticks.py").write_text(TICKS)
    os.chmod(tmp_path, 0o755)
    return tmp_path


def _interrupt_twice(root, backend: str) -> tuple[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IPYSKILLS_")}
    proc = subprocess.Popen([sys.executable, "-c", CALLER, str(root), backend], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().startswith("tick 0"), proc.stderr.read()
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.02)  # the second press lands in the first one's clean-up
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out, err


def test_a_second_ctrl_c_in_plain_python_changes_nothing_local(ticker):
    out, err = _interrupt_twice(ticker, "local")
    assert "CAUGHT ['tick 0', 'tick 1']" in out, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


@pytest.mark.docker
def test_a_second_ctrl_c_in_plain_python_changes_nothing_docker(ticker, docker_backend):
    out, err = _interrupt_twice(ticker, "docker")
    assert "CAUGHT ['tick 0', 'tick 1']" in out, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
