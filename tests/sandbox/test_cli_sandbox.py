"""`ipyskills sandbox status | cleanup | build` through the real command entry point."""

from __future__ import annotations

import contextlib
import json
import os

import pytest

from ipyskills.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.docker
def test_status_json_when_ready(docker_backend, capsys, monkeypatch):
    monkeypatch.delenv("IPYSKILLS_IMAGE", raising=False)
    code, out, _ = run_cli(capsys, "sandbox", "status", "--json")
    report = json.loads(out)
    assert code == 0
    assert report["engine"] is True and report["engine_version"]
    assert report["image"] == "ipyskills-sandbox:latest" and report["image_present"] is True
    assert report["backend"] == "docker" and report["image_current"] is True


@pytest.mark.docker
def test_status_names_the_build_command_when_the_image_is_missing(docker_backend, capsys, monkeypatch):
    monkeypatch.setenv("IPYSKILLS_IMAGE", "ipyskills-absent:1")
    code, out, _ = run_cli(capsys, "sandbox", "status", "--json")
    report = json.loads(out)
    assert code == 1
    assert report["engine"] is True and report["image_present"] is False and report["backend"] == "local"
    assert "ipyskills sandbox build [--offline]" in report["message"]
    code, out, err = run_cli(capsys, "sandbox", "status")
    assert code == 1 and "ipyskills-absent:1 not present" in out and "auto would use local" in out
    assert "ipyskills sandbox build" in err


def test_status_without_an_engine(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    code, out, _ = run_cli(capsys, "sandbox", "status", "--json")
    report = json.loads(out)
    assert code == 1
    assert report["engine"] is False and report["image_present"] is False and report["backend"] == "local"
    assert report["endpoint"].endswith("none.sock") and "start the Docker engine" in report["message"]


def test_cleanup_without_an_engine_is_a_clear_error(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    code, _, err = run_cli(capsys, "sandbox", "cleanup")
    assert code == 1 and err.startswith("ipyskills: error:") and "Traceback" not in err


@pytest.mark.docker
def test_cleanup_removes_a_stray(docker_backend, capsys):
    from ipyskills.sandbox.docker.cleanup import LABEL, LABEL_HOST, LABEL_PID

    client = docker_backend.client()
    stray = client.containers.create(docker_backend.image, command=["true"], labels={
        LABEL: "1", LABEL_PID: str(2**22 + 4242), LABEL_HOST: os.uname().nodename})
    code, out, _ = run_cli(capsys, "sandbox", "cleanup", "--json")
    assert code == 0 and stray.short_id in json.loads(out)["removed"]
    assert stray.id not in [c.id for c in client.containers.list(all=True, ignore_removed=True)]
    code, out, _ = run_cli(capsys, "sandbox", "cleanup")
    assert code == 0 and out == "no stray sandbox containers\n"


def test_build_usage(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["sandbox", "build", "--help"])
    assert exc.value.code == 0
    assert "--offline" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["sandbox"])
    assert exc.value.code == 2


@pytest.mark.docker
def test_cleanup_copes_with_a_container_removed_while_it_lists(docker_backend):
    """A run's own removal may win the race against `sandbox cleanup`: that is not an engine failure."""
    import docker.errors

    from ipyskills.sandbox.docker.cleanup import LABEL, LABEL_HOST, LABEL_PID, cleanup

    client = docker_backend.client()
    labels = {LABEL: "1", LABEL_PID: str(2**22 + 4243), LABEL_HOST: os.uname().nodename}
    gone = client.containers.create(docker_backend.image, command=["true"], labels=labels)
    stray = client.containers.create(docker_backend.image, command=["true"], labels=labels)
    inspect = client.api.inspect_container

    def inspect_after_a_concurrent_removal(container_id, *a, **kw):
        if container_id == gone.id:
            client.api.remove_container(gone.id, force=True)
        return inspect(container_id, *a, **kw)

    client.api.inspect_container = inspect_after_a_concurrent_removal
    try:
        removed = cleanup(client)
    finally:
        del client.api.inspect_container
        for c in (gone, stray):
            with contextlib.suppress(docker.errors.NotFound):  # already removed, as it should be
                c.remove(force=True)
    assert stray.short_id in removed and gone.short_id not in removed
