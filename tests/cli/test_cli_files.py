"""`ipyskills run --input/--save`, output written through as it arrives, and Ctrl-C (exit 130, one line)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

TICKS = "import sys, time\nfor i in range(int(sys.argv[1])):\n    print('tick', i, flush=True); time.sleep(0.2)\n"
REPORT = ("import sys\nsrc = sys.argv[1]\nopen(src + '.out.txt', 'w').write(open(src).read().upper())\n"
          "print('wrote', src + '.out.txt')\n")


@pytest.fixture
def env(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    e = {k: v for k, v in os.environ.items() if not k.startswith("IPYSKILLS_")}
    e.update(HOME=str(home), IPYSKILLS_BUNDLED_SKILLS="0", PYTHONIOENCODING="utf-8", PYTHONUNBUFFERED="1")
    s = tmp_path / "skills" / "files-skill"
    (s / "scripts").mkdir(parents=True)
    (s / "SKILL.md").write_text("---\nname: files-skill\ndescription: Files in and out.\n---\nRun it.\n")
    (s / "scripts" / "ticks.py").write_text(TICKS)
    (s / "scripts" / "report.py").write_text(REPORT)
    (tmp_path / "in.txt").write_text("hello")
    return e, tmp_path


def cmd(tmp, *args):
    return [sys.executable, "-m", "ipyskills", "run", "--dir", str(tmp / "skills"), "--backend", "local",
            "--no-guard", "--no-stdin", *args]


def test_input_and_save(env):
    e, tmp = env
    done = subprocess.run(cmd(tmp, "--input", "in.txt", "--save", "results", "files-skill", "scripts/report.py",
                              "in.txt"), cwd=tmp, env=e, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "wrote in.txt.out.txt\n"
    assert (tmp / "results" / "in.txt.out.txt").read_text() == "HELLO"
    assert "saved in.txt.out.txt -> " in done.stderr
    again = subprocess.run(cmd(tmp, "--input", "in.txt", "--save", "results", "files-skill", "scripts/report.py",
                               "in.txt"), cwd=tmp, env=e, capture_output=True, text=True, timeout=90, check=False)
    assert "existed" in again.stderr and (tmp / "results" / "in.txt.out (1).txt").is_file()


def test_missing_input_is_a_reported_failure(env):
    e, tmp = env
    done = subprocess.run(cmd(tmp, "--input", "nope.txt", "files-skill", "scripts/report.py", "nope.txt"),
                          cwd=tmp, env=e, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 1 and "does not exist" in done.stderr and "Traceback" not in done.stderr


def test_output_is_written_through_and_ctrl_c_exits_130(env):
    e, tmp = env
    proc = subprocess.Popen(cmd(tmp, "files-skill", "scripts/ticks.py", "200"), cwd=tmp, env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()  # arrives while the script is still running
    assert first == "tick 0\n" and proc.poll() is None
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "tick 1\n" in out
    assert err.strip().splitlines()[-1].startswith("ipyskills: interrupted after ")
    assert err.strip().endswith("s; sandbox removed") and "Traceback" not in err


@pytest.mark.parametrize("backend", [pytest.param("docker", marks=pytest.mark.docker), "local"])
def test_ctrl_c_pressed_again_during_the_clean_up_changes_nothing(env, backend):
    if backend == "docker":
        from ipyskills.sandbox.docker.backend import DockerBackend

        ready, reason = DockerBackend().readiness()
        if not ready:
            if os.environ.get("IPYSKILLS_REQUIRE_DOCKER") == "1":
                pytest.fail(f"Docker is required here but not ready: {reason}")
            pytest.skip(reason)
    e, tmp = env
    argv = cmd(tmp, "files-skill", "scripts/ticks.py", "200")
    argv[argv.index("local")] = backend
    proc = subprocess.Popen(argv, cwd=tmp, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout.readline() == "tick 0\n"
    for gap in (0, 0.02, 0.05, 0.1, 0.2):  # as an impatient user presses it, to the whole process group
        time.sleep(gap)
        os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    # 130, or killed by a Ctrl-C that came after the run was over and ipyskills was exiting anyway.
    assert proc.returncode in (130, -signal.SIGINT), (proc.returncode, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines()[-1].startswith("ipyskills: interrupted after ")
    assert err.strip().endswith("s; sandbox removed")
    if backend == "docker":
        left = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=ipyskills.pid={proc.pid}"],
                              capture_output=True, text=True, timeout=30, check=False)
        assert left.stdout.split() == [], left.stdout
