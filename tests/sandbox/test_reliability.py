"""Reliability under load, on the shared engine: many threads on one registry, every failure a SkillError,
no container untracked (a create whose reply is lost is found by its label), the guard's parse and the
docker client safe under threads; a stuck engine (a fake one that never answers) ends a run with a
SandboxError by its deadline. Faults on a private engine are in test_engine_faults.py."""

from __future__ import annotations

import json
import os
import secrets
import socketserver
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from ipyskills import SkillError, SkillRegistry
from ipyskills.errors import SandboxError
from ipyskills.sandbox.docker import backend as db
from ipyskills.sandbox.docker import cleanup as dc
from ipyskills.sandbox.docker import containers as dcont
from ipyskills.sandbox.docker import pool as pool_mod
from ipyskills.settings import Settings

docker = pytest.mark.docker

ECHO = "import sys\ndata = sys.stdin.read()\nprint(data)\n"


def wait_for(predicate, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def ours(client, pid: int | None = None) -> list:
    return client.containers.list(all=True, filters={"label": [f"{dc.LABEL}=1", f"{dc.LABEL_PID}={pid or os.getpid()}"]},
                                  ignore_removed=True)


def test_guard_parse_is_thread_safe():
    from ipyskills.sandbox.guard import check_source

    # Deep nesting makes the AST conversion recurse, where CPython 3.11's unlocked parse goes wrong.
    source = "x = " + "(" * 90 + "1" + ")" * 90 + "\n" + "def f(a):\n    return eval('[[[[1]]]]')\n" * 40
    errors = []

    def work():
        try:
            for _ in range(60):
                check_source(source, "python")
        except Exception as exc:  # noqa: BLE001 - any exception is the failure under test
            errors.append(repr(exc))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@docker
def test_unix_client_keeps_one_connection_pool(docker_backend):
    client = db.shared_client()
    if not str(client.api.base_url).startswith("http+docker://"):
        pytest.skip("not a unix-socket engine")
    for _ in range(30):  # 30 distinct per-container URLs: docker-py alone would make 30 pools and evict
        with pytest.raises(Exception):  # noqa: B017 - NotFound
            client.api.inspect_container(secrets.token_hex(32))
    assert len(client.api._custom_adapter.pools) <= 2


@docker
@pytest.mark.slow
def test_16_threads_x_20_runs_unique_tokens(docker_backend, skill_maker):
    skill = skill_maker({"scripts/echo.py": ECHO}, name="echo")
    reg = SkillRegistry([str(skill)], settings=Settings().with_overrides(
        backend="docker", default_roots=False, bundled_skills=False, pool_size=2, timeout=60))
    outcomes: Counter = Counter()
    wrong, raw = [], []

    errors = []

    def worker(n: int):
        for i in range(20):
            token = f"tok-{n}-{i}-{secrets.token_hex(8)}"
            try:
                result = reg.run("echo", "scripts/echo.py", stdin=token)
            except SkillError as exc:
                outcomes["skill_error"] += 1
                outcomes[type(exc).__name__] += 1
                errors.append(str(exc)[:200])
                continue
            except Exception as exc:  # noqa: BLE001 - what the test counts
                raw.append(f"{type(exc).__name__}: {exc}")
                continue
            if result.stdout.strip() != token or result.exit_code != 0:
                wrong.append((token, result.stdout[:200], result.exit_code))
            else:
                outcomes["ok"] += 1

    started = time.monotonic()
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(worker, range(16)))
    print(f"16 x 20 runs: {dict(outcomes)} in {time.monotonic() - started:.1f} s")  # seen with -s
    assert raw == [], raw[:5]
    assert wrong == [], wrong[:5]
    assert outcomes["ok"] >= 300, (outcomes, errors[:5])  # a few SandboxErrors under load are allowed
    pool_mod.drain_all()
    assert dc.flush_removals(timeout=60)
    assert ours(docker_backend.client()) == []


@docker
def test_lost_create_reply_is_found_and_removed(docker_backend, monkeypatch):
    import requests

    from ipyskills.sandbox.policy import Limits

    client = db.docker_client.connect()
    real = client.api.create_container_from_config

    def create_then_lose(*args, **kwargs):
        real(*args, **kwargs)  # the engine made it ...
        raise requests.exceptions.ConnectionError("connection reset (simulated)")  # ... the reply was lost

    monkeypatch.setattr(client.api, "create_container_from_config", create_then_lose)
    with pytest.raises(SandboxError, match="no Docker engine answers"):
        dcont.create_container(client, docker_backend.image, Limits(), skill_dir=None, skill_bytes=0)
    assert dc._lost, "the lost create was not recorded"
    assert len(ours(client)) == 1
    dc.heal(client)  # what the background healer (already woken) does once the engine answers
    assert wait_for(lambda: ours(client) == [] and not dc._lost)


@docker
def test_unexpected_client_error_is_a_sandbox_error(docker_backend, monkeypatch):
    from ipyskills.sandbox.policy import Limits

    client = db.docker_client.connect()

    def broken(*args, **kwargs):
        raise AttributeError("'NoneType' object has no attribute 'qsize'")

    monkeypatch.setattr(client.api, "create_container_from_config", broken)
    with pytest.raises(SandboxError, match="AttributeError"):
        dcont.create_container(client, docker_backend.image, Limits(), skill_dir=None, skill_bytes=0)
    dc.heal(client)
    assert wait_for(lambda: not dc._lost)


@docker
def test_failed_removal_is_retried_in_the_background(docker_backend, monkeypatch):
    from ipyskills.sandbox.policy import Limits

    client = db.docker_client.connect()
    cid = dcont.create_container(client, docker_backend.image, Limits(), skill_dir=None, skill_bytes=0)
    real = client.api.remove_container
    calls = []

    def fail_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("engine away (simulated)")
        return real(*args, **kwargs)

    monkeypatch.setattr(client.api, "remove_container", fail_once)
    assert dc._remove(client, cid) is False
    assert cid in dc._unremoved
    assert wait_for(lambda: cid not in dc._unremoved and cid not in dc._live)
    assert wait_for(lambda: ours(client) == [])


@docker
def test_a_removal_already_in_progress_is_seen_through(docker_backend, monkeypatch):
    """The engine answers 409 "already in progress" when it is removing the container itself (AutoRemove,
    its clean-up after a restart); that removal can fail and leave it "Dead", so it counts only once
    the container is seen gone, and otherwise the healer removes it."""
    import docker.errors

    from ipyskills.sandbox.policy import Limits

    client = db.docker_client.connect()
    cid = dcont.create_container(client, docker_backend.image, Limits(), skill_dir=None, skill_bytes=0)
    real = client.api.remove_container
    calls = []

    def in_progress_but_stuck(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # the engine's own removal, which then never finishes
            raise docker.errors.APIError(f"removal of container {cid} is already in progress")
        return real(*args, **kwargs)

    monkeypatch.setattr(client.api, "remove_container", in_progress_but_stuck)
    monkeypatch.setattr(dc, "REMOVING_WAIT", 0.5)
    assert dc._remove(client, cid) is True  # being removed: not a failure ...
    assert cid in dc._unremoved  # ... but not forgotten until it is gone
    assert wait_for(lambda: cid not in dc._unremoved and ours(client) == [])


@docker
def test_first_start_removes_containers_of_dead_owners(docker_backend):
    client = docker_backend.client()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(dead.stdout)
    created = client.api.create_container(
        docker_backend.image, command=["true"],
        labels={dc.LABEL: "1", dc.LABEL_PID: str(dead_pid), dc.LABEL_HOST: __import__("socket").gethostname()})
    try:
        dc._cleanup_quietly(client)  # what the first start runs in the background
        assert not client.containers.list(ignore_removed=True, all=True, filters={"id": created["Id"]})
    finally:
        try:
            client.api.remove_container(created["Id"], force=True)
        except Exception:  # noqa: BLE001,S110 - already gone, as it should be
            pass


@docker
@pytest.mark.slow
def test_pool_grows_to_the_burst_and_shrinks_back(docker_backend, monkeypatch):
    from ipyskills.sandbox.policy import Limits

    client = docker_backend.client()
    pool = pool_mod.ContainerPool(client, docker_backend.image, Limits(), size=1, max_size=4)
    taken = []
    try:
        pool.warm(wait=30)
        for _ in range(4):  # a burst of 4 parallel calls: one warm, three misses
            warm = pool.take()
            if warm is not None:
                taken.append(warm)
        assert pool.target() == 4
        pool.refill()
        assert wait_for(lambda: len(pool.idle_ids()) == 4, timeout=60), pool.status()
        assert pool.status()["starting"] == 0
        monkeypatch.setattr(pool_mod, "SHRINK_AFTER", 0.5)  # the burst is old: back to size 1
        with pool._cond:
            pool._cond.notify_all()
        assert wait_for(lambda: len(pool.idle_ids()) == 1, timeout=30), pool.status()
    finally:
        for warm in taken:
            pool_mod._close(warm)
            dc._remove(client, warm.id)
        pool.drain()
    assert dc.flush_removals(timeout=30)


class _StuckEngine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """An engine on a unix socket that creates containers and then never answers anything else, as a
    daemon whose runc hangs does."""

    daemon_threads = True

    def __init__(self, path: str):
        self.release = threading.Event()
        super().__init__(path, self._Handler)

    class _Handler(socketserver.StreamRequestHandler):
        def handle(self):
            line = self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # the headers (the create's JSON body is never read: the reply does not need it)
            if b"/containers/create" in line:
                body = json.dumps({"Id": "f" * 64, "Warnings": []}).encode()
                self.wfile.write(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: "
                                 + str(len(body)).encode() + b"\r\n\r\n" + body)
                return
            self.server.release.wait(120)  # attach, start, remove, ping: stuck


def test_a_stuck_engine_ends_the_run_with_a_sandbox_error_by_its_deadline(monkeypatch, skill_maker, tmp_path):
    import docker as docker_py

    from ipyskills.sandbox.policy import Limits
    from ipyskills.sandbox.request import RunRequest

    path = str(tmp_path / "stuck.sock")
    engine = _StuckEngine(path)
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    client = docker_py.DockerClient(base_url=f"unix://{path}", version="1.41", timeout=60)
    client.ipyskills_endpoint = f"unix://{path}"
    monkeypatch.setattr(db, "ENGINE_GRACE", 2.0)
    skill = skill_maker({"scripts/echo.py": ECHO}, name="echo")
    backend = db.DockerBackend(client=client, skill_transfer="mount")
    request = RunRequest(skill_name="echo", skill_dir=skill, script="scripts/echo.py", stdin=b"x",
                         limits=Limits(timeout=1))
    started = time.monotonic()
    try:
        with pytest.raises(SandboxError, match=f"engine at unix://{path} did not start the sandbox container in time"):
            backend.run(request)
        elapsed = time.monotonic() - started
        assert elapsed < 1 + 2 + 2.5, elapsed  # timeout + ENGINE_GRACE, plus the removal's minimum call
        assert "f" * 64 in dc._unremoved  # not forgotten: the healer removes it once the engine answers
    finally:
        engine.release.set()
        engine.shutdown()
        engine.server_close()
        with dc._live_lock:  # the fake engine's container exists nowhere: stop the healer trying
            dc._live.pop("f" * 64, None)
            dc._unremoved.pop("f" * 64, None)
        with dc._remover_lock:
            dc._heal_clients.pop(f"unix://{path}", None)
