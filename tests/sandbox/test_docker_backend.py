"""The Docker backend's contract: results, limits, readiness and cleanup, against the real engine."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

import pytest

from ipyskills.errors import SandboxError
from ipyskills.sandbox.docker.backend import DockerBackend, tar_skill
from ipyskills.sandbox.docker.cleanup import LABEL, LABEL_HOST, LABEL_PID, cleanup
from ipyskills.sandbox.docker.client import engine_endpoint
from ipyskills.sandbox.request import RunRequest

docker = pytest.mark.docker


@docker
@pytest.mark.parametrize("transfer", ["mount", "copy"])
def test_exit_code_streams_and_duration(run_in_docker, transfer):
    script = """
import sys, time
time.sleep(0.5)
sys.stdout.write("out-1\\n")
sys.stderr.write("err-1\\n")
print(sys.argv[1:])
sys.exit(7)
"""
    result = run_in_docker({"scripts/x.py": script}, "scripts/x.py", args=["a b", "--c"], transfer=transfer)
    assert result.exit_code == 7 and not result.ok
    assert result.stdout == "out-1\n['a b', '--c']\n"
    assert result.stderr == "err-1\n"
    assert 500 <= result.duration_ms < 2000
    assert not (result.timed_out or result.oom_killed or result.truncated)
    assert result.backend == "docker"
    assert result.isolation.startswith("docker: uid 1000, no capabilities, no-new-privileges, read-only root, "
                                       "network none, 256 MiB (no swap), 128 pids, 1 CPU")


@docker
def test_working_directory_is_the_workspace_and_the_skill_is_read_by_its_path(run_in_docker):
    """The script is called by its path in the skill (as agent clients do) from a writable workspace."""
    files = {"scripts/read.py": "import os, sys\nhere = os.path.dirname(os.path.dirname(__file__))\n"
                                "print(os.getcwd(), sys.argv[0], open(os.path.join(here, 'data/in.txt')).read())\n",
             "data/in.txt": "payload"}
    for transfer in ("mount", "copy"):
        result = run_in_docker(files, "scripts/read.py", transfer=transfer)
        assert result.stdout == "/work /skill/scripts/read.py payload\n", (transfer, result.stderr)


@docker
def test_shell_scripts_and_exit_by_signal(run_in_docker):
    result = run_in_docker({"x.sh": "#!/bin/bash\necho \"$HOME $PWD\"\nkill -TERM $$\n"}, "x.sh")
    assert result.stdout == "/tmp /work\n"
    assert result.exit_code == 128 + 15 and not result.oom_killed


@docker
def test_exit_137_from_the_script_itself_is_not_called_oom(run_in_docker):
    result = run_in_docker({"x.py": "import sys\nsys.exit(137)\n"}, "x.py")
    assert result.exit_code == 137 and not result.oom_killed


@docker
def test_timeout_keeps_output_so_far(run_in_docker):
    script = "import sys, time\nprint('started', flush=True)\nprint('warn', file=sys.stderr, flush=True)\ntime.sleep(60)\n"
    result = run_in_docker({"slow.py": script}, "slow.py", timeout=1.5)
    assert result.timed_out and result.exit_code is None
    assert result.stdout == "started\n" and result.stderr == "warn\n"
    assert "TIMED OUT" in result.status_line()


@docker
def test_small_output_cap_marks_the_cut(run_in_docker):
    result = run_in_docker({"x.py": "print('a' * 100, end='')"}, "x.py", output_cap=10)
    assert result.stdout == "a" * 10 + "\n[ipyskills: output truncated, 90 more bytes not shown]\n"
    assert result.stdout_truncated and not result.stderr_truncated


@docker
def test_artifact_with_a_non_utf8_name_gets_a_printable_path(run_in_docker):
    script = "import os\nopen(os.environb[b'IPYSKILLS_OUTPUT'] + b'/r\\xff.txt', 'wb').write(b'hi')\n"
    result = run_in_docker({"w.py": script}, "w.py")
    assert result.exit_code == 0, result.stderr
    assert [(a.path, a.data) for a in result.artifacts] == [("r\ufffd.txt", b"hi")]
    json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")  # no lone surrogates


@docker
def test_artifacts_caps_and_nesting(run_in_docker):
    script = """
import os
out = os.environ["IPYSKILLS_OUTPUT"]
os.makedirs(out + "/sub/deeper")
open(out + "/a.txt", "w").write("a" * 100)
open(out + "/b.bin", "wb").write(b"b" * 5000)
open(out + "/sub/deeper/c.txt", "w").write("c" * 100)
os.symlink("/etc/passwd", out + "/link")
"""
    result = run_in_docker({"w.py": script}, "w.py", artifact_cap=1000)
    assert result.exit_code == 0, result.stderr
    got = [(a.path, a.size, a.data is not None) for a in result.artifacts]
    assert got == [("a.txt", 100, True), ("b.bin", 5000, False), ("sub/deeper/c.txt", 100, True)]
    assert result.artifacts[2].data == b"c" * 100
    few = run_in_docker({"w.py": script}, "w.py", artifact_files=1)
    assert [a.path for a in few.artifacts] == ["a.txt"]


@docker
def test_output_folder_is_size_limited(run_in_docker):
    script = """
import errno, os
try:
    with open(os.environ["IPYSKILLS_OUTPUT"] + "/big", "wb") as fh:
        for _ in range(100):
            fh.write(b"0" * 1048576)
    print("wrote 100 MiB")
except OSError as exc:
    print(errno.errorcode[exc.errno])
"""
    result = run_in_docker({"w.py": script}, "w.py", memory="512m")
    assert result.stdout == "ENOSPC\n"
    assert result.artifacts[0].data is None and result.artifacts[0].size <= 64 * 1024**2


@docker
def test_unknown_program_in_the_image_is_exit_127(run_in_docker):
    result = run_in_docker({"x.rb": "puts 1\n"}, "x.rb")
    assert result.exit_code == 127
    assert "cannot start 'ruby' in the sandbox image" in result.stderr


@docker
def test_each_run_gets_a_fresh_container(run_in_docker):
    script = "import os, socket\nprint(socket.gethostname())\nopen('/tmp/seen', 'a').write('x')\nprint(os.path.getsize('/tmp/seen'))\n"
    first = run_in_docker({"x.py": script}, "x.py").stdout.split()
    second = run_in_docker({"x.py": script}, "x.py").stdout.split()
    assert first[1] == second[1] == "1"
    assert first[0] != second[0]


@docker
def test_missing_image_says_what_to_run(docker_backend, skill_maker):
    backend = DockerBackend(image="ipyskills-no-such-image:0", client=docker_backend.client())
    ready, reason = backend.readiness()
    assert not ready and "ipyskills sandbox build [--offline]" in reason
    with pytest.raises(SandboxError, match="ipyskills sandbox build"):
        backend.ensure_ready()
    skill = skill_maker({"x.py": "print(1)"})
    with pytest.raises(SandboxError, match="ipyskills sandbox build"):
        backend.run(RunRequest("s", skill, "x.py"))


def test_readiness_is_fast_and_clear_without_an_engine(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    import docker as _  # noqa: F401  (import cost is paid once per process, not per readiness call)

    backend = DockerBackend()
    started = time.monotonic()
    ready, reason = backend.readiness()
    assert time.monotonic() - started < 0.5
    assert not ready and "start the Docker engine" in reason
    with pytest.raises(SandboxError, match="start the Docker engine"):
        backend.ensure_ready()


def test_docker_host_and_contexts_are_honoured(monkeypatch, tmp_path):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    assert engine_endpoint() == (None, None)  # no config: docker-py's default socket
    import hashlib

    meta = tmp_path / "contexts" / "meta" / hashlib.sha256(b"remote").hexdigest()
    meta.mkdir(parents=True)
    (meta / "meta.json").write_text(json.dumps({"Name": "remote", "Metadata": {},
                                                "Endpoints": {"docker": {"Host": "tcp://10.9.8.7:2375"}}}))
    (tmp_path / "config.json").write_text(json.dumps({"currentContext": "remote"}))
    assert engine_endpoint()[0] == "tcp://10.9.8.7:2375"
    monkeypatch.setenv("DOCKER_HOST", "unix:///elsewhere.sock")
    assert engine_endpoint()[0] == "unix:///elsewhere.sock"  # DOCKER_HOST wins, as with the docker CLI
    monkeypatch.delenv("DOCKER_HOST")
    monkeypatch.setenv("DOCKER_CONTEXT", "missing")
    with pytest.raises(SandboxError, match="docker context 'missing'"):
        engine_endpoint()


def test_skill_copy_leaves_out_links_that_leave_the_skill(tmp_path):
    import io
    import tarfile

    skill = tmp_path / "skill"
    (skill / "scripts").mkdir(parents=True)
    (skill / "scripts" / "x.py").write_text("print(1)")
    (skill / ".git").mkdir()
    (skill / ".git" / "config").write_text("secret")
    (tmp_path / "outside.txt").write_text("secret")
    (skill / "out-link").symlink_to(tmp_path / "outside.txt")
    (skill / "in-link").symlink_to(skill / "scripts" / "x.py")
    with tarfile.open(fileobj=io.BytesIO(tar_skill(skill))) as tar:
        names = sorted(m.name for m in tar)
        assert all(m.uid == 1000 for m in tar)
    assert names == ["in-link", "scripts/x.py"]


@docker
def test_cleanup_removes_strays_but_not_live_runs(docker_backend):
    client = docker_backend.client()
    dead_pid = 2**22 + 12345  # above pid_max on common systems, so no live process has it
    labels = {LABEL: "1", LABEL_HOST: os.uname().nodename}
    stray = client.containers.create(docker_backend.image, command=["true"],
                                     labels={**labels, LABEL_PID: str(dead_pid)})
    mine = client.containers.create(docker_backend.image, command=["true"],
                                    labels={**labels, LABEL_PID: str(os.getpid())})
    try:
        removed = cleanup(client)
        assert stray.short_id in removed and mine.short_id not in removed
        assert mine.id in [c.id for c in client.containers.list(ignore_removed=True, all=True)]
        assert mine.short_id in cleanup(client, all_owners=True)
    finally:
        import docker.errors

        for c in (stray, mine):
            with contextlib.suppress(docker.errors.NotFound):  # removed by the code under test
                c.remove(force=True)


@docker
def test_client_timeout_is_above_the_script_timeout(run_in_docker, docker_backend):
    run_in_docker({"x.py": "print(1)"}, "x.py", timeout=300)
    assert docker_backend.client().api.timeout >= 330


def test_launcher_source_is_standalone():
    # It runs with `python3 -I -S -c` inside the image: no imports from this package.
    import ast
    import sys

    source = (Path(__file__).parents[2] / "ipyskills" / "sandbox" / "docker" / "launcher.py").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import in the launcher"
            imported.add(node.module.split(".")[0])
    assert imported and imported <= set(sys.stdlib_module_names), imported


@docker
def test_skill_under_a_folder_with_a_colon_is_mounted(run_in_docker, skill_maker):
    """A bind given as 'src:dst:ro' breaks on a colon in the host path; the skill must still mount."""
    made = skill_maker({"scripts/x.py": "import os\nprint(sorted(os.listdir('/skill')))\n"}, name="demo")
    skill = made.parent / "backup 2026-01-01T10:00" / "demo"
    skill.parent.mkdir(mode=0o755)
    made.rename(skill)
    result = run_in_docker({}, "scripts/x.py", skill=skill)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "['SKILL.md', 'scripts']\n" and "skill read-only at /skill" in result.isolation
