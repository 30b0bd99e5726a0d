"""docker/podman.py without an engine: how a Podman engine is recognised from docker-py's answers, what
is refused, and how the container's flags are respelled for it (the real engine: test_podman.py)."""

from __future__ import annotations

import pytest

from ipyskills.errors import SandboxError
from ipyskills.sandbox.docker import podman
from ipyskills.sandbox.docker.containers import isolation_line
from ipyskills.sandbox.policy import Limits


class FakeResponse:
    def __init__(self, body):
        self.body = body

    def raise_for_status(self):
        if self.body is None:
            raise RuntimeError("404 Not Found")

    def json(self):
        return self.body


class FakeApi:
    def __init__(self, base_url, libpod):
        self.base_url, self.libpod, self.asked = base_url, libpod, []

    def _get(self, url):
        self.asked.append(url)
        return FakeResponse(self.libpod)


class FakeClient:
    def __init__(self, version, libpod=None, base_url="http+docker://localhost"):
        self._version, self.api = version, FakeApi(base_url, libpod)

    def version(self):
        if isinstance(self._version, Exception):
            raise self._version
        return self._version


PODMAN_VERSION = {"Version": "4.3.1", "Components": [
    {"Name": "Podman Engine", "Version": "4.3.1", "Details": {"MinAPIVersion": "4.0.0"}}]}
V1_ROOTLESS = {"host": {"security": {"rootless": True}, "cgroupVersion": "v1", "cgroupControllers": []}}
V2_DELEGATED = {"host": {"security": {"rootless": True}, "cgroupVersion": "v2",
                         "cgroupControllers": ["cpu", "io", "memory", "pids"]}}


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.delenv(podman.NO_LIMITS_ENV, raising=False)
    podman.forget()
    yield
    podman.forget()


def test_docker_and_an_engine_that_cannot_say_are_docker():
    assert podman.engine_of(FakeClient({"Version": "27.0", "Components": [{"Name": "Engine"}]})) == podman.DOCKER
    assert podman.engine_of(FakeClient(ConnectionError("down"), base_url="http+docker://x")) == podman.DOCKER


def test_two_engines_on_unix_sockets_are_told_apart():
    """docker-py's base_url is "http+docker://localhost" for every unix socket: the answer is remembered per
    socket the client was made for (DOCKER_HOST), so Docker after Podman in one process is Docker."""
    rootless = FakeClient(PODMAN_VERSION, V1_ROOTLESS)
    rootless.ipyskills_endpoint = "unix:///run/user/1000/podman/podman.sock"
    docker = FakeClient({"Version": "27.0", "Components": [{"Name": "Engine"}]})
    docker.ipyskills_endpoint = "unix:///var/run/docker.sock"
    assert podman.engine_of(rootless).missing == ("memory", "pids", "cpu")
    assert podman.engine_of(docker) == podman.DOCKER


def test_rootless_cgroup_v1_is_refused_with_what_to_do():
    client = FakeClient(PODMAN_VERSION, V1_ROOTLESS)
    engine = podman.engine_of(client)
    assert client.api.asked == ["http+docker://localhost/v4.0.0/libpod/info"]
    assert (engine.podman, engine.rootless, engine.missing) == (True, True, ("memory", "pids", "cpu"))
    with pytest.raises(SandboxError, match=r"cannot enforce.*memory, pids, cpu.*cgroup v1.*use Docker.*"
                                           r"cgroup v2.*systemd.*IPYSKILLS_PODMAN_NO_LIMITS=1"):
        podman.check(client, engine, gvisor=False)


def test_delegated_controllers_or_rootful_podman_run():
    for libpod in (V2_DELEGATED, {"host": {"security": {"rootless": False}, "cgroupVersion": "v1"}}):
        podman.forget()
        client = FakeClient(PODMAN_VERSION, libpod)
        engine = podman.engine_of(client)
        assert engine.podman and not engine.missing
        podman.check(client, engine, gvisor=False)
        assert "256 MiB (no swap), 128 pids, 1 CPU" in isolation_line(Limits(), copy=False, engine=engine)


def test_unreadable_libpod_info_counts_as_no_controllers():
    engine = podman.engine_of(FakeClient(PODMAN_VERSION, None))
    assert engine.missing == podman.NEEDED_CONTROLLERS and "404" in engine.info_error


def test_running_anyway_is_stated(monkeypatch):
    client = FakeClient(PODMAN_VERSION, V1_ROOTLESS)
    engine = podman.engine_of(client)
    monkeypatch.setenv(podman.NO_LIMITS_ENV, "1")
    podman.check(client, engine, gvisor=False)
    line = isolation_line(Limits(), copy=False, engine=engine)
    assert line.startswith("docker API, podman 4.3.1 rootless: ")
    assert "memory, pids, cpu limits NOT enforced (asked 256 MiB, 128 pids, 1 CPU" in line
    assert "256 MiB (no swap)" not in line


def test_remote_podman_and_gvisor_are_refused(monkeypatch):
    monkeypatch.setenv(podman.NO_LIMITS_ENV, "1")
    remote = FakeClient(PODMAN_VERSION, V2_DELEGATED, base_url="https://build.example:8443")
    with pytest.raises(SandboxError, match="seccomp profile as a file path"):
        podman.check(remote, podman.engine_of(remote), gvisor=False)
    local = FakeClient(PODMAN_VERSION, V2_DELEGATED)
    with pytest.raises(SandboxError, match="gVisor only under Docker"):
        podman.check(local, podman.engine_of(local), gvisor=True)


def test_flags_respelled_for_podman_and_untouched_for_docker():
    config = {"security_opt": ["no-new-privileges:true", "seccomp={}"],
              "tmpfs": {"/tmp": "rw,noexec,size=1", "/work": "rw,noexec,size=2,uid=1000,gid=1000,mode=0700"}}
    untouched = {k: (list(v) if isinstance(v, list) else dict(v)) for k, v in config.items()}
    podman.adjust(untouched, podman.DOCKER)
    assert untouched == config
    podman.adjust(config, podman.Engine(podman=True, version="4.3.1", rootless=True))
    profile = config["security_opt"][1].split("=", 1)[1]
    assert config["security_opt"][0] == "no-new-privileges:true" and profile.endswith("/seccomp.json")
    with open(profile) as fh:
        assert '"defaultAction"' in fh.read()
    assert config["tmpfs"]["/tmp"] == "rw,noexec,size=1"
    assert config["tmpfs"]["/work"] == "rw,noexec,size=2,mode=0700,U"
    assert config["tmpfs"]["/run"].startswith("ro,noexec") and config["tmpfs"]["/var/tmp"].startswith("ro,noexec")
