"""SIGTERM/SIGHUP end runs and drain the pool (real subprocesses on the shared engine); SIGKILL leaves
strays that the next process's first start removes; the handlers chain and respect SIG_IGN."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

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
