"""A run without a network on a local engine: the container is created with networking disabled (no network
sandbox from the engine, the cheaper start), and the script still sees what network mode "none" gave it:
its own namespace with only `lo`, loopback working, "localhost" resolving to 127.0.0.1, no route out, and a
read-only /etc/hosts. Fresh and warm containers, under the test runtime."""

from __future__ import annotations

import json

import pytest
from conftest import test_runtime

from ipyskills.sandbox.docker import pool as pool_mod
from ipyskills.sandbox.docker.backend import DockerBackend
from ipyskills.sandbox.docker.containers import create_container
from ipyskills.sandbox.docker.cleanup import _remove
from ipyskills.sandbox.policy import Limits
from ipyskills.sandbox.request import RunRequest

docker = pytest.mark.docker

SEEN = r"""
import json, os, socket
server = socket.socket()
server.bind(("localhost", 0))
server.listen()
client = socket.create_connection(server.getsockname(), timeout=2)
peer, _ = server.accept()
client.sendall(b"ping")
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    out = "reachable"
except OSError as exc:
    out = type(exc).__name__
try:
    open("/etc/hosts", "a")
    hosts = "writable"
except OSError:
    hosts = "read-only"
print(json.dumps({"ifaces": [n for _, n in socket.if_nameindex()], "localhost": socket.gethostbyname("localhost"),
                  "echo": peer.recv(4).decode(), "out": out, "hosts": hosts,
                  "netns": os.readlink("/proc/self/ns/net")}))
"""


@docker
@pytest.mark.parametrize("pool_size", [0, 1], ids=["fresh", "warm"])
def test_a_run_without_network_keeps_loopback_and_localhost(docker_backend, make_skill, pool_size):
    import os

    backend = DockerBackend(image=docker_backend.image, client=docker_backend.client(), pool_size=pool_size,
                            runtime=test_runtime())
    if pool_size:
        assert backend.pool(backend.client(), backend.image).warm(wait=60) >= 1
    skill = make_skill({"scripts/seen.py": SEEN})
    try:
        result = backend.run(RunRequest(skill.name, skill, "scripts/seen.py"))
    finally:
        pool_mod.drain_all()
    assert result.exit_code == 0, result.stderr
    assert ("warm pool" in result.isolation) == bool(pool_size)
    seen = json.loads(result.stdout)
    assert seen["ifaces"] == ["lo"] and seen["localhost"] == "127.0.0.1" and seen["echo"] == "ping"
    assert seen["out"] in ("OSError", "ConnectionRefusedError", "TimeoutError") and seen["hosts"] == "read-only"
    assert seen["netns"] != os.readlink("/proc/self/ns/net")  # its own network namespace, not the host's


@docker
def test_the_container_is_created_without_a_network_sandbox(docker_backend):
    client = docker_backend.client()
    container_id = create_container(client, docker_backend.image, Limits())
    try:
        config = client.api.inspect_container(container_id)
        assert config["Config"].get("NetworkDisabled") is True
        assert config["HostConfig"]["NetworkMode"] == "none"
        assert any(m["Destination"] == "/etc/hosts" and not m["RW"] for m in config["Mounts"])
    finally:
        _remove(client, container_id)
    networked = create_container(client, docker_backend.image, Limits(network=True))
    try:
        config = client.api.inspect_container(networked)
        assert not config["Config"].get("NetworkDisabled") and config["HostConfig"]["NetworkMode"] == "bridge"
    finally:
        _remove(client, networked)
