"""An engine reached over TCP, as a remote engine is: the private engine (private_engine.py) listening on a
loopback port. The client then shares no filesystem with the engine, so with the default transfer mode
("auto") the skill must travel in the run's payload, not as a bind mount, and a provisioned dependency
image must be built from files sent in the build context.

The same engine is also reached over its unix socket, where the same default mounts the skill: the
control that shows the inspection below can tell a mount from a copy."""

from __future__ import annotations

import os
import re

import pytest
from test_limits_measured import LiveInspector

from ipyskills import SkillRegistry
from ipyskills.sandbox.docker import backend as db
from ipyskills.sandbox.docker import cleanup as dc
from ipyskills.sandbox.docker import pool as pool_mod
from ipyskills.sandbox.docker.backend import DockerBackend
from ipyskills.sandbox.policy import Limits
from ipyskills.sandbox.request import RunRequest
from ipyskills.settings import Settings

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Reads a data file of its skill (proving the skill arrived), names its container, then waits so the test
# can inspect the live container from the engine.
READER = r'''
import socket, time
print("DATA " + open("/skill/data/note.txt").read().strip(), flush=True)
print("HOST " + socket.gethostname(), flush=True)
time.sleep(2)
'''

TABLE = """\
import socket, time
import tabulate
print(tabulate.tabulate([["a", 1], ["b", 2]], headers=["k", "v"]))
print("FROM " + tabulate.__file__, flush=True)
print("HOST " + socket.gethostname(), flush=True)
time.sleep(2)
"""


@pytest.fixture
def engine(private_engine):
    """The private engine, running (a fault test may have stopped it); at the end nothing of ours is left
    on it."""
    if private_engine.proc is None:
        private_engine.start()
    assert private_engine.tcp_host, "the private engine was started without its TCP listener"
    yield private_engine
    pool_mod.drain_all()
    assert dc.flush_removals(timeout=30)
    outer = os.environ.get("DOCKER_HOST")
    try:
        for host in (private_engine.tcp_host, private_engine.host):  # shared_client() follows DOCKER_HOST
            os.environ["DOCKER_HOST"] = host
            assert dc.heal(db.shared_client(), everything=True)
    finally:
        if outer is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = outer
    assert private_engine.containers(os.getpid()) == []


def binds(attrs: dict) -> list[dict]:
    """The live container's bind mounts of host paths (the engine lists tmpfs mounts apart)."""
    return [m for m in attrs.get("Mounts") or [] if m.get("Type") == "bind"]


@pytest.mark.parametrize("over", ["tcp", "unix"])
def test_default_transfer_copies_the_skill_to_an_engine_over_tcp(over, engine, make_skill, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", engine.tcp_host if over == "tcp" else engine.host)
    skill = make_skill({"scripts/read.py": READER, "data/note.txt": "carried along\n"}, name="reader")
    backend = DockerBackend()  # default transfer ("auto"), no warm pool (a pooled run always copies)
    assert backend.skill_transfer == "auto"
    inspector = LiveInspector(backend.client())
    request = RunRequest(skill_name=skill.name, skill_dir=skill, script="scripts/read.py", limits=Limits())
    request.on_output = inspector
    result = backend.run(request)
    assert result.exit_code == 0, result.stderr
    assert "DATA carried along" in result.stdout
    assert inspector.error is None and inspector.attrs is not None, inspector.error
    mounted = binds(inspector.attrs)
    skill_tmpfs = (inspector.attrs["HostConfig"].get("Tmpfs") or {}).get("/skill")
    if over == "tcp":
        assert mounted == [], f"a remote engine got the skill as a bind mount: {mounted}"
        assert skill_tmpfs is not None, "the copied skill has no place of its own at /skill"
    else:  # the control: the same engine over its unix socket mounts the skill read-only (and /etc/hosts:
        # a local engine's container without a network has no network sandbox; containers.HOSTS_FILE)
        from ipyskills.sandbox.docker.containers import HOSTS_FILE

        assert sorted((m["Source"], m["Destination"], m["RW"]) for m in mounted) == sorted([
            (str(HOSTS_FILE), "/etc/hosts", False), (str(skill.resolve()), "/skill", False)])
        assert skill_tmpfs is None


def test_provisioned_dependencies_are_built_through_an_engine_over_tcp(engine, make_skill, monkeypatch):
    from ipyskills.sandbox.provision import docker_image

    monkeypatch.setenv("DOCKER_HOST", engine.tcp_host)
    docker_image.forget_recent()  # a build on another engine earlier in this process must not count
    client = db.shared_client()
    assert not db.docker_client.is_local(client)
    before = {t for image in client.images.list(name=docker_image.REPOSITORY) for t in image.tags}
    skill = make_skill({"requirements.txt": "tabulate==0.9.0\n", "scripts/table.py": TABLE}, name="tabler")
    reg = SkillRegistry([str(skill)], settings=Settings(default_roots=False, bundled_skills=False,
                                                        backend="docker", pool_size=0))
    lines: list[str] = []
    inspector = LiveInspector(client)
    result = reg.run("tabler", "scripts/table.py", progress=lines.append, on_output=inspector)
    assert result.exit_code == 0, result.stderr
    assert re.search(r"^a +1$", result.stdout, re.MULTILINE) and "---  ---" in result.stdout  # tabulate's table
    assert "tabulate==0.9.0" in result.notice
    assert any("building" in line for line in lines), lines  # built now, on this engine
    built = [i for i in client.images.list(name=docker_image.REPOSITORY)
             if "tabulate" in (i.labels or {}).get(docker_image.LABEL_INSTALLED, "")]
    assert len(built) == 1, [i.tags for i in built]
    new_tags = set(built[0].tags) - before
    assert new_tags, "no dependency image was tagged by this run"
    # FROM the sandbox image as this engine has it (the fixture loaded it), with the site folder copied in
    assert built[0].labels[docker_image.LABEL_BASE] == client.images.get(db.DEFAULT_IMAGE).id
    module = re.search(r"^FROM (\S+)$", result.stdout, re.MULTILINE).group(1)
    assert module.startswith("/usr/local/lib/python3") and "/skill" not in module, module
    # the run itself: in the dependency image, the skill copied in, nothing of the host mounted
    assert inspector.error is None and inspector.attrs is not None, inspector.error
    assert inspector.attrs["Config"]["Image"] in built[0].tags
    assert binds(inspector.attrs) == []
    # the site folder came in the build context (a COPY step), not from a host folder
    history = [h.get("CreatedBy", "") for h in built[0].history()]
    assert any("COPY" in step and "dist-packages" in step for step in history), history
