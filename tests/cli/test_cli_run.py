"""`ipyskills run`, through a real subprocess on the local backend (the Docker path is tested elsewhere)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ipyskills.cli.run_cmd import exit_code_for
from ipyskills.sandbox.result import ExecuteResult

SCRIPT = """\
import sys
print("argv", sys.argv[1:])
data = sys.stdin.read()
print("stdin", repr(data))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0)
"""


@pytest.fixture
def env(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    e = {k: v for k, v in os.environ.items() if not k.startswith("IPYSKILLS_")}
    e.update(HOME=str(home), IPYSKILLS_BUNDLED_SKILLS="0", PYTHONIOENCODING="utf-8")
    root = tmp_path / "skills"
    s = root / "runner-skill"
    (s / "scripts").mkdir(parents=True)
    (s / "SKILL.md").write_text("---\nname: runner-skill\ndescription: Runs scripts.\n---\nRun it.\n")
    (s / "scripts" / "echo.py").write_text(SCRIPT)
    (s / "scripts" / "sleep.py").write_text("import time\ntime.sleep(30)\n")
    (tmp_path / "outside.py").write_text("print('OUTSIDE RAN')\n")
    return e, root, tmp_path


def run_cli(env, *args, input=""):
    e, root, tmp = env
    cmd = [sys.executable, "-m", "ipyskills", "run", "--dir", str(root), "--backend", "local", "--no-guard",
           *map(str, args)]
    return subprocess.run(cmd, cwd=tmp, env=e, input=input, capture_output=True, text=True, timeout=90,
                          check=False)


def test_output_exit_code_and_stdin_pass_through(env):
    p = run_cli(env, "runner-skill", "scripts/echo.py", "7", input="piped data")
    assert p.returncode == 7
    assert "argv ['7']" in p.stdout and "stdin 'piped data'" in p.stdout
    assert "to stderr" in p.stderr


def test_dash_args_reach_the_script(env):
    p = run_cli(env, "runner-skill", "scripts/echo.py", "-v", "--timeout", "5", "--json", "--", "x")
    assert p.returncode == 0, p.stderr
    assert "argv ['-v', '--timeout', '5', '--json', '--', 'x']" in p.stdout


def test_leading_double_dash_is_dropped(env):
    p = run_cli(env, "runner-skill", "scripts/echo.py", "--", "--help")
    assert "argv ['--help']" in p.stdout


def test_no_stdin(env):
    p = run_cli(env, "--no-stdin", "runner-skill", "scripts/echo.py", input="ignored")
    assert "stdin ''" in p.stdout


def test_json(env):
    p = run_cli(env, "--json", "runner-skill", "scripts/echo.py", "3", input="in")
    assert p.returncode == 3
    data = json.loads(p.stdout)
    assert data["exit_code"] == 3 and data["backend"] == "local"
    assert data["skill"] == "runner-skill" and data["script"] == "scripts/echo.py" and data["args"] == ["3"]
    assert "stdin 'in'" in data["stdout"] and "to stderr" in data["stderr"]


def test_timeout_exits_124(env):
    p = run_cli(env, "--timeout", "1", "runner-skill", "scripts/sleep.py")
    assert p.returncode == 124
    assert "timed out" in p.stderr


@pytest.mark.parametrize("script,reason", [
    ("../outside.py", "refused"),
    ("scripts/missing.py", "no file 'scripts/missing.py'"),
])
def test_bad_script_paths(env, script, reason):
    p = run_cli(env, "runner-skill", script)
    assert p.returncode == 1 and reason in p.stderr and "OUTSIDE RAN" not in p.stdout
    assert "Traceback" not in p.stderr


def test_escaping_symlinked_script_is_not_run(env):
    _e, root, tmp = env
    os.symlink(tmp / "outside.py", root / "runner-skill" / "scripts" / "link.py")
    p = run_cli(env, "runner-skill", "scripts/link.py")
    assert p.returncode == 1 and "escapes skill directory" in p.stderr and "OUTSIDE RAN" not in p.stdout


def test_unknown_skill_and_bad_limits(env):
    p = run_cli(env, "no-such", "scripts/echo.py")
    assert p.returncode == 1 and "no skill named 'no-such'" in p.stderr
    p = run_cli(env, "--memory", "lots", "runner-skill", "scripts/echo.py")
    assert p.returncode == 1 and "memory" in p.stderr and "Traceback" not in p.stderr


def test_guard_runs_by_default(env):
    e, root, tmp = env
    # Blocked by py-shell (any os.system call) yet harmless if the guard ever let it run: it only prints a
    # canary, which the test would then see.
    (root / "runner-skill" / "scripts" / "bad.py").write_text("import os\nos.system('echo guard-canary-ran')\n")
    cmd = [sys.executable, "-m", "ipyskills", "run", "--dir", str(root), "--backend", "local",
           "runner-skill", "scripts/bad.py"]
    p = subprocess.run(cmd, cwd=tmp, env=e, capture_output=True, text=True, timeout=90, check=False)
    assert p.returncode == 1 and "guard blocked scripts/bad.py" in p.stderr
    assert "scripts/bad.py:2: [block] py-shell" in p.stderr
    assert "guard-canary-ran" not in p.stdout


@pytest.mark.parametrize("fields,code", [
    ({"exit_code": 0}, 0),
    ({"exit_code": 5}, 5),
    ({"exit_code": None, "timed_out": True}, 124),
    ({"exit_code": 137, "oom_killed": True}, 137),
    ({"exit_code": -9}, 137),
    ({"exit_code": -15}, 143),
    ({"exit_code": None}, 1),
])
def test_exit_code_mapping(fields, code):
    assert exit_code_for(ExecuteResult(stdout="", stderr="", duration_ms=1.0, **fields)) == code


def test_usage_error_exits_2(env):
    e, _root, tmp = env
    p = subprocess.run([sys.executable, "-m", "ipyskills", "run", "only-name"], cwd=tmp, env=e,
                       capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 2


@pytest.mark.parametrize("flag,value", [("--timeout", "nan"), ("--timeout", "inf"), ("--memory", "nan"),
                                        ("--memory", "inf")])
def test_non_finite_limits_are_refused_with_a_clear_error(env, flag, value):
    p = run_cli(env, flag, value, "runner-skill", "scripts/echo.py")
    assert p.returncode == 1 and flag[2:] in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("field", ["timeout", "cpus", "memory", "tmp_size"])
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_limits_refuse_non_finite_numbers(field, value):
    from ipyskills.errors import ConfigError
    from ipyskills.sandbox.policy import Limits

    with pytest.raises(ConfigError, match=field):
        Limits(**{field: value})


def test_output_file_with_a_non_utf8_name_is_reported_not_a_crash(env):
    _e, root, _tmp = env
    (root / "runner-skill" / "scripts" / "odd.py").write_text(
        "import os\nopen(os.environb[b'IPYSKILLS_OUTPUT'] + b'/r\\xff.txt', 'wb').write(b'hi')\n")
    p = run_cli(env, "--json", "runner-skill", "scripts/odd.py")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    [artifact] = json.loads(p.stdout)["artifacts"]
    assert artifact["path"] == "r\ufffd.txt" and artifact["size"] == 2 and artifact["returned"]
