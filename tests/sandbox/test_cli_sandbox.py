"""`ipyskills sandbox status | cleanup | build` through the real command entry point."""

from __future__ import annotations

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
    from ipyskills.sandbox.docker_backend import LABEL, LABEL_HOST, LABEL_PID

    client = docker_backend.client()
    stray = client.containers.create(docker_backend.image, command=["true"], labels={
        LABEL: "1", LABEL_PID: str(2**22 + 4242), LABEL_HOST: os.uname().nodename})
    code, out, _ = run_cli(capsys, "sandbox", "cleanup", "--json")
    assert code == 0 and stray.short_id in json.loads(out)["removed"]
    assert stray.id not in [c.id for c in client.containers.list(all=True)]
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
