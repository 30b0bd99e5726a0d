"""Each hardening claim of the Docker backend, attacked for real in a real container.

The scripts run through DockerBackend.run directly (no guard): the container is the boundary under test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from conftest import test_runtime

pytestmark = pytest.mark.docker
# Under gVisor (IPYSKILLS_TEST_RUNTIME=runsc) the same attacks fail with gVisor's own answers: its kernel
# has no route at all (EHOSTUNREACH, not ENETUNREACH), no /sys/class/net, and refuses writes to the
# read-only root with EACCES (to a read-only bind mount with EROFS, as runc). The promise is the same.
GVISOR = test_runtime() == "runsc"
NO_ROUTE = "EHOSTUNREACH" if GVISOR else "ENETUNREACH"
READ_ONLY = "EACCES" if GVISOR else "EROFS"
INTERFACES = "import socket; print(sorted(name for _i, name in socket.if_nameindex()))"

TRANSFERS = ["mount", "copy"]


def connect_script(host: str, port: int) -> str:
    return f"""
import errno, socket
s = socket.socket()
s.settimeout(3)
try:
    s.connect(({host!r}, {port}))
    print("CONNECTED")
except OSError as exc:
    print("FAILED", errno.errorcode.get(exc.errno, exc.errno) if exc.errno else type(exc).__name__)
"""


def bridge_gateway(client) -> str:
    config = client.networks.get("bridge").attrs["IPAM"]["Config"]
    return config[0].get("Gateway") or "172.17.0.1"


def test_no_network_by_default(run_in_docker, docker_backend):
    gateway = bridge_gateway(docker_backend.client())
    for host, port in (("1.1.1.1", 53), (gateway, 2375), (gateway, 22)):
        result = run_in_docker({"net.py": connect_script(host, port)}, "net.py")
        assert result.stdout.strip() == f"FAILED {NO_ROUTE}", (host, result.stdout, result.stderr)
    interfaces = run_in_docker({"ifs.py": INTERFACES}, "ifs.py")
    assert interfaces.stdout.strip() == "['lo']", interfaces.stderr


@pytest.mark.skipif(GVISOR, reason="gVisor runs have no network here (runsc is registered with --network=none): "
                                   "test_gvisor.py tests the refusal")
def test_network_only_when_asked(run_in_docker, docker_backend):
    gateway = bridge_gateway(docker_backend.client())
    # A connect attempt to the host's bridge address only: with network=True the route exists, so the
    # error (if any) is no longer "network unreachable".
    result = run_in_docker({"net.py": connect_script(gateway, 9)}, "net.py", network=True)
    assert result.stdout.strip() != "FAILED ENETUNREACH", result.stdout
    assert "network bridge" in result.isolation
    interfaces = run_in_docker({"ifs.py": INTERFACES}, "ifs.py", network=True)
    assert "eth0" in interfaces.stdout


WRITE_ATTEMPTS = """
import errno, os
for path in ["/etc/evil", "/usr/bin/evil", "/evil", "/home/evil", "/var/evil", "/skill/evil",
             "/skill/SKILL.md", "/skill/data/keep.txt"]:
    try:
        with open(path, "a") as fh:
            fh.write("pwned")
        print(path, "WRITTEN")
    except OSError as exc:
        print(path, errno.errorcode[exc.errno])
for victim in ["/skill/data/keep.txt", "/skill/data"]:
    try:
        os.remove(victim) if victim.endswith(".txt") else os.rmdir(victim)
        print("rm:" + victim, "REMOVED")
    except OSError as exc:
        print("rm:" + victim, errno.errorcode[exc.errno])
print([line.split()[3].split(",")[0] for line in open("/proc/self/mounts") if line.split()[1] == "/"])
"""


@pytest.mark.parametrize("transfer", TRANSFERS)
def test_root_and_skill_are_not_writable(run_in_docker, skill_maker, transfer):
    skill = skill_maker({"attack.py": WRITE_ATTEMPTS, "data/keep.txt": "original\n"})
    # World-writable on the host, so only the sandbox (not file permissions) can stop the writes.
    for path, mode in ((skill, 0o777), (skill / "data", 0o777), (skill / "data" / "keep.txt", 0o666),
                       (skill / "SKILL.md", 0o666)):
        os.chmod(path, mode)
    before = {p: p.read_bytes() for p in skill.rglob("*") if p.is_file()}
    result = run_in_docker(None, "attack.py", skill=skill, transfer=transfer)
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines()[:-1])
    for path in ("/etc/evil", "/usr/bin/evil", "/evil", "/home/evil", "/var/evil"):
        assert lines[path] == READ_ONLY, (path, result.stdout)
    expected = "EROFS" if transfer == "mount" else "EACCES"  # a copy is write-protected, a mount read-only
    for path in ("/skill/evil", "/skill/SKILL.md", "/skill/data/keep.txt", "rm:/skill/data/keep.txt",
                 "rm:/skill/data"):
        assert lines[path] == expected, (path, result.stdout)
    assert "WRITTEN" not in result.stdout and "REMOVED" not in result.stdout
    assert result.stdout.splitlines()[-1] == "['ro']"
    after = {p: p.read_bytes() for p in skill.rglob("*") if p.is_file()}
    assert after == before


def test_no_docker_socket(run_in_docker):
    script = """
import os, socket
for path in ["/var/run/docker.sock", "/run/docker.sock", "/var/run/docker", "/run/containerd"]:
    print(path, os.path.exists(path))
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("/var/run/docker.sock")
    print("CONNECTED")
except OSError as exc:
    print("FAILED", type(exc).__name__)
"""
    result = run_in_docker({"sock.py": script}, "sock.py")
    assert result.stdout.splitlines() == [
        "/var/run/docker.sock False", "/run/docker.sock False", "/var/run/docker False",
        "/run/containerd False", "FAILED FileNotFoundError"]


def test_host_environment_never_reaches_the_script(run_in_docker, monkeypatch):
    monkeypatch.setenv("IPYSKILLS_TEST_SECRET", "s3cret-value-4711")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-4711")
    script = """
import json, os
print(json.dumps(dict(os.environ)))
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            print(open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace"))
        except OSError as exc:
            print(pid, "environ unreadable", exc.errno)
"""
    result = run_in_docker({"env.py": script}, "env.py", env={"ASKED_FOR": "yes"})
    assert "4711" not in result.stdout + result.stderr
    env = json.loads(result.stdout.splitlines()[0])
    assert env["ASKED_FOR"] == "yes"
    assert env["HOME"] == "/tmp" and env["IPYSKILLS_OUTPUT"] == "/output"
    if GVISOR:  # gVisor lets a process read the environ of another of the same uid: it holds no host variable
        launcher = [line for line in result.stdout.splitlines()[1:] if "IPYSKILLS_OUTPUT=/output" in line]
        assert launcher and all(set(dict(kv.split("=", 1) for kv in line.split("\0") if "=" in kv)) <= {
            *env, "HOSTNAME"} for line in launcher), result.stdout
    else:
        assert "1 environ unreadable" in result.stdout  # the launcher (pid 1) is not readable by the script


def test_no_capabilities_and_uid_1000(run_in_docker):
    # prctl asks the kernel the script runs on (gVisor's /proc/self/status has no CapAmb or NoNewPrivs line)
    script = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"):
    print(key, status[key].strip() if key in status else "absent")
print("prctl", libc.prctl(39, 0, 0, 0, 0), libc.prctl(21, 0, 0, 0, 0),
      sum(libc.prctl(23, cap, 0, 0, 0) == 1 for cap in range(41)))  # no_new_privs, seccomp, bounding caps
print("ids", os.getuid(), os.geteuid(), os.getgid(), os.getegid(), sorted(os.getgroups()))
"""
    result = run_in_docker({"caps.py": script}, "caps.py")
    fields = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        if not (GVISOR and fields[key] == "absent"):
            assert int(fields[key], 16) == 0, (key, fields[key])
    # no_new_privs is set; the sandbox's seccomp filter is on (mode 2), under gVisor too (--oci-seccomp);
    # no capability is left in the bounding set
    assert fields["prctl"] == "1 2 0", fields
    if not GVISOR:
        assert fields["NoNewPrivs"] == "1" and fields["Seccomp"] == "2"
    assert fields["ids"] == "1000 1000 1000 1000 [1000]"


def test_the_seccomp_profile_refuses_what_it_lists(run_in_docker):
    """Under runc and under gVisor alike: namespaces, keyrings, BPF, perf, userfaultfd and acct are refused
    with EPERM (without runsc's --oci-seccomp, gVisor ignored the profile and unshare succeeded)."""
    script = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
for name, nr, args in [("unshare", 272, (0x10000000,)), ("keyctl", 250, (0, 0, 0, 0)), ("add_key", 248, (0, 0, 0, 0)),
                       ("bpf", 321, (0, 0, 0)), ("perf_event_open", 298, (0, 0, 0, 0, 0)), ("userfaultfd", 323, (0,)),
                       ("acct", 163, (0,))]:
    ctypes.set_errno(0)
    print(name, libc.syscall(nr, *args), errno.errorcode.get(ctypes.get_errno()))
import threading
threading.Thread(target=print, args=("a thread starts",)).start()
"""
    result = run_in_docker({"sys.py": script}, "sys.py")
    lines = result.stdout.splitlines()
    assert lines[:-1] == [f"{name} -1 EPERM" for name in ("unshare", "keyctl", "add_key", "bpf", "perf_event_open",
                                                          "userfaultfd", "acct")], result.stdout + result.stderr
    assert lines[-1] == "a thread starts"


@pytest.mark.skipif(os.geteuid() != 0, reason="making a setuid-root binary needs root on the host")
def test_setuid_binary_cannot_gain_root(run_in_docker, skill_maker):
    # called by its path in the skill (the working directory is the run's workspace, not the skill)
    skill = skill_maker({"run.sh": '#!/bin/bash\nhere="$(dirname "$0")"\n"$here/suid-id" -u; "$here/suid-id" -ru; '
                                   "python3 -c 'import ctypes; print(\"NoNewPrivs:\", "
                                   "ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))'\n"})
    shutil.copy("/usr/bin/id", skill / "suid-id")
    os.chown(skill / "suid-id", 0, 0)
    os.chmod(skill / "suid-id", 0o4755)
    for transfer in TRANSFERS:
        result = run_in_docker(None, "run.sh", skill=skill, transfer=transfer)
        assert result.stdout.split() == ["1000", "1000", "NoNewPrivs:", "1"], (transfer, result.stdout,
                                                                             result.stderr)


def test_fork_bomb_is_held_by_the_pids_limit(run_in_docker):
    script = """
import errno, os, time
count = 0
try:
    while count < 10000:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        count += 1
except OSError as exc:
    print("fork failed", errno.errorcode[exc.errno], "after", count)
"""
    result = run_in_docker({"bomb.py": script}, "bomb.py", pids=64, timeout=30)
    words = result.stdout.split()
    assert words[:3] == ["fork", "failed", "EAGAIN"], result.stdout + result.stderr
    assert 30 < int(words[-1]) < 64
    assert result.exit_code == 0 and not result.timed_out  # the sleeping children did not hold the run


def test_classic_shell_fork_bomb_ends(run_in_docker):
    started = time.monotonic()
    # The script lives on for 3 s so the bomb surely reaches the pids limit before the launcher kills
    # what it left running (with `wait`, bash may return before any fork has failed).
    result = run_in_docker({"bomb.sh": "#!/bin/bash\nbomb() { bomb | bomb & }; bomb; sleep 3\n"}, "bomb.sh",
                           timeout=10)
    assert time.monotonic() - started < 20
    assert "Resource temporarily unavailable" in result.stderr  # the pids limit bit
    assert subprocess.run(["true"], check=False).returncode == 0  # the host can still start processes


def test_memory_bomb_is_oom_killed(run_in_docker):
    script = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))\n"
    result = run_in_docker({"mem.py": script}, "mem.py", memory="64m", timeout=30)
    assert result.oom_killed, (result.exit_code, result.stderr)
    assert result.exit_code == 137 and not result.timed_out
    assert "OUT OF MEMORY" in result.status_line()


def test_cpu_spin_times_out_and_the_container_goes(run_in_docker):
    started = time.monotonic()
    result = run_in_docker({"spin.py": "while True:\n    pass\n"}, "spin.py", timeout=2)
    elapsed = time.monotonic() - started
    assert result.timed_out and result.exit_code is None and not result.oom_killed
    assert 2 <= elapsed < 10
    assert 1900 <= result.duration_ms < 6000


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_flood_is_capped_and_fast(run_in_docker, stream):
    script = f"""
import sys
block = b"x" * 65536
out = sys.{stream}.buffer
for _ in range(3200):  # 200 MiB
    out.write(block)
print("done", file=sys.stderr if "{stream}" == "stdout" else sys.stdout)
"""
    started = time.monotonic()
    result = run_in_docker({"flood.py": script}, "flood.py", timeout=60)
    elapsed = time.monotonic() - started
    flooded = getattr(result, stream)
    assert getattr(result, f"{stream}_truncated") and result.exit_code == 0
    assert flooded.startswith("x" * 1024 * 1024)
    assert flooded.endswith(f"[ipyskills: output truncated, {200 * 1024 * 1024 - 1024 * 1024} more bytes not shown]\n")
    other = result.stderr if stream == "stdout" else result.stdout
    assert other == "done\n"
    assert elapsed < 30, f"a 200 MiB flood took {elapsed:.1f} s"


def test_filling_tmp_stops_at_its_size(run_in_docker):
    script = """
import errno, os
written = 0
try:
    with open("/tmp/fill", "wb") as fh:
        while True:
            fh.write(b"\\0" * 1048576)
            fh.flush()
            written += 1
except OSError as exc:
    print(errno.errorcode[exc.errno], written)
"""
    result = run_in_docker({"fill.py": script}, "fill.py", memory="512m")
    code, megabytes = result.stdout.split()
    assert code == "ENOSPC" and 60 <= int(megabytes) <= 64, result.stdout + result.stderr


def test_tmp_is_noexec(run_in_docker):
    script = """
import errno, os
with open("/tmp/run.sh", "w") as fh:
    fh.write("#!/bin/sh\\necho ran\\n")
os.chmod("/tmp/run.sh", 0o755)
try:
    os.execv("/tmp/run.sh", ["/tmp/run.sh"])
except OSError as exc:
    print("exec", errno.errorcode[exc.errno])
"""
    assert run_in_docker({"x.py": script}, "x.py").stdout == "exec EACCES\n"


@pytest.mark.parametrize("transfer", TRANSFERS)
def test_symlink_to_a_host_file_never_shows_its_content(run_in_docker, skill_maker, tmp_path, transfer):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("TOPSECRET-0xC0FFEE\n")
    os.chmod(tmp_path, 0o755)
    os.chmod(secret, 0o644)
    skill = skill_maker({"read.py": """
import os
for name in ["link.txt", "dirlink/host-secret.txt", os.environ["SECRET_PATH"]]:
    try:
        print(name, open(name).read())
    except OSError as exc:
        print(name, type(exc).__name__)
"""})
    (skill / "link.txt").symlink_to(secret)
    (skill / "dirlink").symlink_to(tmp_path)
    result = run_in_docker(None, "read.py", skill=skill, transfer=transfer, env={"SECRET_PATH": str(secret)})
    assert "TOPSECRET" not in result.stdout + result.stderr
    assert result.stdout.count("Error") == 3, result.stdout  # all three reads failed


def test_stdin_arrives_byte_for_byte(run_in_docker):
    payload = bytes(range(256)) * 4096 + os.urandom(3 * 1024 * 1024) + b"\r\n\x00end"
    script = "import hashlib, sys\ndata = sys.stdin.buffer.read()\nprint(len(data), hashlib.sha256(data).hexdigest())\n"
    result = run_in_docker({"sum.py": script}, "sum.py", stdin=payload)
    import hashlib

    assert result.stdout.split() == [str(len(payload)), hashlib.sha256(payload).hexdigest()]


def test_script_that_ignores_stdin_still_finishes(run_in_docker):
    result = run_in_docker({"x.py": "print('no read')"}, "x.py", stdin=b"z" * (8 * 1024 * 1024))
    assert result.stdout == "no read\n" and result.exit_code == 0


def test_forged_marker_and_leftover_processes_do_not_corrupt_the_result(run_in_docker):
    script = r"""
import os, subprocess, sys
sys.stdout.write("\0\0ipyskills-end-" + "0" * 32 + "\0\0" + '{"exit": 0, "files": []}\n')
sys.stdout.flush()
open(os.environ["IPYSKILLS_OUTPUT"] + "/real.txt", "w").write("real")
subprocess.Popen(["bash", "-c", "while true; do echo straggler; done"])
sys.exit(4)
"""
    started = time.monotonic()
    result = run_in_docker({"forge.py": script}, "forge.py", timeout=20)
    assert time.monotonic() - started < 15 and not result.timed_out
    assert result.exit_code == 4
    assert result.stdout.startswith("\0\0ipyskills-end-" + "0" * 32)
    assert [(a.path, a.data) for a in result.artifacts] == [("real.txt", b"real")]


def test_png_written_to_output_comes_back(run_in_docker):
    script = """
import os
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [3, 1, 2])
plt.savefig(os.path.join(os.environ["IPYSKILLS_OUTPUT"], "line.png"))
print(plt.get_backend())
"""
    result = run_in_docker({"plot.py": script}, "plot.py")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip().lower() == "agg"
    [artifact] = result.artifacts
    assert artifact.path == "line.png" and artifact.mime == "image/png"
    assert artifact.data.startswith(b"\x89PNG\r\n\x1a\n") and artifact.size == len(artifact.data)


def test_keyboard_interrupt_mid_run_leaves_no_container(run_in_docker, docker_backend):
    import _thread
    import threading

    timer = threading.Timer(2.0, _thread.interrupt_main)
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_in_docker({"sleep.py": "import time\ntime.sleep(60)\n"}, "sleep.py", timeout=60)
    timer.cancel()
    assert time.monotonic() - started < 10
    # the autouse fixture asserts that no labelled container of this process is left


def test_process_exit_mid_run_removes_the_container(docker_backend, skill_maker):
    skill = skill_maker({"sleep.py": "import time\ntime.sleep(60)\n"})
    code = f"""
import os, threading, time
from pathlib import Path
from ipyskills.sandbox.docker.backend import DockerBackend
from ipyskills.sandbox.request import RunRequest
req = RunRequest("s", Path({str(skill)!r}), "sleep.py")
threading.Thread(target=DockerBackend().run, args=(req,), daemon=True).start()
time.sleep(3)
running = DockerBackend().client().containers.list(ignore_removed=True, filters={{"label": "ipyskills.pid=" + str(os.getpid())}})
print("exiting with", len(running), flush=True)
"""
    from ipyskills.sandbox.docker.cleanup import LABEL, LABEL_PID

    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    out, err = proc.communicate(timeout=60)
    assert out.strip() == "exiting with 1", err  # the run was under way when the process exited
    left = docker_backend.client().containers.list(ignore_removed=True, 
        all=True, filters={"label": [f"{LABEL}=1", f"{LABEL_PID}={proc.pid}"]})
    assert left == []
