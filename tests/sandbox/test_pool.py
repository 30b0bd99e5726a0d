"""The warm container pool, against the real engine: same results as a fresh container, never reused,
refilled, bypassed for other limits, drained on every way out; plus the report parsing it relies on."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import docker.errors as docker_errors
import pytest

from ipyskills.errors import ConfigError
from ipyskills.sandbox.docker import pool as pool_mod
from ipyskills.sandbox.docker.backend import DockerBackend, cached_skill_tar
from ipyskills.sandbox.docker.backend import warm as db_warm
from ipyskills.sandbox.docker.cleanup import LABEL, LABEL_PID, LABEL_POOL, cleanup, flush_removals
from ipyskills.sandbox.docker.containers import create_container, start_attached
from ipyskills.sandbox.docker.stream import _StreamReader
from ipyskills.sandbox.policy import Limits
from ipyskills.sandbox.request import RunRequest
from ipyskills.sandbox.result import OutputBuffer
from ipyskills.settings import Settings

docker = pytest.mark.docker

# Everything a run can observe, so a pooled and a fresh container can be compared field by field.
PROBE = r"""
import json, os, socket, sys
data = sys.stdin.buffer.read()
try:
    open("/etc/probe", "w")
    root = "writable"
except OSError:
    root = "read-only"
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    net = "reachable"
except OSError:
    net = "unreachable"
ifaces = sorted(name for _, name in socket.if_nameindex())
with open(os.path.join(os.environ["IPYSKILLS_OUTPUT"], "out.bin"), "wb") as fh:
    fh.write(data[::-1])
print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "root": root, "net": net, "ifaces": ifaces,
                  "stdin": data.hex(), "args": sys.argv[1:], "cwd": os.getcwd(),
                  "skill": sorted(os.listdir("/skill"))}))
print("to stderr", file=sys.stderr)
sys.exit(3)
"""

SEEN = """import os, socket
print(socket.gethostname())
print("seen" if os.path.exists("/tmp/marker") or os.listdir(os.environ["IPYSKILLS_OUTPUT"]) else "clean")
open("/tmp/marker", "w").write("x")
open(os.path.join(os.environ["IPYSKILLS_OUTPUT"], "left.txt"), "w").write("x")
"""


def our_containers(client, pid: int | None = None, pooled: bool | None = None) -> list:
    labels = [f"{LABEL}=1", f"{LABEL_PID}={pid or os.getpid()}"]
    if pooled:
        labels.append(f"{LABEL_POOL}=1")
    return client.containers.list(ignore_removed=True, all=True, filters={"label": labels})


def gone(client, short_id: str) -> bool:
    return not client.containers.list(ignore_removed=True, all=True, filters={"id": short_id})


@pytest.fixture
def pooled(docker_backend):
    """A DockerBackend with a warm pool of 2 (started and full), drained afterwards."""
    backend = DockerBackend(image=docker_backend.image, client=docker_backend.client(), pool_size=2)
    pool = backend.pool(backend.client(), backend.image)
    assert pool.warm(wait=30) == 2, pool.status()
    yield backend, pool
    pool_mod.drain_all()


def wait_full(pool, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while len(pool.idle_ids()) < pool.size:
        assert time.monotonic() < deadline, f"the pool did not refill: {pool.status()}"
        time.sleep(0.05)


def request(skill: Path, script: str, **kw) -> RunRequest:
    limits = kw.pop("limits", Limits())
    return RunRequest(skill.name, skill, script, limits=limits, **kw)


@docker
def test_pooled_run_gives_the_same_result_as_a_fresh_one(pooled, docker_backend, skill_maker):
    backend, pool = pooled
    skill = skill_maker({"scripts/probe.py": PROBE, "data/notes.txt": "n"})
    stdin = bytes(range(256)) + b"\r\n\x00end"
    req = request(skill, "scripts/probe.py", args=["a b", "-x"], stdin=stdin)
    warm = backend.run(req)
    fresh = docker_backend.run(req)
    assert pool.taken == 1
    assert warm.isolation.startswith("docker (warm pool): uid 1000, no capabilities, no-new-privileges, "
                                     "read-only root, network none")
    assert fresh.isolation.startswith("docker: uid 1000")
    for result in (warm, fresh):
        assert result.exit_code == 3 and not result.timed_out and not result.oom_killed
        assert result.stderr == "to stderr\n"
        assert [(a.path, a.data) for a in result.artifacts] == [("out.bin", stdin[::-1])]
    import json

    seen_warm, seen_fresh = json.loads(warm.stdout), json.loads(fresh.stdout)
    assert seen_warm == seen_fresh
    assert seen_warm["uid"] == seen_warm["gid"] == 1000
    assert seen_warm["root"] == "read-only" and seen_warm["net"] == "unreachable" and seen_warm["ifaces"] == ["lo"]
    assert bytes.fromhex(seen_warm["stdin"]) == stdin and seen_warm["args"] == ["a b", "-x"]
    assert seen_warm["cwd"] == "/work" and seen_warm["skill"] == ["SKILL.md", "data", "scripts"]


@docker
def test_a_pooled_container_is_never_used_twice(pooled, skill_maker):
    backend, pool = pooled
    skill = skill_maker({"seen.py": SEEN})
    client = backend.client()
    hosts = []
    for _ in range(4):
        result = backend.run(request(skill, "seen.py"))
        assert result.isolation.startswith("docker (warm pool)"), pool.status()
        host, state = result.stdout.split()
        assert state == "clean"  # nothing from an earlier run: /tmp and the output folder are new
        hosts.append(host)
        wait_full(pool)
    assert len(set(hosts)) == 4
    assert flush_removals()
    assert all(gone(client, host) for host in hosts)  # removed once used
    assert pool.taken == 4


@docker
def test_runs_with_other_limits_bypass_the_pool(pooled, skill_maker):
    backend, pool = pooled
    skill = skill_maker({"x.py": "print('ok')"})
    idle = set(pool.idle_ids())
    other = backend.run(request(skill, "x.py", limits=Limits(memory="128m")))
    networked = backend.run(request(skill, "x.py", limits=Limits(network=True)))
    for result in (other, networked):
        assert result.stdout == "ok\n" and result.isolation.startswith("docker: ")
    assert set(pool.idle_ids()) == idle and pool.taken == 0
    # The timeout and output caps are not fixed at creation: such runs still use the pool.
    same = backend.run(request(skill, "x.py", limits=Limits(timeout=12, output_cap=1000)))
    assert same.isolation.startswith("docker (warm pool)") and pool.taken == 1


@docker
def test_timeout_kills_a_pooled_run_and_removes_it(pooled, skill_maker):
    backend, pool = pooled
    skill = skill_maker({"spin.py": "import socket\nprint(socket.gethostname(), flush=True)\nwhile True: pass\n"})
    started = time.monotonic()
    result = backend.run(request(skill, "spin.py", limits=Limits(timeout=2)))
    assert 1.9 <= time.monotonic() - started < 8
    assert result.timed_out and result.exit_code is None and pool.taken == 1
    assert gone(backend.client(), result.stdout.split()[0])  # removed before run() returned


@docker
def test_refill_replaces_the_used_container_in_the_background(pooled, skill_maker):
    backend, pool = pooled
    skill = skill_maker({"x.py": "print('ok')"})
    before = set(pool.idle_ids())
    result = backend.run(request(skill, "x.py"))
    assert result.isolation.startswith("docker (warm pool)")
    wait_full(pool)
    after = set(pool.idle_ids())
    assert len(after) == 2 and len(before & after) == 1  # one used and replaced, one still waiting


@docker
def test_back_to_back_runs_never_wait_for_the_pool(docker_backend, skill_maker):
    backend = DockerBackend(image=docker_backend.image, client=docker_backend.client(), pool_size=1)
    pool = backend.pool(backend.client(), backend.image)
    try:
        assert pool.warm(wait=30) == 1
        skill = skill_maker({"x.py": "print('ok')"})
        first = backend.run(request(skill, "x.py"))
        second = backend.run(request(skill, "x.py"))  # the refill has just begun: a fresh container
        assert first.isolation.startswith("docker (warm pool)")
        assert second.isolation.startswith("docker: ") and second.stdout == "ok\n"
        assert pool.missed == 1
    finally:
        pool_mod.drain_all()


@docker
def test_dead_or_stale_containers_are_discarded_not_used(pooled, skill_maker):
    backend, pool = pooled
    client = backend.client()
    skill = skill_maker({"x.py": "print('ok')"})
    first, second = pool.idle_ids()
    client.api.kill(first)  # its launcher is gone
    deadline = time.monotonic() + 10
    while client.api.inspect_container(first)["State"]["Running"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    result = backend.run(request(skill, "x.py"))
    assert result.stdout == "ok\n" and result.isolation.startswith("docker (warm pool)")
    assert pool.discarded == 1 and pool.taken == 1
    assert second not in pool.idle_ids()  # the live one served the run
    wait_full(pool)
    pool.max_idle = 0.2  # now every waiting container is too old
    time.sleep(0.5)
    stale = pool.idle_ids()
    result = backend.run(request(skill, "x.py"))
    assert result.isolation.startswith("docker: ") and pool.taken == 1
    assert flush_removals()
    assert all(gone(client, c[:12]) for c in [first, *stale])


@docker
def test_drain_removes_every_pooled_container(pooled, skill_maker):
    backend, pool = pooled
    client = backend.client()
    assert len(our_containers(client, pooled=True)) == 2
    assert pool_mod.drain_all() == 2
    assert flush_removals()
    assert our_containers(client, pooled=True) == []
    assert pool.refill() is None and pool.status()["idle"] == 0  # a drained pool stays empty
    # The next run makes a new pool lazily, after that run.
    result = backend.run(request(skill_maker({"x.py": "print(1)"}), "x.py"))
    assert result.isolation.startswith("docker: ") and result.stdout == "1\n"
    new = backend.pool(client, backend.image)
    assert new is not pool
    wait_full(new)


@docker
def test_keyboard_interrupt_mid_pooled_run_leaves_nothing(pooled, skill_maker):
    import _thread

    backend, pool = pooled
    skill = skill_maker({"sleep.py": "import socket, time\nprint(socket.gethostname(), flush=True)\n"
                                     "time.sleep(60)\n"})
    timer = threading.Timer(2.0, _thread.interrupt_main)
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        backend.run(request(skill, "sleep.py", limits=Limits(timeout=60)))
    timer.cancel()
    assert time.monotonic() - started < 10 and pool.taken == 1
    # the autouse fixture drains the pool and asserts no labelled container of this process is left


def _child(code: str, skill: Path, *, stdout=subprocess.PIPE):
    prelude = textwrap.dedent(f"""
        import os, sys, time
        from pathlib import Path
        from ipyskills.sandbox.docker import pool
        from ipyskills.sandbox.docker.backend import DockerBackend
        from ipyskills.sandbox.policy import Limits
        from ipyskills.sandbox.request import RunRequest
        backend = DockerBackend(pool_size=2)
        warm = backend.pool(backend.client(), backend.image)
        req = RunRequest("s", Path({str(skill)!r}), "x.py", limits=Limits())
    """)
    return subprocess.Popen([sys.executable, "-c", prelude + textwrap.dedent(code)], stdout=stdout,
                            stderr=subprocess.PIPE, text=True)


@docker
def test_process_exit_leaves_no_pooled_container(docker_backend, skill_maker):
    skill = skill_maker({"x.py": "print('ok')"})
    # Exit right after a pooled run, while the refill thread is starting a replacement.
    proc = _child("""
        assert warm.warm(wait=30) == 2
        result = backend.run(req)
        print(result.isolation.split(":")[0], warm.status()["starting"], flush=True)
    """, skill)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.split()[:3] == ["docker", "(warm", "pool)"]
    assert our_containers(docker_backend.client(), pid=proc.pid) == []


@docker
def test_sandbox_cleanup_removes_a_killed_process_pool(docker_backend, skill_maker):
    client = docker_backend.client()
    skill = skill_maker({"x.py": "print('ok')"})
    proc = _child("""
        assert warm.warm(wait=30) == 2
        print("warm", flush=True)
        time.sleep(120)
    """, skill)
    try:
        assert proc.stdout.readline().strip() == "warm"
        os.kill(proc.pid, signal.SIGKILL)  # no atexit; the attach streams close, so the launchers exit
        proc.wait(timeout=30)
        deadline = time.monotonic() + 20  # and the containers remove themselves (AutoRemove)
        while our_containers(client, pid=proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        cleanup(client)  # whatever is still there (none expected) is the cleanup's
        assert our_containers(client, pid=proc.pid) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        for c in our_containers(client, pid=proc.pid):
            with contextlib.suppress(docker_errors.APIError):
                c.remove(force=True)


@docker
def test_an_orphaned_pooled_launcher_gives_up_by_itself(docker_backend):
    client = docker_backend.client()
    container_id = create_container(client, docker_backend.image, Limits(), pooled=True, idle_exit=1)
    sock = start_attached(client, container_id)
    try:
        status = client.api.wait(container_id, timeout=20, condition="removed")
        assert status["StatusCode"] == 125  # no job within a second: the launcher exits (and the container goes)
    finally:
        sock.close()
        with contextlib.suppress(docker_errors.APIError):
            client.api.remove_container(container_id, force=True)
        from ipyskills.sandbox.docker import cleanup as dc

        dc._live.pop(container_id, None)


@docker
def test_registry_runs_use_the_pool_after_the_first(docker_backend, tmp_path, monkeypatch):
    from ipyskills import SkillRegistry

    for key in list(os.environ):
        if key.startswith("IPYSKILLS_"):
            monkeypatch.delenv(key)
    os.chmod(tmp_path, 0o755)
    skill = tmp_path / "pooled-skill"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: pooled-skill\ndescription: Pool test.\n---\nBody.\n")
    (skill / "scripts" / "x.py").write_text("import sys\nprint(sys.stdin.read().upper())\n")
    for path in (skill, skill / "scripts"):
        os.chmod(path, 0o755)
    settings = Settings(backend="docker", default_roots=False, bundled_skills=False, pool_size=2)
    reg = SkillRegistry([str(tmp_path)], settings=settings)
    try:
        first = reg.run("pooled-skill", "scripts/x.py", stdin="a")
        assert first.isolation.startswith("docker: ")  # the pool starts after the first run
        [pool] = [p for p in pool_mod.pools() if p.image == settings.image]
        wait_full(pool)
        second = reg.run("pooled-skill", "scripts/x.py", stdin="b")
        assert second.isolation.startswith("docker (warm pool)") and second.stdout == "B\n"
        off = SkillRegistry([str(tmp_path)], settings=settings.with_overrides(pool_size=0))
        assert off.run("pooled-skill", "scripts/x.py", stdin="c").isolation.startswith("docker: ")
    finally:
        pool_mod.drain_all()


def test_warm_refuses_when_the_pool_is_off():
    with pytest.raises(ConfigError, match="pool_size"):
        db_warm(Settings(pool_size=0))
    with pytest.raises(ConfigError, match="at least 0"):
        pool_mod.ContainerPool(None, "img", Limits(), -1)


def test_pool_key_ignores_what_a_run_can_change_later():
    key = pool_mod.PoolKey.of("img", Limits())
    assert pool_mod.PoolKey.of("img", Limits(timeout=5, output_cap=10, artifact_files=3)) == key
    for changed in (Limits(memory="512m"), Limits(pids=64), Limits(cpus=0.5), Limits(tmp_size="8m"),
                    Limits(network=True), Limits(artifact_cap="200m")):
        assert pool_mod.PoolKey.of("img", changed) != key
    assert pool_mod.PoolKey.of("other", Limits()) != key


def test_skill_tar_is_cached_until_a_file_changes(tmp_path):
    import io
    import tarfile

    skill = tmp_path / "s"
    (skill / "scripts").mkdir(parents=True)
    script = skill / "scripts" / "x.py"
    script.write_text("print(1)\n")
    first = cached_skill_tar(skill)
    assert cached_skill_tar(skill) is first  # not tarred again
    script.write_text("print(22)\n")  # new size (and mtime)
    second = cached_skill_tar(skill)
    assert second is not first
    (skill / "new.txt").write_text("n")
    third = cached_skill_tar(skill)
    with tarfile.open(fileobj=io.BytesIO(third)) as tar:
        assert sorted(m.name for m in tar) == ["new.txt", "scripts/x.py"]
        assert tar.extractfile("scripts/x.py").read() == b"print(22)\n"
    os.utime(script, ns=(1, 1))  # same size, other mtime
    assert cached_skill_tar(skill) is not third


def _frames(kind: int, data: bytes) -> bytes:
    return struct.pack(">BxxxI", kind, len(data)) + data


def _read(chunks: list[bytes], marker: bytes, cap: int = 1 << 20, close: bool = False):
    ours, theirs = socket.socketpair()
    stdout, stderr = OutputBuffer(1 << 20), OutputBuffer(1 << 20)
    reader = _StreamReader(stdout, stderr, marker, cap)

    def feed():
        for chunk in chunks:
            theirs.sendall(chunk)
            time.sleep(0.0005)  # separate reads, so the splits are seen as they are
        if close:
            theirs.close()

    threading.Thread(target=feed, daemon=True).start()
    ended = reader.pump(ours, time.monotonic() + 5)
    ours.close()
    if not close:
        theirs.close()
    return ended, reader, stdout.text(), stderr.text()


def test_report_ends_the_read_without_waiting_for_the_stream_to_close():
    import io
    import json
    import tarfile

    marker = b"\0\0ipyskills-end-0123\0\0"
    tar_buf = io.BytesIO()
    with tarfile.open(fileobj=tar_buf, mode="w") as tar:
        info = tarfile.TarInfo("a.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))
    report = json.dumps({"exit": 0, "signal": 0, "duration_ms": 5, "oom_kills": 0,
                         "files": [{"path": "a.txt", "size": 3, "returned": True}]}).encode() + b"\n"
    stream = (_frames(1, b"hello ") + _frames(2, b"warn" + marker[:5]) + _frames(2, marker[5:])
              + _frames(1, b"world\n" + marker[:7]) + _frames(1, marker[7:] + report + tar_buf.getvalue()[:100])
              + _frames(1, tar_buf.getvalue()[100:] + marker[:3]) + _frames(1, marker[3:]))
    # Split at awkward places: inside frame headers as well as inside the markers.
    chunks = [stream[i:i + 7] for i in range(0, len(stream), 7)]
    started = time.monotonic()
    ended, reader, out, err = _read(chunks, marker)  # the socket is never closed
    assert ended and reader.complete and time.monotonic() - started < 4
    assert out == "hello world\n" and err == "warn"
    assert reader.summary()["exit"] == 0
    [artifact] = reader.artifacts(Limits())
    assert artifact.data == b"abc"


def test_stream_close_without_a_report_is_still_an_end():
    marker = b"\0\0ipyskills-end-4567\0\0"
    ended, reader, out, err = _read([_frames(1, b"partial"), _frames(2, b"oops")], marker, close=True)
    assert ended and not reader.complete and out == "partial" and err == "oops"
    assert reader.summary() == {}


def test_an_overflowing_report_still_ends_at_its_marker():
    marker = b"\0\0ipyskills-end-89ab\0\0"
    big = b"{}\n" + b"x" * 5000
    chunks = [_frames(2, marker), _frames(1, marker + big[:2500]), _frames(1, big[2500:] + marker)]
    ended, reader, out, err = _read(chunks, marker, cap=1000)
    assert ended and reader.complete and reader.trailer_overflow and out == "" and err == ""


@pytest.fixture
def shell(monkeypatch, tmp_path):
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.chdir(tmp_path)
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    ip = InteractiveShell.instance(config=config)
    yield ip
    if "ipyskills" in ip.extension_manager.loaded:
        ip.run_line_magic("unload_ext", "ipyskills")
    InteractiveShell.clear_instance()


@docker
def test_unload_ext_drains_the_pool(docker_backend, shell):
    shell.run_line_magic("load_ext", "ipyskills")
    pool = db_warm(Settings(pool_size=2), wait=30)
    client = docker_backend.client()
    assert len(our_containers(client, pooled=True)) == 2
    shell.run_line_magic("unload_ext", "ipyskills")
    assert pool.status()["stopped"] and pool_mod.pools() == []
    assert flush_removals()
    assert our_containers(client, pooled=True) == []


def test_load_ext_starts_no_pool_and_imports_no_docker():
    code = textwrap.dedent("""
        import sys
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config
        config = Config()
        config.HistoryManager.hist_file = ":memory:"
        ip = InteractiveShell.instance(config=config)
        ip.run_line_magic("load_ext", "ipyskills")
        ip.run_line_magic("config", "IPySkills.pool_size = 3")
        ip.run_line_magic("unload_ext", "ipyskills")
        print(sorted(m for m in ("docker", "ipyskills.sandbox.docker.pool", "ipyskills.sandbox.docker.backend")
                     if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_pool_size_setting_and_trait():
    from traitlets import TraitError

    from ipyskills.notebook.config import IPySkillsConfig

    assert Settings().pool_size == 2
    assert Settings.from_env({"IPYSKILLS_POOL_SIZE": "0"}).pool_size == 0
    with pytest.raises(ConfigError, match="IPYSKILLS_POOL_SIZE"):
        Settings.from_env({"IPYSKILLS_POOL_SIZE": "two"})
    cfg = IPySkillsConfig()
    cfg.pool_size = 4
    assert cfg.settings().pool_size == 4
    with pytest.raises(TraitError, match="pool_size"):
        cfg.pool_size = -1
    with pytest.raises(ConfigError, match="at least 0"):
        pool_mod.pool_for(None, "img", Limits(), -1)
    assert pool_mod.ContainerPool(None, "img", Limits(), 50).size == pool_mod.MAX_SIZE


@docker
@pytest.mark.slow
def test_kernel_shutdown_leaves_no_pooled_container(docker_backend):
    from jupyter_client.manager import start_new_kernel

    manager, kc = start_new_kernel(kernel_name="python3")
    printed = []

    def keep(msg):
        if msg["msg_type"] == "stream":
            printed.append(msg["content"]["text"])

    try:
        code = ("import os\nfrom ipyskills.sandbox.docker import backend\nfrom ipyskills.settings import Settings\n"
                "p = backend.warm(Settings(pool_size=2), wait=30)\nprint(os.getpid(), len(p.idle_ids()))")
        reply = kc.execute_interactive(code, timeout=90, output_hook=keep)
        assert reply["content"]["status"] == "ok", reply["content"]
        pid, idle = map(int, "".join(printed).split())
        assert idle == 2 and len(our_containers(docker_backend.client(), pid=pid, pooled=True)) == 2
    finally:
        kc.stop_channels()
        manager.shutdown_kernel(now=False)  # a polite shutdown, as Jupyter does it
    assert our_containers(docker_backend.client(), pid=pid) == []


def test_a_tls_read_that_needs_more_bytes_is_not_the_end_of_the_stream():
    """An SSLSocket that has only part of a TLS record raises SSLWantReadError: wait, do not stop."""
    import json
    import ssl

    class PartialRecordSocket:
        def __init__(self, sock):
            self.sock, self.stalls = sock, 2

        def fileno(self):
            return self.sock.fileno()

        def recv(self, n):
            if self.stalls:
                self.stalls -= 1
                raise ssl.SSLWantReadError("The operation did not complete (read)")
            return self.sock.recv(n)

    marker = b"\0\0ipyskills-end-89ab\0\0"
    report = json.dumps({"exit": 3, "signal": 0, "duration_ms": 5, "oom_kills": 0, "files": []}).encode()
    ours, theirs = socket.socketpair()
    theirs.sendall(_frames(1, b"out") + _frames(2, marker) + _frames(1, marker + report + b"\n" + marker))
    stdout, stderr = OutputBuffer(1 << 20), OutputBuffer(1 << 20)
    reader = _StreamReader(stdout, stderr, marker, 1 << 20)
    try:
        ended = reader.pump(PartialRecordSocket(ours), time.monotonic() + 5)
    finally:
        ours.close()
        theirs.close()
    assert ended and reader.complete and stdout.text() == "out"
    assert reader.summary()["exit"] == 3
