"""Rootless Podman as the engine, for real: `podman system service` run by an ordinary user (uid 1000) on a
socket in a temp folder, the sandbox image loaded into that user's store from Docker's, and DockerBackend
talking to it through DOCKER_HOST. What the script sees is measured from inside the run, as
test_limits_measured.py and test_docker_attacks.py do for Docker.

On this kind of host (cgroup v1) rootless Podman accepts memory, pids and CPU limits and ignores them, so a
run is refused by default; with IPYSKILLS_PODMAN_NO_LIMITS=1 it runs, the isolation line says so, and the
tests below measure that every other layer holds (and that those limits really are not applied, which is
what the refusal is about). Everything made is removed afterwards: the user's containers, the service and
Podman's pause process, the user's store and the temp folder, and any subuid/subgid line added here.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from ipyskills.errors import SandboxError
from ipyskills.sandbox.docker import backend as docker_backend
from ipyskills.sandbox.docker import podman
from ipyskills.sandbox.docker.backend import DockerBackend
from ipyskills.sandbox.inputs import stage_inputs
from ipyskills.sandbox.policy import Limits
from ipyskills.sandbox.request import RunRequest
from local_helpers import SkillFactory
from podman_helpers import as_podman_user as _user
from podman_helpers import podman_cli as _podman
from podman_helpers import podman_service

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def podman_socket():
    """The user's service and store for this module (podman_helpers.podman_service)."""
    with podman_service() as found:
        yield found


@pytest.fixture
def engine(podman_socket, monkeypatch):
    base, url = podman_socket
    monkeypatch.setenv("DOCKER_HOST", url)
    monkeypatch.setattr(docker_backend, "_clients", {})  # a client for this endpoint, not a cached one
    podman.forget()
    yield base
    assert docker_backend.flush_removals(30.0)  # removals run in the background once a result is known
    deadline = time.monotonic() + 15
    while (left := _podman(base, "ps", "-aq").stdout.split()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == [], f"containers left in the user's Podman: {left}"


@pytest.fixture
def skills():
    factory = SkillFactory()
    yield factory
    factory.cleanup()


def _run(skill: Path, script: str = "probe.py", args=(), **kwargs) -> object:
    limits = Limits(**{"timeout": 20, **kwargs.pop("limits", {})})
    return DockerBackend().run(RunRequest(skill_name=skill.name, skill_dir=skill, script=script,
                                          args=list(args), limits=limits, **kwargs))


PROBE = textwrap.dedent(r'''
    import ctypes, json, os, socket
    libc = ctypes.CDLL(None, use_errno=True)
    status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    mounts = {line.split()[1]: line.split()[3] for line in open("/proc/self/mounts")}
    seen = {"uid": os.getuid(), "gid": os.getgid(), "cwd": os.getcwd(), "interfaces": sorted(os.listdir("/sys/class/net")),
            "mounts": mounts, **{k: status[k].strip() for k in ("CapEff", "CapBnd", "CapPrm", "NoNewPrivs", "Seccomp")}}
    for path in ("/", "/etc", "/run", "/var/tmp", "/usr/lib", "/skill", "/tmp", "/work"):
        try:
            with open(os.path.join(path, "probe-write"), "w") as fh:
                fh.write("x")
            os.remove(os.path.join(path, "probe-write"))
            seen["write " + path] = "ok"
        except OSError as exc:
            seen["write " + path] = exc.strerror
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=3)
        seen["network"] = "connected"
    except OSError as exc:
        seen["network"] = exc.strerror
    def errno_of(result):
        return 0 if result == 0 else ctypes.get_errno()
    seen["unshare(user)"] = errno_of(libc.unshare(0x10000000))
    seen["get_mempolicy"] = errno_of(libc.syscall(239, None, None, 0, None, 0))  # refused by our profile only
    seen["input"] = open("data/in.txt").read() if os.path.exists("data/in.txt") else None
    with open(os.path.join(os.environ["IPYSKILLS_OUTPUT"], "out.txt"), "w") as fh:
        fh.write("made inside")
    print(json.dumps(seen))
''')


def test_rootless_podman_on_cgroup_v1_is_refused_with_what_to_do(engine, skills, monkeypatch):
    monkeypatch.delenv(podman.NO_LIMITS_ENV, raising=False)
    skill = skills({"probe.py": PROBE})
    found = podman.engine_of(DockerBackend().client())
    assert found.podman and found.rootless, found
    if not found.missing:
        pytest.skip(f"this Podman has the memory, pids and cpu controllers ({found}): nothing to refuse")
    with pytest.raises(SandboxError) as refused:
        _run(skill)
    message = str(refused.value)
    for words in ("podman", "rootless", "cannot enforce", "memory", "pids", "use Docker", "cgroup v2",
                  "systemd", podman.NO_LIMITS_ENV):
        assert words in message, message


@pytest.fixture
def no_limits(engine, monkeypatch):
    monkeypatch.setenv(podman.NO_LIMITS_ENV, "1")
    return engine


def test_every_other_layer_holds_measured_inside(no_limits, skills, tmp_path):
    skill = skills({"probe.py": PROBE})
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "in.txt").write_text("from the host")
    result = _run(skill, inputs=stage_inputs([tmp_path / "data"], cap=1 << 20))
    assert result.exit_code == 0, result.stderr
    seen = json.loads(result.stdout)
    assert (seen["uid"], seen["gid"], seen["cwd"]) == (1000, 1000, "/work")
    assert seen["CapEff"] == seen["CapBnd"] == seen["CapPrm"] == "0000000000000000"
    assert seen["NoNewPrivs"] == "1" and seen["Seccomp"] == "2"
    assert seen["get_mempolicy"] == 1, "EPERM: the ipyskills profile, not Podman's default one"
    assert seen["unshare(user)"] == 1
    assert seen["interfaces"] == ["lo"] and seen["network"] == "Network is unreachable"
    for path in ("/", "/etc", "/run", "/var/tmp", "/usr/lib", "/skill"):
        assert seen["write " + path] == "Read-only file system", (path, seen)
    assert seen["write /tmp"] == seen["write /work"] == "ok"
    for path in ("/tmp", "/work", "/output", "/dev/shm", "/run", "/var/tmp"):
        assert "noexec" in seen["mounts"][path].split(","), (path, seen["mounts"][path])
    assert "size=65536k" in seen["mounts"]["/tmp"] and "size=131072k" in seen["mounts"]["/work"]
    assert seen["input"] == "from the host"
    assert [(a.path, a.data) for a in result.artifacts] == [("out.txt", b"made inside")]
    assert "podman 4" in result.isolation and "rootless" in result.isolation
    assert "memory, pids, cpu limits NOT enforced" in result.isolation, result.isolation
    assert "256 MiB (no swap)" not in result.isolation


def test_memory_and_pids_limits_are_really_not_applied(no_limits, skills):
    """What the refusal is about, measured: past the memory and pids limits nothing stops the script."""
    skill = skills({"over.py": textwrap.dedent('''
        import subprocess, sys
        block = bytearray(160 * 1024 * 1024)  # 160 MiB, past a 64 MiB limit
        for i in range(0, len(block), 4096):
            block[i] = 1
        children = [subprocess.Popen(["sleep", "5"]) for _ in range(40)]  # past a 16 pids limit
        print("memory ok, children", len(children))
        for child in children:
            child.kill()
    ''')})
    result = _run(skill, "over.py", limits={"memory": 64 * 1024**2, "pids": 16})
    assert result.exit_code == 0 and not result.oom_killed, (result.stdout, result.stderr)
    assert "children 40" in result.stdout


def test_live_output_and_timeout(no_limits, skills):
    skill = skills({"slow.py": "import time\nprint('first', flush=True)\ntime.sleep(60)\n"})
    seen: list[tuple[float, str]] = []
    began = time.monotonic()
    result = _run(skill, "slow.py", limits={"timeout": 4},
                  on_output=lambda stream, text: seen.append((time.monotonic() - began, text)))
    took = time.monotonic() - began
    assert result.timed_out and took < 15, (result, took)
    assert seen and "first" in seen[0][1] and seen[0][0] < 3.5, seen


def test_gvisor_is_refused_under_podman(no_limits, skills):
    skill = skills({"probe.py": PROBE})
    with pytest.raises(SandboxError, match="runsc|gVisor"):
        DockerBackend(runtime="runsc").run(RunRequest(skill_name=skill.name, skill_dir=skill,
                                                      script="probe.py", limits=Limits(timeout=10)))


USER_DRIVER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from ipyskills.sandbox.docker.backend import DockerBackend
    from ipyskills.sandbox.policy import Limits
    from ipyskills.sandbox.request import RunRequest
    skill, transfer = sys.argv[1], sys.argv[2]
    result = DockerBackend(skill_transfer=transfer).run(RunRequest(
        skill_name=Path(skill).name, skill_dir=Path(skill), script="probe.py", limits=Limits(timeout=20)))
    print(json.dumps({"exit_code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr,
                      "isolation": result.isolation, "artifacts": [a.path for a in result.artifacts]}))
""")


@pytest.mark.parametrize("transfer", ["mount", "copy"])
def test_the_user_runs_it_through_its_own_socket(no_limits, skills, transfer):
    """The whole client side as uid 1000 too (its own venv, docker-py from ours), the skill bind-mounted
    or copied into a tmpfs; the seccomp profile file it hands Podman is gone when it exits."""
    import docker as docker_package

    from local_helpers import user_venv

    base = no_limits
    skill = skills({"probe.py": PROBE})
    site = str(Path(docker_package.__file__).resolve().parents[1])
    before = set(Path("/tmp").glob("ipyskills-seccomp-*"))
    with user_venv([site]) as python:
        done = subprocess.run([str(python), "-c", USER_DRIVER, str(skill), transfer], capture_output=True,
                              text=True, timeout=120, check=False,
                              **_user(base, DOCKER_HOST=os.environ["DOCKER_HOST"],
                                      **{podman.NO_LIMITS_ENV: "1"}))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["exit_code"] == 0, result["stderr"]
    seen = json.loads(result["stdout"])
    assert seen["uid"] == 1000 and seen["CapEff"] == "0000000000000000" and seen["get_mempolicy"] == 1
    # mounted: a read-only bind mount; copied: unpacked into a tmpfs then made read-only (0555), as on Docker
    assert seen["write /skill"] == ("Read-only file system" if transfer == "mount" else "Permission denied")
    assert seen["interfaces"] == ["lo"]
    assert result["artifacts"] == ["out.txt"]
    assert "limits NOT enforced" in result["isolation"]
    assert set(Path("/tmp").glob("ipyskills-seccomp-*")) == before


def test_warm_pool_containers_under_podman(no_limits, skills):
    """Pooled containers (started ahead, the skill copied in) are made with the same respelled flags."""
    skill = skills({"probe.py": PROBE})
    backend = DockerBackend(pool_size=1)
    try:
        assert backend.pool(backend.client(), backend.image).warm(wait=30) == 1
        result = backend.run(RunRequest(skill_name=skill.name, skill_dir=skill, script="probe.py",
                                        limits=Limits()))
        assert result.exit_code == 0, result.stderr
        assert result.isolation.startswith("docker (warm pool) API, podman"), result.isolation
        seen = json.loads(result.stdout)
        assert seen["write /run"] == seen["write /var/tmp"] == "Read-only file system"
        assert seen["get_mempolicy"] == 1 and seen["NoNewPrivs"] == "1"
    finally:
        from ipyskills.sandbox.docker import pool as pool_mod

        pool_mod.drain_all()


def test_readiness_says_why_podman_is_not_used(engine, monkeypatch):
    """`ipyskills sandbox status` and backend "auto" see the refusal before any run."""
    monkeypatch.delenv(podman.NO_LIMITS_ENV, raising=False)
    if not podman.engine_of(DockerBackend().client()).missing:
        pytest.skip("this Podman can enforce the limits")
    ready, why = DockerBackend().readiness()
    assert not ready and "cannot enforce" in why and podman.NO_LIMITS_ENV in why
    monkeypatch.setenv(podman.NO_LIMITS_ENV, "1")
    assert DockerBackend().readiness()[0]
