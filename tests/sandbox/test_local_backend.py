"""The local backend's contract: results, stdin, environment, the skill copy, artifacts, clean-up."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
import time

import pytest
from local_helpers import AS_ROOT, run

from ipyskills.errors import SandboxError
from ipyskills.sandbox import runner
from ipyskills.sandbox.local.backend import LocalBackend
from ipyskills.sandbox.local.run_files import collect_artifacts
from ipyskills.sandbox.local.run_uids import kill_processes_of
from ipyskills.sandbox.local.skill_copy import copy_skill


def test_backend_shape():
    backend = LocalBackend()
    assert backend.name == "local"
    assert backend.readiness() == (True, "")
    assert backend.ensure_ready() is None


def test_result_fields_for_a_plain_run(make_skill):
    skill = make_skill({"scripts/hello.py": "import sys\nprint('out', sys.argv[1:])\n"
                        "print('err', file=sys.stderr)\nsys.exit(3)\n"})
    result = run(skill, "scripts/hello.py", args=["a b", "--x"])
    assert result.backend == "local"
    assert result.exit_code == 3
    assert result.stdout == "out ['a b', '--x']\n"
    assert result.stderr == "err\n"
    assert not result.timed_out and not result.oom_killed and not result.truncated
    assert 0 < result.duration_ms < 10_000
    assert result.isolation.startswith("local: ") and " | NOT isolated: " in result.isolation
    assert result.artifacts == []


def test_runner_selects_the_local_backend_and_labels_the_result(make_skill):
    skill = make_skill({"scripts/ok.py": "print('fine')\n"})
    request = runner.RunRequest(skill_name="attack", skill_dir=skill, script="scripts/ok.py")
    result = runner.run(request, backend="local", guard=False)
    assert (result.backend, result.exit_code, result.stdout, result.skill) == ("local", 0, "fine\n", "attack")


def test_working_directory_is_the_workspace_and_the_script_is_called_by_its_path(make_skill):
    skill = make_skill({
        "scripts/read.py": "import os, sys\nprint(os.getcwd())\nprint(sys.argv[0])\n"
                           "here = os.path.dirname(os.path.dirname(__file__))\n"
                           "print(open(os.path.join(here, 'data/table.csv')).read(), end='')\n",
        "data/table.csv": "a,b\n1,2\n",
    })
    result = run(skill, "scripts/read.py")
    cwd, argv0, rest = result.stdout.split("\n", 2)
    assert result.exit_code == 0, result.stderr
    assert rest == "a,b\n1,2\n"
    assert os.path.basename(cwd) == "workspace" and cwd != str(skill)
    assert argv0 == os.path.join(os.path.dirname(cwd), "skill", "scripts", "read.py")
    assert not os.path.exists(cwd), "the run folder must be gone after the run"


def test_stdin_bytes_arrive_exactly(make_skill):
    payload = ("| col | value |\n|-----|-------|\n| é   | `x` |\n").encode() + bytes(range(256)) + b"\r\n\x00end"
    skill = make_skill({"scripts/echo.py": "import sys\nsys.stdout.buffer.write(sys.stdin.buffer.read().hex().encode())\n"})
    result = run(skill, "scripts/echo.py", stdin=payload)
    assert result.exit_code == 0, result.stderr
    assert bytes.fromhex(result.stdout) == payload


def test_text_stdin_is_sent_as_utf8(make_skill):
    skill = make_skill({"scripts/echo.py": "import sys\nsys.stdout.buffer.write(sys.stdin.buffer.read())\n"})
    result = run(skill, "scripts/echo.py", stdin="| ä | b |\n")
    assert result.stdout == "| ä | b |\n"


def test_large_stdin_to_a_script_that_never_reads_does_not_hang(make_skill):
    skill = make_skill({"scripts/ignore.py": "print('done')\n"})
    started = time.monotonic()
    result = run(skill, "scripts/ignore.py", stdin=b"x" * (8 * 1024 * 1024), timeout=20)
    assert time.monotonic() - started < 5
    assert (result.exit_code, result.stdout, result.timed_out) == (0, "done\n", False)


def test_no_stdin_means_immediate_eof(make_skill):
    skill = make_skill({"scripts/cat.py": "import sys\nprint(repr(sys.stdin.read()))\n"})
    result = run(skill, "scripts/cat.py", timeout=5)
    assert (result.stdout, result.timed_out) == ("''\n", False)


def test_environment_is_exactly_the_documented_set_plus_request_env(make_skill):
    skill = make_skill({"scripts/env.py": "import json, os\nprint(json.dumps(dict(os.environ)))\n"})
    result = run(skill, "scripts/env.py", env={"API_MODE": "test"})
    import json

    env = json.loads(result.stdout)
    assert set(env) == {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "PYTHONDONTWRITEBYTECODE",
                        "MALLOC_ARENA_MAX", "IPYSKILLS_OUTPUT", "API_MODE"}
    assert env["API_MODE"] == "test" and env["LC_ALL"] == "C.UTF-8" and env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PATH"].endswith("/usr/local/bin:/usr/bin:/bin")
    for key in ("HOME", "TMPDIR", "IPYSKILLS_OUTPUT"):
        assert "ipyskills-local-" in env[key] and not os.path.exists(env[key])


def test_home_and_tmpdir_are_writable_private_folders(make_skill):
    skill = make_skill({"scripts/w.py": textwrap.dedent("""
        import os, tempfile
        for d in (os.environ["HOME"], tempfile.gettempdir()):
            with open(os.path.join(d, "f"), "w") as fh:
                fh.write("x")
            print(oct(os.stat(d).st_mode & 0o777), os.stat(d).st_uid == os.getuid())
    """)})
    result = run(skill, "scripts/w.py")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "0o700 True\n0o700 True\n"


def test_bash_scripts_and_shebangs_run(make_skill):
    skill = make_skill({
        "scripts/hi.sh": "echo \"bash says $1\"\n",
        "scripts/tool": "#!/usr/bin/env python3\nimport sys\nprint('py', sys.argv[1])\n",
    })
    assert run(skill, "scripts/hi.sh", args=["x"]).stdout == "bash says x\n"
    assert run(skill, "scripts/tool", args=["y"]).stdout == "py y\n"


@pytest.mark.skipif(shutil.which("ruby", path="/usr/local/bin:/usr/bin:/bin") is not None,
                    reason="ruby is installed here")
def test_missing_interpreter_is_a_clear_error(make_skill, run_dirs):
    skill = make_skill({"scripts/x.rb": "puts 1\n"})
    with pytest.raises(SandboxError, match="'ruby' is not installed"):
        run(skill, "scripts/x.rb")
    assert run_dirs.made and run_dirs.left_behind() == []


def test_python3_is_the_hosts_interpreter_when_reachable(make_skill):
    skill = make_skill({"scripts/which.py": "import sys\nprint(sys.executable)\n"})
    result = run(skill, "scripts/which.py")
    if "python: " in result.isolation:  # the run's uid cannot reach it: the fallback is named, honestly
        assert result.stdout.strip() == shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
        assert f"cannot run {sys.executable}" in result.isolation
    else:
        assert result.stdout.strip() == sys.executable


@pytest.mark.skipif(shutil.which("node", path="/usr/local/bin:/usr/bin:/bin") is None, reason="node is not installed")
def test_node_under_a_small_address_space_is_reported_as_out_of_memory(make_skill):
    skill = make_skill({"scripts/hi.js": "console.log('node ok')\n"})
    small = run(skill, "scripts/hi.js", memory="256m")
    assert small.oom_killed and small.exit_code not in (0, None), small.stderr[-300:]
    roomy = run(skill, "scripts/hi.js", memory="2g")
    assert (roomy.exit_code, roomy.stdout, roomy.oom_killed) == (0, "node ok\n", False)


def test_exit_by_signal_reports_128_plus_signal(make_skill):
    skill = make_skill({"scripts/die.py": "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n"})
    result = run(skill, "scripts/die.py")
    assert result.exit_code == 128 + 15 and not result.timed_out


@pytest.mark.parametrize("code", [152, 137])
def test_exit_code_that_looks_like_a_signal_is_an_exit_code(make_skill, code):
    """152 = 128 + SIGXCPU: only a script killed by SIGXCPU is a timeout, not one that exits with 152."""
    skill = make_skill({"scripts/exit.py": f"import sys\nsys.exit({code})\n"})
    result = run(skill, "scripts/exit.py")
    assert (result.exit_code, result.timed_out, result.oom_killed) == (code, False, False)


# -- the copy of the skill ---------------------------------------------------------------------------------

def test_copy_is_read_only_and_skips_caches(make_skill, tmp_path):
    skill = make_skill({"scripts/a.py": "", ".git/config": "secret", "__pycache__/a.pyc": b"\0",
                        ".venv/bin/python": "", "docs/ok.md": "ok"})
    report = copy_skill(skill, tmp_path / "copy")
    copied = sorted(str(p.relative_to(tmp_path / "copy")) for p in (tmp_path / "copy").rglob("*") if p.is_file())
    assert copied == ["SKILL.md", "docs/ok.md", "scripts/a.py"]
    assert report.files == 3
    for p in (tmp_path / "copy").rglob("*"):
        assert p.stat().st_mode & 0o222 == 0, p


def test_copy_keeps_in_skill_links_as_files_and_drops_escaping_ones(make_skill, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("host secret")
    skill = make_skill({"data/real.txt": "inside"})
    os.symlink("real.txt", skill / "data" / "alias.txt")
    os.symlink(str(outside), skill / "data" / "escape.txt")
    os.symlink(str(tmp_path), skill / "escape_dir")
    os.symlink("missing", skill / "dangling")
    os.symlink("data", skill / "data_alias")
    os.symlink("..", skill / "data" / "loop")
    report = copy_skill(skill, tmp_path / "copy")
    copy = tmp_path / "copy"
    assert (copy / "data" / "alias.txt").read_text() == "inside" and not (copy / "data" / "alias.txt").is_symlink()
    assert (copy / "data_alias" / "real.txt").read_text() == "inside"
    assert sorted(report.dropped) == sorted(["dangling", "data/escape.txt", "escape_dir", "data/loop",
                                             "data_alias/escape.txt", "data_alias/loop"])
    assert not any(p.is_symlink() for p in copy.rglob("*"))


def test_copy_bounds_are_clear_errors(make_skill, tmp_path):
    skill = make_skill({f"data/{i}.txt": "x" * 100 for i in range(5)})
    with pytest.raises(SandboxError, match="more than 3 files"):
        copy_skill(skill, tmp_path / "a", max_files=3)
    with pytest.raises(SandboxError, match="too much to copy"):
        copy_skill(skill, tmp_path / "b", max_bytes=250)


def test_a_script_that_is_an_escaping_link_is_refused(make_skill, tmp_path):
    outside = tmp_path / "evil.py"
    outside.write_text("print('ran outside code')\n")
    skill = make_skill({})
    (skill / "scripts").mkdir()
    os.symlink(str(outside), skill / "scripts" / "evil.py")
    with pytest.raises(SandboxError, match="not a regular file inside the skill"):
        run(skill, "scripts/evil.py")


def test_the_original_skill_is_not_modified_by_a_run(make_skill):
    skill = make_skill({"scripts/a.py": "print(1)\n", "data/x.txt": "x"})
    before = {p: (p.stat().st_mode, p.stat().st_mtime_ns) for p in skill.rglob("*")}
    assert run(skill, "scripts/a.py").exit_code == 0
    assert {p: (p.stat().st_mode, p.stat().st_mtime_ns) for p in skill.rglob("*")} == before


# -- artifacts ---------------------------------------------------------------------------------------------

def test_artifacts_come_back_with_caps(make_skill):
    skill = make_skill({"scripts/out.py": textwrap.dedent("""
        import os
        out = os.environ["IPYSKILLS_OUTPUT"]
        os.makedirs(os.path.join(out, "plots"))
        open(os.path.join(out, "a.txt"), "w").write("hello")
        open(os.path.join(out, "plots", "p.png"), "wb").write(b"\\x89PNG" + b"0" * 96)
        open(os.path.join(out, "big.bin"), "wb").write(b"B" * 5000)
    """)})
    result = run(skill, "scripts/out.py", artifact_cap=1000)
    assert result.exit_code == 0, result.stderr
    got = {a.path: a for a in result.artifacts}
    assert set(got) == {"a.txt", "big.bin", "plots/p.png"}
    assert got["a.txt"].data == b"hello" and got["a.txt"].mime == "text/plain"
    assert got["plots/p.png"].data.startswith(b"\x89PNG") and got["plots/p.png"].size == 100
    assert got["big.bin"].data is None and got["big.bin"].size == 5000


def test_artifact_file_count_is_capped(tmp_path):
    for i in range(7):
        (tmp_path / f"f{i}.txt").write_text(str(i))
    omitted = {}
    found = collect_artifacts(tmp_path, cap=2, max_files=4, omitted=omitted)
    assert [a.path for a in found] == ["f0.txt", "f1.txt", "f2.txt", "f3.txt"]
    assert [a.data for a in found] == [b"0", b"1", None, None]  # the byte cap: listed, not returned
    assert omitted == {"more_files": 3, "more_bytes": 3, "over_cap_files": 2, "over_cap_bytes": 2}


def test_artifact_links_and_fifos_are_never_followed(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("host secret")
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(str(secret), out / "link.txt")
    os.symlink(str(tmp_path), out / "dirlink")
    os.mkfifo(out / "pipe")
    (out / "real.txt").write_text("ok")
    found = collect_artifacts(out, cap=10_000, max_files=10)
    assert [(a.path, a.data) for a in found] == [("real.txt", b"ok")]


# -- clean-up ----------------------------------------------------------------------------------------------

def test_no_run_folder_is_left_behind_on_success_error_and_timeout(make_skill, run_dirs):
    skill = make_skill({
        "scripts/ok.py": "print(1)\n",
        "scripts/fail.py": "raise SystemExit('no')\n",
        "scripts/hang.py": "import time\ntime.sleep(60)\n",
        "scripts/lock.py": "import os\nos.chmod(os.environ['IPYSKILLS_OUTPUT'], 0)\nos.chmod(os.environ['HOME'], 0)\n",
    })
    run(skill, "scripts/ok.py")
    run(skill, "scripts/fail.py")
    run(skill, "scripts/lock.py")
    assert run(skill, "scripts/hang.py", timeout=0.5).timed_out
    assert run_dirs.made and run_dirs.left_behind() == []


@pytest.mark.skipif(not AS_ROOT, reason="only root switches uids")
def test_each_run_gets_a_uid_of_its_own(make_skill):
    skill = make_skill({"scripts/id.py": "import os\nprint(os.getuid(), os.getgid(), os.getgroups())\n"})
    first, second = run(skill, "scripts/id.py"), run(skill, "scripts/id.py")
    uids = []
    for result in (first, second):
        uid, gid, groups = result.stdout.split(" ", 2)
        assert uid == gid and groups == "[]\n" and int(uid) >= 1_000_000
        assert f"uid {uid} (unprivileged, this run's own)" in result.isolation
        uids.append(uid)
    assert uids[0] != uids[1]


@pytest.mark.skipif(not AS_ROOT, reason="needs root to start a process under another uid")
def test_kill_processes_of_stops_everything_of_that_uid():
    import subprocess

    uid = 1_900_999_999
    sleepers = [subprocess.Popen(["sleep", "60"], user=uid, group=uid, extra_groups=[], start_new_session=True)
                for _ in range(3)]
    try:
        kill_processes_of(uid)
        for proc in sleepers:
            assert proc.wait(timeout=5) == -9
    finally:
        for proc in sleepers:
            proc.kill()


def test_threads_do_not_spend_the_address_space_limit_on_malloc_arenas(make_skill):
    """Eight threads allocating at once: glibc would reserve 64 MiB of address space for each extra arena
    (517 MiB in all, measured outside the sandbox), so numpy's import, say, fails now and then under the
    256 MiB limit; with one arena the footprint stays that of the data."""
    skill = make_skill({"scripts/threads.py": textwrap.dedent("""
        import threading
        def churn():
            for _ in range(20000):
                [bytes(100) for _ in range(50)]
        threads = [threading.Thread(target=churn) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(next(int(line.split()[1]) // 1024 for line in open("/proc/self/status") if line.startswith("VmPeak")))
    """)})
    result = run(skill, "scripts/threads.py", memory="256m")
    assert result.exit_code == 0, result.stderr
    assert int(result.stdout) < 160, f"VmPeak {result.stdout.strip()} MiB"
