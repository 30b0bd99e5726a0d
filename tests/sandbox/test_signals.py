"""SIGTERM/SIGHUP end runs and drain the pool (real subprocesses on the shared engine) and end local runs
(process group killed, run folder removed); SIGKILL leaves strays that the next process's first start
removes; the handlers are installed when a backend is set up, chain, and respect SIG_IGN."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid

import pytest

from ipyskills.sandbox import signals as sig
from ipyskills.sandbox.docker import backend as db

docker = pytest.mark.docker

OWNER = textwrap.dedent("""
    import os, signal, sys, threading, time
    from ipyskills import SkillRegistry
    from ipyskills.settings import Settings
    from ipyskills.sandbox.docker import pool

    skill, mode = sys.argv[1], sys.argv[2]
    if mode == "user-handler":
        def mine(signum, frame):
            print("USER HANDLER", signum, flush=True)
            sys.exit(7)
        signal.signal(signal.SIGTERM, mine)
    reg = SkillRegistry([skill], settings=Settings().with_overrides(
        backend="docker", default_roots=False, bundled_skills=False, pool_size=2, timeout=120))
    reg.run("sleeper", "scripts/quick.py")  # starts the pool
    pool.pools()[0].warm(wait=20)
    def slow():
        try:
            reg.run("sleeper", "scripts/sleep.py")
        except BaseException as exc:
            print("run ended:", type(exc).__name__, flush=True)
    for _ in range(3):  # the first two take pooled containers, the third a fresh one
        threading.Thread(target=slow, daemon=True).start()
    time.sleep(3)
    print("READY", flush=True)
    time.sleep(120)
""")


def containers_of(client, pid: int) -> list:
    return client.containers.list(all=True, filters={"label": [f"{db.LABEL}=1", f"{db.LABEL_PID}={pid}"]},
                                  ignore_removed=True)


def wait_for(predicate, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.fixture
def sleeper(skill_maker):
    return skill_maker({"scripts/sleep.py": "import time\ntime.sleep(100)\n",
                        "scripts/quick.py": "print('ok')\n"}, name="sleeper")


def start_owner(sleeper, mode: str = "plain") -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(sleeper), mode], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.strip() == "READY", (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc


@docker
@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_signal_ends_runs_and_drains_pool(docker_backend, sleeper, signum):
    client = docker_backend.client()
    proc = start_owner(sleeper)
    try:
        assert len(containers_of(client, proc.pid)) >= 4  # 3 running (2 pooled, 1 fresh) + refilled pool
        proc.send_signal(signum)
        proc.wait(30)
        assert proc.returncode == -signum  # still dies by the signal, as without ipyskills
        assert containers_of(client, proc.pid) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for c in containers_of(client, proc.pid):
            c.remove(force=True)


@docker
@pytest.mark.slow
def test_sigterm_chains_to_the_users_handler(docker_backend, sleeper):
    client = docker_backend.client()
    proc = start_owner(sleeper, "user-handler")
    try:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        assert "USER HANDLER 15" in out
        assert proc.returncode == 7
        assert containers_of(client, proc.pid) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for c in containers_of(client, proc.pid):
            c.remove(force=True)


@docker
@pytest.mark.slow
def test_sigkill_strays_are_removed_by_the_next_start(docker_backend, sleeper):
    client = docker_backend.client()
    proc = start_owner(sleeper)
    try:
        proc.kill()
        proc.wait(10)
        # Nothing runs on SIGKILL: the containers end themselves (stdin closed, AutoRemove) or stay as
        # strays, which the next process to start a run removes (what `sandbox cleanup` does).
        nxt = subprocess.run([sys.executable, "-c", textwrap.dedent("""
            import time
            from ipyskills.sandbox.docker import backend as db
            db.shared_client()
            time.sleep(0.2)
            for t in __import__("threading").enumerate():
                if t.name == "ipyskills-startup-cleanup":
                    t.join(30)
        """)], capture_output=True, text=True, timeout=60, check=False)
        assert nxt.returncode == 0, nxt.stderr
        assert wait_for(lambda: containers_of(client, proc.pid) == [])
    finally:
        for c in containers_of(client, proc.pid):
            c.remove(force=True)


def test_install_keeps_ignored_signals_and_chains():
    previous_term = signal.getsignal(signal.SIGTERM)
    previous_hup = signal.getsignal(signal.SIGHUP)
    calls = []
    try:
        sig.uninstall()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
        signal.signal(signal.SIGTERM, lambda s, f: calls.append(s))
        installed = sig.install()
        assert signal.SIGHUP not in installed and signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert signal.SIGTERM in installed and signal.getsignal(signal.SIGTERM) is sig._handle
        assert sig.install() == []  # idempotent
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
        assert calls == [signal.SIGTERM]  # ours ran, then the previous handler
    finally:
        sig.uninstall()
        signal.signal(signal.SIGTERM, previous_term)
        signal.signal(signal.SIGHUP, previous_hup)


def test_install_outside_the_main_thread_does_nothing():
    result = []
    t = threading.Thread(target=lambda: result.append(sig.install()))
    t.start()
    t.join()
    assert result == [[]]


LOCAL_OWNER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from ipyskills.sandbox.local.backend import LocalBackend
    from ipyskills.sandbox.policy import Limits
    from ipyskills.sandbox.request import RunRequest

    LocalBackend().run(RunRequest(skill_name="sleeper", skill_dir=Path(sys.argv[1]), script="scripts/spawn.py",
                                  args=[sys.argv[2]], limits=Limits(timeout=60)))
""")


def marked(marker: str) -> list[str]:
    """Pids whose command line holds `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    found.append(entry)
        except OSError:
            continue
    return found


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_signal_ends_a_local_run_and_removes_its_folder(skill_maker, signum):
    """Without the handler the process dies by the signal with its run folder left for the next start (and,
    outside a pid namespace, the script's children running on in their own session)."""
    skill = skill_maker({"scripts/spawn.py": (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', sys.argv[1]])\n"
        "time.sleep(60)\n")}, name="sleeper")
    marker = f"ipyskills-signal-{uuid.uuid4().hex}"
    tmp = tempfile.mkdtemp(prefix="ipyskills-signal-test-")
    os.chmod(tmp, 0o1777)  # like /tmp: a run uid must reach its run folder inside
    proc = subprocess.Popen([sys.executable, "-c", LOCAL_OWNER, str(skill), marker],
                            env={**os.environ, "TMPDIR": tmp}, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: len(marked(marker)) >= 2), "the run did not start"  # the script and its child
        assert os.listdir(tmp), "no run folder"
        proc.send_signal(signum)
        proc.wait(30)
        assert proc.returncode == -signum, proc.stderr.read()  # still dies by the signal
        assert marked(marker) == []  # gone when the owner is, not later
        assert os.listdir(tmp) == []  # the run folder went with it, not at the next start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in marked(marker):
            with __import__("contextlib").suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)


def test_setting_up_a_backend_installs_the_handlers():
    from ipyskills.sandbox.docker.backend import DockerBackend
    from ipyskills.sandbox.local.backend import LocalBackend

    previous = {s: signal.getsignal(s) for s in sig.SIGNALS}
    try:
        for make in (LocalBackend, DockerBackend):  # neither talks to an engine or runs anything here
            sig.uninstall()
            for s in sig.SIGNALS:  # an earlier test may have put ours back by hand
                signal.signal(s, signal.SIG_DFL)
            make()
            assert all(signal.getsignal(s) is sig._handle for s in sig.SIGNALS)
    finally:
        sig.uninstall()
        for s, handler in previous.items():
            signal.signal(s, handler)
