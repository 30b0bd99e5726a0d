"""Attacks on the local backend, attempted for real, and checks that its isolation line tells the truth.

Each attack is a real script file in a real skill folder, run through LocalBackend().run(RunRequest(...)).
Where a protection depends on the machine (namespaces, running as root), the test reads the isolation
line first and asserts the behaviour that line promises, so a line that over-claims fails the test.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
from local_helpers import (
    AS_ROOT,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    assert_network_blocked_where_possible,
    landlock_abi,
    namespace_refusal,
    pids_alive,
    run,
    without_landlock,
)

from ipyskills.sandbox.local.backend import LocalBackend
from ipyskills.sandbox.policy import Limits
from ipyskills.sandbox.request import RunRequest


@pytest.fixture
def listener():
    """A real TCP server on the host's loopback; records whether anything connected."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.settimeout(0.2)
    seen = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            seen.append(conn.recv(100))
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], seen
    stop.set()
    thread.join(2)
    server.close()


class MarkerWatch:
    """Watches, from a thread, how many live processes carry `marker` while a run goes on."""

    def __init__(self, marker: str):
        self.marker = marker
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self):
        while not self._stop.is_set():
            self.most = max(self.most, len(marked_pids(self.marker)))
            time.sleep(0.05)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)


def marked_pids(marker: str) -> list[int]:
    """Host pids of live processes whose command line carries `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    found.append(int(entry))
        except OSError:
            continue
    return pids_alive(found)


CONNECT = textwrap.dedent("""
    import socket, sys
    for host, port in (("127.0.0.1", int(sys.argv[1])), ("1.1.1.1", 53)):
        try:
            s = socket.create_connection((host, port), timeout=2)
            s.sendall(b"leak")
            s.close()
            print(host, "connected")
        except OSError as exc:
            print(host, "refused", exc.errno)
""")


def test_network_is_blocked_wherever_the_kernel_allows(make_skill, listener):
    port, seen = listener
    skill = make_skill({"scripts/net.py": CONNECT})
    result = run(skill, "scripts/net.py", args=[str(port)])
    assert result.exit_code == 0, result.stderr
    refusal = namespace_refusal(CLONE_NEWNET, prefix=[sys.executable])
    assert_network_blocked_where_possible(result.isolation, "127.0.0.1 connected" in result.stdout, seen, refusal,
                                          landlock_abi())
    if not refusal:
        assert "1.1.1.1 refused" in result.stdout


PID_VIEW = textwrap.dedent("""
    import os, sys
    host_pid = int(sys.argv[1])
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    try:
        os.kill(host_pid, 0)
        reach = "reached"
    except ProcessLookupError:
        reach = "no such process"
    except PermissionError:
        reach = "denied"
    print(os.getpid(), len(pids), host_pid in pids, reach)
""")


def test_the_pid_view_is_private_wherever_the_kernel_allows(make_skill):
    """In its own pid namespace with its own /proc, the script is pid 2 (the reaper is 1), /proc lists
    only the run's processes, and a host process (this test's) does not exist for it."""
    skill = make_skill({"scripts/pids.py": PID_VIEW})
    result = run(skill, "scripts/pids.py", args=[str(os.getpid())])
    assert result.exit_code == 0, result.stderr
    own_pid, listed, sees_host, reach = result.stdout.split(maxsplit=3)
    pid_refusal = namespace_refusal(CLONE_NEWPID, prefix=[sys.executable])
    mount_refusal = namespace_refusal(CLONE_NEWPID | CLONE_NEWNS, prefix=[sys.executable])
    if not pid_refusal:
        assert "processes: pid namespace, all killed at the end" in result.isolation, result.isolation
        assert own_pid == "2" and reach.strip() == "no such process", result.stdout
    else:  # the kernel refused: the line must not claim it, and the host pid space is the script's
        assert "processes: pid namespace" not in result.isolation
        assert int(own_pid) > 2 and reach.strip() != "no such process"
    if not pid_refusal and not mount_refusal:
        assert "host processes: not visible (private /proc)" in result.isolation
        assert int(listed) <= 2 and sees_host == "False", result.stdout  # the reaper and the script
    else:
        assert "host processes: not visible (private /proc)" not in result.isolation


def test_network_when_requested_reaches_the_host_loopback(make_skill, listener):
    """The control for the test above: the same script connects when the call allows the network."""
    port, seen = listener
    skill = make_skill({"scripts/net.py": CONNECT})
    result = run(skill, "scripts/net.py", args=[str(port)], network=True)
    assert "127.0.0.1 connected" in result.stdout
    assert "network: allowed (requested)" in result.isolation
    deadline = time.monotonic() + 2
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen == [b"leak"]


def test_writing_the_skill_folder_fails_and_the_original_is_unchanged(make_skill):
    skill = make_skill({"scripts/vandal.py": textwrap.dedent("""
        import os, sys
        os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the skill's copy, by its path
        targets = ["SKILL.md", "scripts/vandal.py", "new.txt",
                   os.path.join(sys.argv[1], "SKILL.md"), os.path.join(sys.argv[1], "planted.txt")]
        for t in targets:
            try:
                with open(t, "a") as fh:
                    fh.write("pwned")
                print("wrote", t)
            except OSError as exc:
                print("denied", exc.errno)
        try:
            os.chmod("SKILL.md", 0o666)
            print("chmod ok")
        except OSError:
            print("chmod denied")
    """)})
    before = {p: p.read_bytes() for p in skill.rglob("*") if p.is_file()}
    result = run(skill, "scripts/vandal.py", args=[str(skill)])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    # The copy is read-only whoever runs it; the original is out of reach for the run's uid.
    assert lines[:3] == ["denied 13", "denied 13", "denied 13"]
    if AS_ROOT:
        assert lines[3:] == ["denied 13", "denied 13", "chmod denied"]
    assert {p: p.read_bytes() for p in skill.rglob("*") if p.is_file()} == before


def test_host_environment_secrets_do_not_leak(make_skill, monkeypatch):
    secret = "sk-" + uuid.uuid4().hex
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("LD_PRELOAD", "/nonexistent/evil.so")
    skill = make_skill({"scripts/env.sh": "env\ncat /proc/self/environ | tr '\\0' '\\n'\n"
                        "cat /proc/$PPID/environ 2>/dev/null | tr '\\0' '\\n'\n"})
    result = run(skill, "scripts/env.sh")
    assert result.exit_code == 0, result.stderr
    assert "IPYSKILLS_OUTPUT=" in result.stdout  # the script really printed its environment
    assert secret not in result.stdout + result.stderr
    assert "OPENAI_API_KEY" not in result.stdout and "LD_PRELOAD" not in result.stdout


def test_runs_unprivileged_when_the_parent_is_root(make_skill):
    skill = make_skill({"scripts/who.py": textwrap.dedent("""
        import os
        print(os.getuid(), os.geteuid(), os.getgid(), os.getgroups())
        for line in open("/proc/self/status"):
            if line.startswith(("CapEff", "NoNewPrivs")):
                print(line.split()[1])
        try:
            os.setuid(0)
            print("became root")
        except OSError:
            print("setuid denied")
    """)})
    result = run(skill, "scripts/who.py")
    lines = result.stdout.splitlines()
    if AS_ROOT:
        uid = lines[0].split()[0]
        assert int(uid) > 0 and lines[0] == f"{uid} {uid} {uid} []"
        assert f"uid {uid} (unprivileged, this run's own)" in result.isolation
        assert result.isolation.startswith("local: read-only copy of the skill")
    else:
        assert lines[0].split()[0] == str(os.getuid()) and "runs as the current user" in result.isolation
    assert lines[1:] == ["0000000000000000", "1", "setuid denied"]
    assert "no-new-privileges" in result.isolation


@pytest.mark.skipif(not AS_ROOT, reason="the root-only file test needs root to set it up")
def test_host_files_only_root_may_read_stay_unreadable(make_skill):
    skill = make_skill({"scripts/peek.py": textwrap.dedent("""
        for path in ("/etc/shadow", "/root", "/proc/1/environ"):
            try:
                open(path).read() if path != "/root" else __import__("os").listdir(path)
                print("read", path)
            except OSError as exc:
                print("denied", path, exc.errno)
    """)})
    result = run(skill, "scripts/peek.py")
    assert result.stdout.splitlines() == ["denied /etc/shadow 13", "denied /root 13", "denied /proc/1/environ 13"]
    assert "NOT isolated: filesystem reads" in result.isolation or "files: reads only system" in result.isolation


@pytest.mark.skipif(not AS_ROOT, reason="only a run uid of its own can be swept")
def test_files_left_in_shared_temp_folders_are_removed(make_skill):
    name = "ipyskills-test-left-" + uuid.uuid4().hex
    skill = make_skill({"scripts/litter.py": textwrap.dedent(f"""
        import os
        for d in ("/tmp", "/var/tmp", "/dev/shm"):
            open(os.path.join(d, "{name}"), "w").write("x")
        os.makedirs("/tmp/{name}-dir/sub")
        os.symlink("/etc", "/tmp/{name}-link")
        print(sorted(n for n in os.listdir("/tmp") if n.startswith("{name}")))
    """)})
    result = run(skill, "scripts/litter.py")
    if "writes only the run folder" in result.isolation:  # Landlock: the first write is refused
        assert "PermissionError" in result.stderr and result.stdout == ""
    else:
        assert result.stdout == f"['{name}', '{name}-dir', '{name}-link']\n", result.stderr
        assert "is removed afterwards" in result.isolation
    for d in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not any(n.startswith(name) for n in os.listdir(d)), d
    assert os.path.isdir("/etc")  # the link was removed, not what it pointed at


def test_rlimits_the_line_claims_are_the_ones_the_script_has(make_skill):
    skill = make_skill({"scripts/limits.py": textwrap.dedent("""
        import resource
        for name in ("AS", "CPU", "FSIZE", "NPROC", "NOFILE", "CORE"):
            print(name, *resource.getrlimit(getattr(resource, "RLIMIT_" + name)))
    """)})
    result = run(skill, "scripts/limits.py", memory="300m", timeout=7.5, tmp_size="10m", pids=40)
    got = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    mib = 1024 * 1024
    assert got == {"AS": f"{300 * mib} {300 * mib}", "CPU": "9 10", "FSIZE": f"{10 * mib} {10 * mib}",
                   "NPROC": "40 40", "NOFILE": "256 256", "CORE": "0 0"}
    assert "rlimits (as 300 MiB, cpu 9 s, fsize 10 MiB, nproc 40, nofile 256, core 0)" in result.isolation


def test_hitting_the_cpu_seconds_limit_counts_as_a_timeout(make_skill):
    skill = make_skill({"scripts/xcpu.py": "import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)\n"})
    result = run(skill, "scripts/xcpu.py")
    assert result.timed_out and result.exit_code is None and not result.oom_killed


def test_fork_bomb_is_held_by_the_process_limit(make_skill):
    skill = make_skill({"scripts/bomb.py": textwrap.dedent("""
        import os, time
        made = 0
        while True:
            try:
                pid = os.fork()
            except OSError as exc:
                print("fork refused after", made, "errno", exc.errno, flush=True)
                break
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            made += 1
    """)})
    started = time.monotonic()
    result = run(skill, "scripts/bomb.py", pids=32, timeout=20)
    assert time.monotonic() - started < 15
    assert "nproc 32" in result.isolation
    words = result.stdout.split()
    assert words[:3] == ["fork", "refused", "after"], result.stdout + result.stderr
    assert int(words[3]) < 32 and words[5] == "11"  # EAGAIN
    # The sleeping children outlive the script, yet the run ends when it does: they are killed with it.
    assert result.exit_code == 0 and not result.timed_out


def test_classic_shell_fork_bomb_ends_and_leaves_nothing(make_skill, run_dirs):
    marker = "bomb-" + uuid.uuid4().hex
    skill = make_skill({"scripts/bomb.sh": "b() { b | b & }; b\nsleep 30\n"})
    with MarkerWatch(marker) as watch:  # every forked shell carries the marker argument
        result = run(skill, "scripts/bomb.sh", args=[marker], pids=64, timeout=3)
    assert 5 < watch.most <= 64 + 1  # the helper outside the namespace carries it too (as root)
    assert result.timed_out and "fork: retry: Resource temporarily unavailable" in result.stderr
    if not namespace_refusal(CLONE_NEWPID, prefix=[sys.executable]):
        assert "processes: pid namespace" in result.isolation
    if "processes: pid namespace" in result.isolation:
        assert marked_pids(marker) == []
    assert run_dirs.made and run_dirs.left_behind() == []


def test_memory_bomb_is_stopped_and_reported(make_skill):
    skill = make_skill({
        "scripts/big.py": "data = bytearray(1024 ** 3)\nprint('allocated')\n",
        "scripts/grow.py": "chunks = []\nwhile True:\n    chunks.append(b'x' * (8 * 1024 ** 2))\n",
    })
    for script in ("scripts/big.py", "scripts/grow.py"):
        result = run(skill, script, memory="128m", timeout=20)
        assert result.oom_killed, (script, result.exit_code, result.stderr[-300:])
        assert result.exit_code not in (0, None) and not result.timed_out and not result.ok
        assert "allocated" not in result.stdout
        assert "as 128 MiB" in result.isolation


def test_memory_error_text_alone_does_not_fake_an_oom(make_skill):
    skill = make_skill({"scripts/ok.py": "print('MemoryError is just a word here')\n"})
    assert not run(skill, "scripts/ok.py").oom_killed


def test_cpu_spin_times_out_and_the_whole_tree_is_gone(make_skill):
    marker = "spin-" + uuid.uuid4().hex
    skill = make_skill({"scripts/spin.py": textwrap.dedent(f"""
        import os, subprocess, sys
        # a grandchild that leaves the process group, and one that stays in it
        subprocess.Popen([sys.executable, "-c", "while True: pass", "{marker}"], start_new_session=True)
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "{marker}"])
        print("started", flush=True)
        while True:
            pass
    """)})
    started = time.monotonic()
    with MarkerWatch(marker) as watch:
        result = run(skill, "scripts/spin.py", timeout=1.5)
    elapsed = time.monotonic() - started
    assert watch.most == 2  # both grandchildren really ran
    assert result.timed_out and result.exit_code is None and not result.ok
    assert result.stdout == "started\n"
    assert 1.4 < elapsed < 5
    if not namespace_refusal(CLONE_NEWPID, prefix=[sys.executable]):
        assert "processes: pid namespace" in result.isolation
    if "processes: pid namespace" in result.isolation:
        assert marked_pids(marker) == []
    else:  # the line admits escapes; the one that stayed in the group must still be gone
        leftovers = marked_pids(marker)
        for pid in leftovers:
            os.kill(pid, signal.SIGKILL)
        assert len(leftovers) <= 1


def test_output_flood_is_capped_and_fast(make_skill):
    skill = make_skill({"scripts/flood.py": textwrap.dedent("""
        import sys
        block = b"y" * (1024 * 1024)
        for _ in range(200):
            sys.stdout.buffer.write(block)
            sys.stderr.buffer.write(block[:65536])
        print("end", file=sys.stderr)
    """)})
    started = time.monotonic()
    result = run(skill, "scripts/flood.py", output_cap="64k", timeout=30)
    elapsed = time.monotonic() - started
    assert result.exit_code == 0 and not result.timed_out
    assert result.stdout_truncated and result.stderr_truncated
    assert result.stdout.startswith("y" * 65536) and "[ipyskills: output truncated" in result.stdout
    assert f"{200 * 1024 * 1024 - 65536} more bytes" in result.stdout
    assert len(result.stdout) < 70_000 and len(result.stderr) < 70_000
    assert elapsed < 10, elapsed


def test_symlink_to_a_host_file_is_not_copied_and_its_secret_never_appears(make_skill, tmp_path):
    secret = "host-secret-" + uuid.uuid4().hex
    host_file = Path(tempfile_dir()) / f"ipyskills-test-secret-{uuid.uuid4().hex}"
    host_file.write_text(secret)
    os.chmod(host_file, 0o644)  # readable by anyone: only the copy rules keep it out
    try:
        skill = make_skill({"scripts/read.py": textwrap.dedent("""
            import os
            for path in ("data/secret.txt", "data/etc/passwd"):
                print(path, os.path.lexists(path))
                try:
                    print(open(path).read())
                except OSError as exc:
                    print("error", exc.errno)
        """)})
        (skill / "data").mkdir()
        os.symlink(str(host_file), skill / "data" / "secret.txt")
        os.symlink("/etc", skill / "data" / "etc")
        result = run(skill, "scripts/read.py")
        assert result.exit_code == 0, result.stderr
        assert "data/secret.txt False" in result.stdout and "data/etc/passwd False" in result.stdout
        assert secret not in result.stdout + result.stderr
        assert "root:" not in result.stdout
        assert "2 link(s)/special file(s) not copied" in result.isolation
    finally:
        host_file.unlink()


def tempfile_dir() -> str:
    import tempfile

    return tempfile.gettempdir()


def test_symlinked_folder_escaping_the_skill_is_dropped(make_skill, tmp_path):
    outside = Path(tempfile_dir()) / f"ipyskills-test-outside-{uuid.uuid4().hex}"
    outside.mkdir()
    (outside / "notes.txt").write_text("outside notes")
    os.chmod(outside, 0o755)
    os.chmod(outside / "notes.txt", 0o644)
    try:
        skill = make_skill({"scripts/ls.py": "import os\nos.chdir(os.path.dirname(os.path.dirname(__file__)))\n"
                                             "print(sorted(os.listdir('.')))\n"
                            "print(open('refs/notes.txt').read())\n"})
        os.symlink(str(outside), skill / "refs")
        result = run(skill, "scripts/ls.py")
        assert result.stdout.startswith("['SKILL.md', 'scripts']\n")
        assert "outside notes" not in result.stdout and "FileNotFoundError" in result.stderr
    finally:
        (outside / "notes.txt").unlink()
        outside.rmdir()


def test_file_size_limit_stops_big_writes(make_skill):
    skill = make_skill({"scripts/fill.py": textwrap.dedent("""
        import os
        path = os.path.join(os.environ["TMPDIR"], "fill")
        try:
            with open(path, "wb") as fh:
                for _ in range(64):
                    fh.write(b"z" * (1024 * 1024))
            print("wrote all")
        except OSError as exc:
            print("stopped", exc.errno, os.path.getsize(path))
    """)})
    result = run(skill, "scripts/fill.py", tmp_size="8m")
    assert result.stdout == f"stopped 27 {8 * 1024 * 1024}\n", result.stderr  # EFBIG
    assert "fsize 8 MiB" in result.isolation


def test_open_file_limit_holds(make_skill):
    skill = make_skill({"scripts/fds.py": textwrap.dedent("""
        import os
        held = []
        try:
            while True:
                held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as exc:
            print(len(held), exc.errno)
    """)})
    result = run(skill, "scripts/fds.py")
    count, err = result.stdout.split()
    assert 240 < int(count) < 256 and err == "24"  # EMFILE
    assert "nofile 256" in result.isolation


def test_over_cap_artifact_is_listed_without_data(make_skill):
    skill = make_skill({"scripts/out.py": textwrap.dedent("""
        import os
        out = os.environ["IPYSKILLS_OUTPUT"]
        open(os.path.join(out, "small.txt"), "w").write("small")
        open(os.path.join(out, "huge.bin"), "wb").write(os.urandom(3 * 1024 * 1024))
        os.symlink("/etc/passwd", os.path.join(out, "passwd"))
    """)})
    result = run(skill, "scripts/out.py", artifact_cap="1m")
    assert result.exit_code == 0, result.stderr
    got = {a.path: (a.size, a.data) for a in result.artifacts}
    assert got == {"huge.bin": (3 * 1024 * 1024, None), "small.txt": (5, b"small")}


def test_keyboard_interrupt_mid_run_kills_everything_and_cleans_up(make_skill, run_dirs):
    marker = "kbd-" + uuid.uuid4().hex
    skill = make_skill({"scripts/slow.py": textwrap.dedent(f"""
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "{marker}"])
        print("ready", flush=True)
        time.sleep(300)
    """)})
    request = RunRequest(skill_name="attack", skill_dir=skill, script="scripts/slow.py", limits=Limits(timeout=60))

    seen = []

    def interrupt_when_running():
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            seen.extend(marked_pids(marker))
            time.sleep(0.05)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    threading.Thread(target=interrupt_when_running, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        LocalBackend().run(request)
    assert seen, "the grandchild never started"
    assert time.monotonic() - started < 8
    assert marked_pids(marker) == []
    assert run_dirs.made and run_dirs.left_behind() == []


def test_no_temporary_folder_survives_a_mixed_batch(make_skill, run_dirs):
    skill = make_skill({"scripts/a.py": "import os\nopen(os.path.join(os.environ['TMPDIR'], 't'), 'w')\n"})
    for _ in range(3):
        assert run(skill, "scripts/a.py").exit_code == 0
    assert run_dirs.made and run_dirs.left_behind() == []


# -- other machines: an ordinary user (Binder), and a kernel that refuses namespaces ---------------------

DRIVER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from ipyskills.sandbox.local.backend import LocalBackend
    from ipyskills.sandbox.request import RunRequest
    request = RunRequest(skill_name="attack", skill_dir=Path(sys.argv[1]), script="scripts/probe.py",
                         args=[sys.argv[2]])
    result = LocalBackend().run(request)
    print(json.dumps({"stdout": result.stdout, "stderr": result.stderr, "isolation": result.isolation}))
""")

PROBE = CONNECT + textwrap.dedent("""
    import os
    print("uid", os.getuid())
""")


def drive(prefix: list[str], skill: Path, port: int, **popen) -> dict:
    """Run the backend in another process (as another user, or under a stricter kernel policy)."""
    import json
    import subprocess

    done = subprocess.run([*prefix, "-c", DRIVER, str(skill), str(port)], capture_output=True, text=True, check=False,
                          timeout=60, **popen)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.skipif(not AS_ROOT, reason="needs root to start the backend as an ordinary user")
def test_as_an_ordinary_user_the_network_is_still_blocked_where_the_kernel_allows(make_skill, listener):
    port, seen = listener
    skill = make_skill({"scripts/probe.py": PROBE})
    python = "/usr/bin/python3"  # uid 65534 cannot reach every interpreter (e.g. one under /root)
    repo = str(Path(__file__).resolve().parents[2])
    user = {"user": 65534, "group": 65534, "extra_groups": [], "cwd": "/",
            "env": {"PATH": "/usr/bin:/bin", "PYTHONPATH": repo, "OPENAI_API_KEY": "sk-leak"}}
    out = drive([python], skill, port, **user)
    iso = out["isolation"]
    assert "uid 65534" in out["stdout"]
    assert "runs as the current user (uid 65534)" in iso
    assert iso.startswith("local: throw-away copy of the skill")
    assert "filesystem reads and writes (as the current user" in iso or "writes only the run folder (Landlock" in iso
    refusal = namespace_refusal(CLONE_NEWNET, prefix=[python], **user)
    assert_network_blocked_where_possible(iso, "127.0.0.1 connected" in out["stdout"], seen, refusal, landlock_abi())
    if not refusal:
        assert "network: none (user+net namespace)" in iso


@pytest.mark.skipif(not AS_ROOT or not shutil.which("unshare"), reason="needs root and util-linux unshare")
@pytest.mark.parametrize("landlock", ["kernel", "refused"])
def test_where_namespaces_are_refused_the_line_says_so_and_it_is_true(make_skill, listener, landlock):
    """Inside a user namespace whose namespace quotas are zero (a per-namespace setting: the host is
    untouched), the backend sees root but can neither switch users nor make namespaces. With this kernel's
    Landlock, TCP must still be denied; with Landlock refused too (a seccomp filter, as on a kernel without
    it), the backend's own seccomp filter still refuses every socket but AF_UNIX, and the test proves the
    kernel refused the namespaces and Landlock. Processes that leave the group are ended by the helper,
    a child subreaper."""
    port, seen = listener
    skill = make_skill({"scripts/probe.py": PROBE})
    quotas = "; ".join(f"echo 0 > /proc/sys/user/max_{kind}_namespaces" for kind in ("net", "pid", "user"))
    prefix = ["unshare", "--user", "--map-root-user", "sh", "-c", f'{quotas}; exec "$0" "$@"', sys.executable]
    if landlock == "refused":
        prefix = [*prefix[:-1], *without_landlock(sys.executable)]
    out = drive(prefix, skill, port)
    iso = out["isolation"]
    refusal = namespace_refusal(CLONE_NEWNET, prefix=prefix)
    abi = landlock_abi(prefix=prefix)
    assert refusal, "the quota did not stop the network namespace"
    assert (abi == 0) == (landlock == "refused"), abi
    assert "processes: all killed at the end, those that leave the process group too (child subreaper)" in iso
    assert re.search(r"user: still root \(could not switch: uid \d+ is not usable here", iso)
    assert iso.startswith("local: throw-away copy of the skill") and "read-only" not in iso
    if abi:
        assert "host processes: command lines readable" not in iso  # Landlock hides /proc without a namespace
    else:
        assert "host processes: command lines readable in /proc" in iso
        assert "filesystem reads and writes (as the current user; Landlock: " in iso
    connected = "127.0.0.1 connected" in out["stdout"]
    if connected:
        deadline = time.monotonic() + 2
        while not seen and time.monotonic() < deadline:
            time.sleep(0.05)
        assert seen == [b"leak"]
    assert "network: none, no socket but AF_UNIX can be made (seccomp filter" in iso, iso
    assert not connected and seen == []
    assert_network_blocked_where_possible(iso, connected, seen if not connected else [], refusal, abi)
