"""Nothing of a gVisor run outlives it, failed starts included: 100 runs under runsc (successes, timeouts,
owners killed mid-run, and starts that really fail in runsc or the engine), then no shim, runsc-sandbox,
runsc-gofer or runsc process of their containers, and no container of theirs. Without the reaping after a
failed start (gvisor_orphans.py) every failed `runsc start` left its containerd-shim running for good
(measured: 18 of 18). `ipyskills sandbox cleanup` ends such processes when something else left them."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import textwrap
import time

import pytest
from conftest import gvisor_backend_from

from ipyskills.errors import SandboxError
from ipyskills.sandbox.docker import gvisor_orphans

pytestmark = pytest.mark.docker

# Images whose `python3` runsc cannot start: each fails in `runsc start`, after the engine made the task.
BROKEN = {
    "ipyskills-test-no-python": (None, 'error finding executable "python3"'),  # none there
    "ipyskills-test-bad-interpreter": (b"#!/nonexistent/interpreter\n",  # its interpreter is missing
                                       "failed to load /usr/bin/python3: no such file or directory"),
    "ipyskills-test-bad-elf": (b"\x7fELF\x02\x01\x01 not a program", "failed to load /usr/bin/python3: exec format error"),
}


@pytest.fixture(scope="module")
def gvisor_backend(docker_backend):
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc to see runsc's processes in")
    return gvisor_backend_from(docker_backend)


@pytest.fixture(scope="module")
def broken_images(gvisor_backend):
    """Tiny images (FROM scratch, no network needed) with a python3 runsc cannot start."""
    client = gvisor_backend.client()
    for tag, (content, _) in BROKEN.items():
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            files = {"Dockerfile": b"FROM scratch\n" + (b"COPY python3 /usr/bin/python3\n" if content else
                                                        b"COPY Dockerfile /nothing\n")}
            if content:
                files["python3"] = content
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o755
                tar.addfile(info, io.BytesIO(data))
        buf.seek(0)
        client.images.build(fileobj=buf, custom_context=True, tag=tag, rm=True, forcerm=True)
    yield list(BROKEN)
    for tag in BROKEN:
        client.images.remove(tag, force=True)


class Recorder:
    """Wraps create_container (fresh and pooled) to learn every container id the runs get, and to remove
    the skill folder between create and start when asked."""

    def __init__(self, monkeypatch):
        from ipyskills.sandbox.docker import backend, pool

        self.ids: list[str] = []  # every container, the warm pool's included
        self.fresh: list[str] = []  # the ones made for a run (not by the pool's refill thread)
        self.remove_before_start = None
        for module in (backend, pool):
            real = module.create_container

            def create(*args, _real=real, _fresh=module is backend, **kwargs):
                cid = _real(*args, **kwargs)
                self.ids.append(cid)
                if _fresh:
                    self.fresh.append(cid)
                if self.remove_before_start is not None and kwargs.get("skill_dir") is not None:
                    shutil.rmtree(self.remove_before_start)
                return cid

            monkeypatch.setattr(module, "create_container", create)


def request_for(folder, image=None, **limits):
    from ipyskills.sandbox.policy import Limits
    from ipyskills.sandbox.request import RunRequest

    return RunRequest(skill_name=folder.name, skill_dir=folder, script="scripts/x.py", args=[],
                      limits=Limits(**limits), image=image)


STATE_DIR = "/var/run/docker/runtime-runc/moby"  # runsc's --root under this engine (options.json's root)


def state_files_of(ids) -> list[str]:
    """runsc's files for these containers in its state folder, where it can be read (root)."""
    try:
        names = os.listdir(STATE_DIR)
    except OSError:
        return []
    return [n for n in names if any(cid in n for cid in ids)]


def held_by(ids) -> list[str]:
    """Every shim, runsc and wrapper process naming one of these containers, short-lived ones included."""
    ids = set(ids)
    return [p.describe() for p in gvisor_orphans.processes(everything=True) if p.container_id in ids]


OWNER = textwrap.dedent("""
    import sys
    from ipyskills.sandbox.docker.backend import DockerBackend
    from ipyskills.sandbox.policy import Limits
    from ipyskills.sandbox.request import RunRequest
    from pathlib import Path
    folder = Path(sys.argv[1])
    DockerBackend(runtime="runsc").run(RunRequest(skill_name=folder.name, skill_dir=folder, script="scripts/x.py",
                                                  args=[], limits=Limits(timeout=5)))
""")


def _owners_containers(client, pids) -> dict[int, str]:
    from ipyskills.sandbox.docker.cleanup import LABEL, LABEL_PID

    found = {}
    for c in client.api.containers(filters={"label": f"{LABEL}=1", "status": "running"}):
        owner = (c.get("Labels") or {}).get(LABEL_PID, "")
        if owner.isdigit() and int(owner) in pids:
            found[int(owner)] = c["Id"]
    return found


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_no_runsc_process_outlives_100_runs_including_failed_starts(gvisor_backend, broken_images, make_skill,
                                                                     monkeypatch):
    from ipyskills.sandbox.docker import pool
    from ipyskills.sandbox.docker.backend import DockerBackend
    from ipyskills.sandbox.docker.cleanup import LABEL, LABEL_PID, flush_removals

    client = gvisor_backend.client()
    recorder = Recorder(monkeypatch)
    backend = DockerBackend(image=gvisor_backend.image, client=client, runtime="runsc", pool_size=2)
    ok = make_skill({"scripts/x.py": "print('ok')\n"})
    sleeper = make_skill({"scripts/x.py": "import time\nprint('started', flush=True)\ntime.sleep(30)\n"})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), os.getcwd()) if p)}
    started = time.monotonic()
    # 4 owners killed mid-run (SIGKILL): their containers must go by themselves (AutoRemove).
    owners = [subprocess.Popen([sys.executable, "-c", OWNER, str(sleeper)], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(4)]
    pids = {p.pid for p in owners}
    deadline = time.monotonic() + 60
    seen: dict[int, str] = {}
    while len(seen) < len(owners) and time.monotonic() < deadline and not any(p.poll() is not None for p in owners):
        time.sleep(0.1)
        seen.update(_owners_containers(client, pids))
    for p in owners:  # each has its container running (the script sleeps): killed now
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert len(seen) == len(owners), [p.stderr.read() for p in owners]
    for p in owners:
        p.stderr.close()
    recorder.ids.extend(seen.values())
    kinds: dict[str, int] = {"owner killed": len(owners)}

    def failed_start(kind: str, request, expected: str):
        before = len(recorder.fresh)
        with pytest.raises(SandboxError, match="refused to start the sandbox container") as caught:
            backend.run(request)
        assert expected in str(caught.value), (kind, str(caught.value))
        assert "may not end" not in str(caught.value)
        assert len(recorder.fresh) == before + 1, "the container was created: the failure is at its start"
        cid = recorder.fresh[-1]
        assert [p.describe() for p in gvisor_orphans.processes(cid)] == [], kind  # reaped before the error came
        kinds[kind] = kinds.get(kind, 0) + 1

    runs = 0
    for i in range(96):
        runs += 1
        step = i % 12
        if step in (0, 4):
            failed_start("no python3", request_for(ok, image="ipyskills-test-no-python"), BROKEN[
                "ipyskills-test-no-python"][1])
        elif step == 1:
            failed_start("missing interpreter", request_for(ok, image="ipyskills-test-bad-interpreter"),
                         BROKEN["ipyskills-test-bad-interpreter"][1])
        elif step == 2:
            failed_start("bad ELF", request_for(ok, image="ipyskills-test-bad-elf"), BROKEN["ipyskills-test-bad-elf"][1])
        elif step == 3:  # gVisor's sandbox cannot boot in 6 MiB: runsc create is killed (exit 137) at start
            failed_start("6 MiB memory", request_for(ok, memory="6m"), "did not terminate successfully: exit status 137")
        elif step == 5:  # the mounted skill folder is gone at start: the engine refuses before runsc
            gone = make_skill({"scripts/x.py": "print('never')\n"})
            recorder.remove_before_start = gone
            try:
                failed_start("skill folder removed", request_for(gone, memory="200m"), "bind source path does not exist")
            finally:
                recorder.remove_before_start = None
        elif step == 6:
            result = backend.run(request_for(sleeper, timeout=1))
            assert result.timed_out and result.stdout == "started\n", result
            kinds["timeout"] = kinds.get("timeout", 0) + 1
        else:
            result = backend.run(request_for(ok))
            assert result.exit_code == 0 and result.stdout == "ok\n", result
            kinds["ok"] = kinds.get("ok", 0) + 1
    runs += len(owners)
    pool.drain_all()
    assert flush_removals(timeout=60)
    deadline = time.monotonic() + 60
    while held_by(recorder.ids) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = held_by(recorder.ids)
    listed = client.api.containers(all=True, filters={"label": f"{LABEL}=1"})
    theirs = [c["Id"][:12] for c in listed if (c.get("Labels") or {}).get(LABEL_PID) in
              {str(os.getpid()), *(str(p.pid) for p in owners)}]
    print(f"\n{runs} runs in {time.monotonic() - started:.0f} s: {json.dumps(kinds)}; "
          f"{len(set(recorder.ids))} containers")
    assert runs == 100 and sum(kinds.values()) == 100
    assert left == [] and theirs == []
    assert state_files_of(recorder.ids) == []  # runsc's state, lock and socket files went as well


def _leave_a_failed_start(backend, folder, monkeypatch) -> str:
    """A failed runsc start with the reaping turned off: its shim stays, as it did before it existed."""
    recorder = Recorder(monkeypatch)
    monkeypatch.setattr(gvisor_orphans, "reap", lambda cid, wait=0: [])
    with pytest.raises(SandboxError, match='error finding executable "python3"'):
        backend.run(request_for(folder, image="ipyskills-test-no-python"))
    monkeypatch.undo()
    cid = recorder.fresh[-1]
    deadline = time.monotonic() + 15  # runsc's sandbox and gofer end within about 2 s; the shim stays
    while len(gvisor_orphans.processes(cid)) > 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    names = [p.name for p in gvisor_orphans.processes(cid)]
    if names != ["containerd-shim-runc-v2"]:  # the leak, unreaped
        gvisor_orphans.reap(cid)
        pytest.fail(f"a failed runsc start left {names}, not its shim alone")
    return cid


@pytest.mark.skipif(os.geteuid() != 0, reason="ends a root-owned shim: needs root")
def test_a_user_who_may_not_end_the_leftover_is_told_and_root_ends_it(gvisor_backend, broken_images, make_skill,
                                                                      monkeypatch):
    folder = make_skill({"scripts/x.py": "print('ok')\n"})
    cid = _leave_a_failed_start(gvisor_backend, folder, monkeypatch)
    try:
        probe = ("import json, os\nfrom ipyskills.sandbox.docker import gvisor_orphans as g\n"
                 "os.setgid(65534); os.setuid(65534)  # an ordinary user from here on\n"
                 f"left = g.reap({cid!r}, wait=1)\n"
                 "print(json.dumps([p.name for p in left])); print(g.unended_note(left))\n")
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                              cwd=os.getcwd(), env={**os.environ, "PYTHONPATH": os.getcwd()})
        assert done.returncode == 0, done.stderr
        names, note = done.stdout.splitlines()
        assert json.loads(names) == ["containerd-shim-runc-v2"]
        assert note.startswith("; gVisor left 1 process(es) of it that this user may not end (containerd-shim-runc-v2 "
                               f"(pid ") and f"of container {cid[:12]}): `sudo ipyskills sandbox cleanup`" in note
    finally:
        assert gvisor_orphans.reap(cid) == []
    assert gvisor_orphans.processes(cid, everything=True) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="ends a root-owned shim: needs root")
def test_sandbox_cleanup_ends_what_a_failed_gvisor_start_left(gvisor_backend, broken_images, make_skill, monkeypatch,
                                                             capsys):
    from ipyskills.cli import main

    folder = make_skill({"scripts/x.py": "print('ok')\n"})
    cid = _leave_a_failed_start(gvisor_backend, folder, monkeypatch)
    try:
        assert cid not in {p.container_id for p in gvisor_orphans.orphans(gvisor_backend.client())}  # too young yet
        monkeypatch.setattr(gvisor_orphans, "ORPHAN_AGE", 1.0)
        time.sleep(1.0)
        main(["sandbox", "cleanup", "--dir", str(folder.parent)])
        out = capsys.readouterr().out
        assert "process(es) of gVisor containers the engine no longer has (failed starts)" in out, out
        assert "containerd-shim-runc-v2 (pid " in out and f"of container {cid[:12]}" in out
        deadline = time.monotonic() + 10
        while gvisor_orphans.processes(cid, everything=True) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert gvisor_orphans.processes(cid, everything=True) == []
        main(["sandbox", "cleanup", "--dir", str(folder.parent), "--json"])
        ended = json.loads(capsys.readouterr().out)["ended_gvisor_processes"]
        assert not [p for p in ended if cid[:12] in p]  # nothing of it left to end
    finally:
        gvisor_orphans.reap(cid)
