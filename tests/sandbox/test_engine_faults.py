"""Faults of the Docker engine itself, on a private engine (private_engine.py) these tests start, load the
sandbox image into once per session, stop and restart at will, and remove afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from ipyskills import SkillError, SkillRegistry
from ipyskills.errors import SandboxError
from ipyskills.sandbox.docker import backend as db
from ipyskills.sandbox.docker import cleanup as dc
from ipyskills.sandbox.docker import pool as pool_mod
from ipyskills.settings import Settings

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture
def on_private(private_engine, monkeypatch):
    """This process talks to the private engine; at the end nothing of ours may be left on it."""
    if private_engine.proc is None:
        private_engine.start()
    monkeypatch.setenv("DOCKER_HOST", private_engine.host)
    yield private_engine
    pool_mod.drain_all()
    assert dc.flush_removals(timeout=30)
    client = db.shared_client()
    assert dc.heal(client, everything=True)
    assert private_engine.containers(os.getpid()) == [], listing(private_engine)


def listing(engine) -> str:
    """What is on the engine, and what its log says about those containers, for a failure's message."""
    out = subprocess.run(["docker", "-H", engine.host, "ps", "-a", "--format", "{{.ID}} {{.Status}} {{.Labels}}"],
                          capture_output=True, text=True, check=False).stdout
    ids = [line.split()[0] for line in out.splitlines() if line.strip()]
    log = (engine.root / "dockerd.log").read_text(errors="replace").splitlines()  # the engine on them
    return out + "\n".join(line for line in log if any(i in line for i in ids))[-6000:]


@pytest.fixture
def skill(skill_maker):
    return skill_maker({"scripts/sleep.py": "import time\ntime.sleep(60)\nprint('slept')\n",
                        "scripts/echo.py": "import sys\nprint(sys.stdin.read())\n"}, name="faulty")


def wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_engine_restart_mid_batch(on_private, skill):
    engine = on_private
    reg = SkillRegistry([str(skill)], settings=Settings().with_overrides(
        backend="docker", default_roots=False, bundled_skills=False, pool_size=2, timeout=60))
    assert reg.run("faulty", "scripts/echo.py", stdin="before").stdout.strip() == "before"
    pool_mod.pools()[0].warm(wait=20)
    outcomes: list = []

    def slow():
        try:
            outcomes.append(reg.run("faulty", "scripts/sleep.py"))
        except BaseException as exc:  # noqa: BLE001 - what the test checks
            outcomes.append(exc)

    threads = [threading.Thread(target=slow) for _ in range(4)]  # 2 pooled, 2 fresh
    for t in threads:
        t.start()
    time.sleep(2.5)
    engine.stop()
    for t in threads:
        t.join(60)
    assert len(outcomes) == 4
    # Every in-flight run ends in a SandboxError that names the engine: no raw exception, no result
    # (a container the stopping engine killed is not an out-of-memory kill, nor the script's exit 137).
    assert all(isinstance(o, SandboxError) for o in outcomes), outcomes
    assert all(engine.host in str(o) for o in outcomes), [str(o) for o in outcomes]
    with pytest.raises(SkillError):  # while it is down: a SkillError that says so
        reg.run("faulty", "scripts/echo.py", stdin="during")

    engine.start()
    result = reg.run("faulty", "scripts/echo.py", stdin="after")  # the next run works
    assert result.exit_code == 0 and result.stdout.strip() == "after"
    # The containers whose removal failed during the outage go without anyone asking: what is left of
    # this process on the engine is the warm pool's idle containers.
    def only_pool_left():
        idle = {cid[:12] for pool in pool_mod.pools() for cid in pool.idle_ids()}
        return not dc._unremoved and set(engine.containers(os.getpid())) <= idle

    assert wait_for(only_pool_left), (listing(engine), pool_mod.pools()[0].status(), dc._unremoved, dc._live)


def test_owner_exits_while_engine_is_down(on_private, skill):
    engine = on_private
    owner = textwrap.dedent("""
        import sys, threading, time
        from ipyskills import SkillRegistry
        from ipyskills.settings import Settings
        reg = SkillRegistry([sys.argv[1]], settings=Settings().with_overrides(
            backend="docker", default_roots=False, bundled_skills=False, pool_size=2, timeout=60))
        reg.run("faulty", "scripts/echo.py", stdin="x")
        threading.Thread(target=lambda: reg.run("faulty", "scripts/sleep.py"), daemon=True).start()
        time.sleep(2)
        print("READY", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", owner, str(skill)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "DOCKER_HOST": engine.host})
    try:
        assert proc.stdout.readline().strip() == "READY"
        assert engine.containers(proc.pid)
        engine.stop()
        proc.send_signal(signal.SIGTERM)  # its clean-up cannot reach the engine
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    engine.start()
    # Its containers either removed themselves (AutoRemove, as the engine restarted) or are strays: the
    # next process that starts a run on this engine removes those of owners that are gone.
    dc._cleanup_quietly(db.docker_client.connect())
    assert wait_for(lambda: engine.containers(proc.pid) == [])
