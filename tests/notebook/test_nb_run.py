"""%%skill_run on the local backend: stdin, args, -o, timeout, failures, artifacts, Ctrl-C."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from ipyskills.notebook.magics import MagicError


def test_cell_body_is_stdin_and_quoting_works(ip):
    result = ip.run_cell_magic("skill_run", "--backend local hello scripts/hi.py Ada 'Grace Hopper'",
                               "line one\nline two")
    assert result.ok and result.backend == "local"
    assert result.stdout.strip() == "hi ['Ada', 'Grace Hopper'] 'line one\\nline two'"
    text = ip.display_formatter.format(result)[0]["text/plain"]
    assert "backend=local" in text and "exit=0" in text


def test_options_after_the_script_go_to_the_script(ip):
    result = ip.run_line_magic("skill_run", "--backend local hello scripts/hi.py --timeout 3 -o x")
    assert "['--timeout', '3', '-o', 'x']" in result.stdout
    assert "x" not in ip.user_ns


def test_output_variable(ip):
    returned = ip.run_line_magic("skill_run", "-o res --backend local hello scripts/hi.py")
    assert ip.user_ns["res"] is returned


def test_bad_output_variable_is_usage_error(ip):
    with pytest.raises(UsageError, match="variable name"):
        ip.run_line_magic("skill_run", "-o 1x --backend local hello scripts/hi.py")


def test_failure_shows_exit_code_and_stderr(ip):
    result = ip.run_line_magic("skill_run", "--backend local hello scripts/fail.py")
    assert result.exit_code == 3 and not result.ok
    bundle = ip.display_formatter.format(result)[0]
    assert "exit=3" in bundle["text/plain"] and "bad input" in bundle["text/html"]


def test_timeout_is_honoured(ip):
    start = time.monotonic()
    result = ip.run_line_magic("skill_run", "--backend local --timeout 1 hello scripts/sleep.py 30")
    assert time.monotonic() - start < 15
    assert result.timed_out
    assert "TIMED OUT" in ip.display_formatter.format(result)[0]["text/plain"]


def test_config_timeout_applies_to_runs(ip):
    ip.run_line_magic("config", "IPySkills.timeout = 1.0")
    ip.run_line_magic("config", "IPySkills.sandbox_backend = 'local'")
    result = ip.run_line_magic("skill_run", "hello scripts/sleep.py 30")
    assert result.timed_out and result.backend == "local"


def test_artifacts_render(ip):
    result = ip.run_line_magic("skill_run", "--backend local hello scripts/plot.py")
    assert result.ok, result.stderr
    html = ip.display_formatter.format(result)[0]["text/html"]
    assert 'src="data:image/png;base64,' in html
    assert "<td>1</td><td>2</td>" in html
    assert "notes.bin" in html


@pytest.mark.parametrize("line, message", [
    ("--backend local nope scripts/hi.py", "no skill named 'nope'"),
    ("--backend local hello scripts/missing.py", "has no file"),
    ("--backend local hello ../outside.py", "refused"),
    ("--backend local --memory lots hello scripts/hi.py", "memory"),
])
def test_run_errors_are_one_line(ip, cell, line, message):
    with pytest.raises(MagicError, match=message):
        ip.run_line_magic("skill_run", line)
    _result, out = cell(f"%skill_run {line}")
    assert message in out and "Traceback" not in out


def test_run_misuse(ip):
    with pytest.raises(UsageError, match="invalid choice"):
        ip.run_line_magic("skill_run", "--backend vm hello scripts/hi.py")
    with pytest.raises(UsageError, match="required"):
        ip.run_line_magic("skill_run", "hello")


@pytest.mark.parametrize(("line", "missing"), [("hello", "SCRIPT"), ("--backend local", "NAME, SCRIPT")])
def test_run_usage_error_names_only_what_is_missing(ip, line, missing):
    with pytest.raises(UsageError) as caught:
        ip.run_line_magic("skill_run", line)
    message = str(caught.value)
    assert f"required: {missing};" in message
    assert "ARGS," not in message and "SCRIPT, ARGS" not in message
    assert "%skill_run [options] NAME SCRIPT [ARGS...]" in message


def _processes_with(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_ctrl_c_stops_the_run_and_leaves_no_process(ip, capsys):
    """Ctrl-C ends the run with one line (no traceback, no KeyboardInterrupt out of the magic)."""
    token = f"sleeper-{uuid.uuid4().hex}"
    timer = threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    try:
        assert ip.run_line_magic("skill_run", f"--backend local --timeout 60 -o partial hello scripts/sleep.py 60 "
                                              f"{token}") is None
    finally:
        timer.cancel()
    assert time.monotonic() - start < 20
    err = capsys.readouterr().err
    assert "interrupted after " in err and "; sandbox removed" in err and "Traceback" not in err
    assert ip.user_ns["partial"].interrupted
    deadline = time.monotonic() + 5
    while _processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_with(token) == []


def test_guard_block_is_one_line_and_no_guard_runs(ip, workdir, cell):
    script = workdir / "skills" / "hello" / "scripts" / "evil.py"
    script.write_text("import sys\nprint(eval(sys.argv[1]))\n")
    with pytest.raises(MagicError, match="py-eval"):
        ip.run_line_magic("skill_run", "--backend local hello scripts/evil.py 1+1")
    _, out = cell("%skill_run --backend local hello scripts/evil.py 1+1")
    assert "GuardBlocked" in out and "Traceback" not in out
    result = ip.run_line_magic("skill_run", "--backend local --no-guard hello scripts/evil.py 1+1")
    assert result.stdout.strip() == "2"


def test_help_before_the_skill_is_the_magics_after_the_script_the_scripts(ip, capsys):
    assert ip.run_line_magic("skill_run", "--help") is None
    assert "--stdin VAR" in capsys.readouterr().out
    result = ip.run_line_magic("skill_run", "--backend local hello scripts/hi.py --help -h")
    assert "['--help', '-h']" in result.stdout


def test_line_expands_notebook_variables_and_the_cell_body_stays_literal(ip):
    ip.user_ns.update(who="Ada", skill="hello")
    result = ip.run_cell_magic("skill_run", "--backend local {skill} scripts/hi.py $who", '{"who": 1}')
    assert result.stdout.strip() == """hi ['Ada'] '{"who": 1}'"""


def test_stdin_from_a_variable(ip):
    ip.user_ns.update(text="plain text", payload={"items": [3, 1, 2]}, raw=b"\x00bytes")
    out = ip.run_line_magic("skill_run", "--backend local --stdin text hello scripts/hi.py")
    assert out.stdout.strip() == "hi [] 'plain text'"
    out = ip.run_line_magic("skill_run", "--backend local --stdin payload hello scripts/hi.py")
    assert out.stdout.strip() == """hi [] '{"items": [3, 1, 2]}'"""
    out = ip.run_line_magic("skill_run", "--backend local --stdin raw hello scripts/hi.py")
    assert out.stdout.strip() == "hi [] '\\x00bytes'"
    with pytest.raises(UsageError, match="no variable named 'nope'"):
        ip.run_line_magic("skill_run", "--backend local --stdin nope hello scripts/hi.py")
    with pytest.raises(UsageError, match="use one of them"):
        ip.run_cell_magic("skill_run", "--backend local --stdin text hello scripts/hi.py", "body")
