"""Each claim of the local backend's isolation line, tried for real by a script, as root and as an ordinary
user (uid 1000, as on Binder, with a venv made from the system Python, so the venv's prefix and its base
installation are what Landlock has to let through).

The probe tries: reading a world-readable file outside the run, writing a world-writable folder outside it,
reading a host process's command line, connecting to a TCP server on the host's loopback, signalling a host
process, and holding more memory in all than the per-run limit. Whatever the line claims must hold; whatever
it says is NOT isolated is checked to be true as well (so the line does not under-claim by mistake either).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
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
    SkillFactory,
    as_user,
    assert_network_blocked_where_possible,
    landlock_abi,
    namespace_refusal,
    user_venv,
)

REPO = str(Path(__file__).resolve().parents[2])
USER_UID = 1000

PROBE = textwrap.dedent("""
    import json, os, signal, socket, sys
    secret, drop, victim, port, per_child = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    out = {}
    def attempt(name, fn):
        try:
            out[name] = ["ok", str(fn())[:80]]
        except Exception as exc:
            out[name] = ["denied", type(exc).__name__ + ": " + str(exc)[:80]]
    attempt("read_outside", lambda: open(secret).read())
    attempt("write_outside", lambda: open(os.path.join(drop, "planted"), "w").write("x"))
    attempt("cmdline", lambda: open(f"/proc/{victim}/cmdline", "rb").read().replace(b"\\0", b" ").decode())
    attempt("any_cmdline", lambda: sum(1 for p in os.listdir("/proc") if p.isdigit()
                                       and b"ipyskills-victim" in open(f"/proc/{p}/cmdline", "rb").read()))
    def connect():
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(b"leak")
        s.close()
    attempt("connect", connect)
    attempt("signal", lambda: os.kill(victim, signal.SIGTERM))
    def memory():
        pids = []
        for _ in range(3):
            pid = os.fork()
            if pid == 0:
                block = bytearray(per_child)  # touched: zero-filled pages are written
                for i in range(0, per_child, 4096):
                    block[i] = 1
                __import__("time").sleep(1)  # held: a watchdog that samples must see it
                os._exit(0)
            pids.append(pid)
        return [os.WEXITSTATUS(os.waitpid(p, 0)[1]) for p in pids]
    attempt("write_run_tmp", lambda: open(os.path.join(os.environ["TMPDIR"], "x"), "w").write("ok"))
    print(json.dumps(out), flush=True)  # before the memory test, which may end the run
    attempt("memory", memory)
    print(json.dumps(out))
""")

DRIVER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from ipyskills.sandbox.local.backend import LocalBackend
    from ipyskills.sandbox.policy import Limits
    from ipyskills.sandbox.request import RunRequest
    request = RunRequest(skill_name="probe", skill_dir=Path(sys.argv[1]), script="scripts/probe.py",
                         args=sys.argv[2:], limits=Limits(timeout=30, memory=256 * 1024**2))
    result = LocalBackend().run(request)
    print(json.dumps({"stdout": result.stdout, "stderr": result.stderr, "isolation": result.isolation,
                      "oom_killed": result.oom_killed, "exit_code": result.exit_code}))
""")


@pytest.fixture(scope="module")
def user_python():
    """A venv for uid 1000 made from /usr/bin/python3, with this checkout on its path (like an editable
    install); the account is created when no uid 1000 exists. Removed after the module."""
    with user_venv() as python:
        yield python


@pytest.fixture
def host():
    """Things outside the run: a secret file, a world-writable folder, a process whose command line holds a
    token, a TCP server on 127.0.0.1."""
    base = Path(f"/var/tmp/ipyskills-test-host-{uuid.uuid4().hex}")
    base.mkdir()
    os.chmod(base, 0o755)
    secret = base / "secret.txt"
    secret.write_text("host secret")
    os.chmod(secret, 0o644)
    drop = base / "drop"
    drop.mkdir()
    os.chmod(drop, 0o777)
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "ipyskills-victim",
                               "--token=s3cr3t"])
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.settimeout(0.2)
    seen, stop = [], threading.Event()

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
    yield {"secret": str(secret), "drop": drop, "victim": victim, "port": server.getsockname()[1], "seen": seen}
    stop.set()
    thread.join(2)
    server.close()
    victim.kill()
    victim.wait()
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("who", ["root", "uid1000"])
def test_every_claim_of_the_line_holds_and_every_gap_is_real(who, host, request):
    if who == "root" and not AS_ROOT:
        pytest.skip("runs as the current user only")
    factory = SkillFactory()
    request.addfinalizer(factory.cleanup)
    skill = factory({"scripts/probe.py": PROBE}, name="probe")
    per_child = 150 * 1024**2  # three of these: more than the run's 256 MiB in all
    args = [host["secret"], str(host["drop"]), str(host["victim"].pid), str(host["port"]), str(per_child)]
    if who == "root":
        python, popen = sys.executable, {}
    else:
        python, popen = str(request.getfixturevalue("user_python")), as_user()
    done = subprocess.run([python, "-c", DRIVER, str(skill), *args], capture_output=True, text=True, timeout=90,
                          check=False, **popen)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    iso = out["isolation"]
    lines = out["stdout"].splitlines()
    probe = json.loads(lines[-1])
    assert probe["write_run_tmp"][0] == "ok"  # the run's own folder stays writable
    if "writes only the run folder" in iso:
        assert probe["read_outside"][0] == "denied" and probe["write_outside"][0] == "denied", probe
    else:
        assert "filesystem reads" in iso
    assert not (host["drop"] / "planted").exists() or "writes only the run folder" not in iso
    if "host processes: not visible" in iso or "host processes: /proc not readable" in iso:
        assert probe["cmdline"][0] == "denied", probe
        assert probe["any_cmdline"][0] == "denied" or probe["any_cmdline"] == ["ok", "0"], probe
        assert "s3cr3t" not in json.dumps(probe)
    else:
        assert "host processes: command lines readable" in iso
    # What this kernel lets this user do is demanded, not just believed: the network blocked, the pid
    # view private, wherever the namespaces (or Landlock) are allowed.
    probe_popen = {"prefix": [python], **popen}
    assert_network_blocked_where_possible(iso, probe["connect"][0] == "ok", host["seen"],
                                          namespace_refusal(CLONE_NEWNET, **probe_popen), landlock_abi())
    if not namespace_refusal(CLONE_NEWPID, **probe_popen):
        assert "processes: pid namespace, all killed at the end" in iso, iso
        if not namespace_refusal(CLONE_NEWPID | CLONE_NEWNS, **probe_popen):
            assert "host processes: not visible (private /proc)" in iso, iso
            assert probe["any_cmdline"] == ["ok", "0"], probe  # /proc lists the run's processes only
    if "signals and abstract unix sockets: the run's own only" in iso or "processes: pid namespace" in iso:
        assert probe["signal"][0] == "denied", probe
    assert host["victim"].poll() is None  # the host process lives on
    if "total memory: NOT limited (per process 256 MiB" in iso:
        assert probe["memory"] == ["ok", "[0, 0, 0]"], probe  # the truth behind "NOT limited"
    elif "total memory: 256 MiB (all the run's processes' resident memory, watched every" in iso:
        assert len(lines) == 1 and out["oom_killed"] and out["exit_code"] == 137, out  # ended mid-climb
    else:
        assert "total memory: 256 MiB (cgroup v2)" in iso
        assert probe["memory"][1] != "[0, 0, 0]", probe
    # Where this kernel has Landlock, everything above is claimed, for root and non-root alike.
    if os.path.exists("/sys/kernel/security/landlock") or landlock_abi() >= 6:
        for claim in ("writes only the run folder", "signals and abstract unix sockets: the run's own only"):
            assert claim in iso, iso
        assert "host processes: command lines readable" not in iso


OWNER = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from ipyskills.sandbox.local.backend import LocalBackend
    from ipyskills.sandbox.policy import Limits
    from ipyskills.sandbox.request import RunRequest
    LocalBackend().run(RunRequest(skill_name="probe", skill_dir=Path(sys.argv[1]), script="scripts/sleep.py",
                                  args=[os.environ["MARKER"]], limits=Limits(timeout=60)))
""")


def test_a_killed_owner_takes_its_run_along_and_its_folder_goes_at_the_next_start(request):
    import tempfile

    from ipyskills.sandbox.local.confine import remove_stale
    from ipyskills.sandbox.local.run_files import remove_tree

    factory = SkillFactory()
    request.addfinalizer(factory.cleanup)
    marker = f"ipyskills-sleeper-{uuid.uuid4().hex}"
    skill = factory({"scripts/sleep.py": "import time\ntime.sleep(60)\n"}, name="probe")
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(skill)], cwd=REPO, env={**os.environ, "MARKER": marker})

    def marked(script_only=False):
        found = []
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    cmdline = fh.read()
            except OSError:
                continue
            # The helper's own command line carries the marker too (in its spec and program): only the
            # script itself proves the run has started, and killing the owner earlier tests nothing.
            if marker.encode() in cmdline and not (script_only and b"isolation.py" in cmdline):
                found.append(entry)
        return found

    deadline = time.monotonic() + 15
    while not marked(script_only=True) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marked(script_only=True), "the run did not start"
    owner.kill()
    owner.wait()
    deadline = time.monotonic() + 5
    while marked() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not marked(), "the run outlived its owner"
    root = os.environ.get("TMPDIR") or tempfile.gettempdir()
    left = [n for n in os.listdir(root) if n.startswith(f"ipyskills-local-{owner.pid}-")]
    assert left  # SIGKILL leaves the owner no time to clean up ...
    removed = remove_stale(remove_tree)  # ... so the next start (or `ipyskills sandbox cleanup`) does
    assert all(os.path.join(root, n) in removed for n in left)
    assert not [n for n in os.listdir(root) if n.startswith(f"ipyskills-local-{owner.pid}-")]
