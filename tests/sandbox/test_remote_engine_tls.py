"""A remote Docker engine behind TLS, as a JupyterHub admin would give the kernels one (README, "Binder and
hosted Jupyter"): a private engine (private_engine.py) that listens on a loopback port with --tlsverify,
certificates made here by openssl, and a docker context naming them in a DOCKER_CONFIG of the test's own.
With DOCKER_CONTEXT set, a skill runs there (copied, since the engine shares no filesystem with the
client); the same port without the client certificate, or with one from another authority, is refused
with a SandboxError that names the engine."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from private_engine import PrivateEngine, free_port

from ipyskills.sandbox.docker import backend as db
from ipyskills.sandbox.docker import client as docker_client
from ipyskills.sandbox.docker import pool as pool_mod
from ipyskills.sandbox.docker.backend import DockerBackend
from ipyskills.sandbox.policy import Limits
from ipyskills.sandbox.runner import RunRequest
from ipyskills.settings import DEFAULT_IMAGE

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _openssl(*args, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, check=True)


def _authority(folder: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}-key.pem", "-out", f"{name}.pem",
             "-days", "1", "-subj", f"/CN=ipyskills test {name}", cwd=folder)


def _certificate(folder: Path, ca: str, name: str, usage: str, san: str = "") -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}-key.pem", "-out", f"{name}.csr",
             "-subj", f"/CN={name}", cwd=folder)
    (folder / f"{name}.ext").write_text(f"extendedKeyUsage={usage}\n" + (f"subjectAltName={san}\n" if san else ""))
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}-key.pem", "-CAcreateserial",
             "-out", f"{name}-cert.pem", "-days", "1", "-extfile", f"{name}.ext", cwd=folder)


def readme_context_example() -> str:
    """The README's shell block that makes the TLS context (test_readme.py lists it as run here)."""
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    found = re.search(r"```bash\n(docker context create sandbox-engine .*?)```", text, re.DOTALL)
    assert found, "the README's TLS context example is gone: update this test and test_readme.NOT_RUN"
    return found.group(1)


@pytest.fixture(scope="module")
def tls_engine():
    if shutil.which("dockerd") is None or shutil.which("ip") is None or shutil.which("openssl") is None \
            or os.geteuid() != 0:
        pytest.skip("a private TLS engine needs dockerd, ip, openssl and root")
    if subprocess.run(["docker", "image", "inspect", DEFAULT_IMAGE], capture_output=True, check=False).returncode:
        pytest.skip(f"the sandbox image {DEFAULT_IMAGE} is not on the shared engine")
    certs = Path(tempfile.mkdtemp(prefix="ipyskills-test-tls-"))
    _authority(certs, "ca")
    _authority(certs, "other-ca")
    _certificate(certs, "ca", "server", "serverAuth", "IP:127.0.0.1")
    _certificate(certs, "ca", "client", "clientAuth")
    _certificate(certs, "other-ca", "stranger", "clientAuth")
    port = free_port()
    engine = PrivateEngine(Path(tempfile.mkdtemp(prefix="ipyskills-engine-", dir="/tmp")), tcp=False,
                           extra=("--host", f"tcp://127.0.0.1:{port}", "--tlsverify", f"--tlscacert={certs}/ca.pem",
                                  f"--tlscert={certs}/server-cert.pem", f"--tlskey={certs}/server-key.pem"))
    try:
        engine.start()
        engine.load_image(DEFAULT_IMAGE)
        config = certs / "docker-config"
        config.mkdir()
        (config / "config.json").write_text("{}")
        # the README's own example makes the context, with this engine and these certificates in its place
        example = readme_context_example()
        for placeholder, real in (("tcp://engine.example.internal:2376", f"tcp://127.0.0.1:{port}"),
                                  ("/etc/ipyskills/ca.pem", f"{certs}/ca.pem"),
                                  ("/etc/ipyskills/cert.pem", f"{certs}/client-cert.pem"),
                                  ("/etc/ipyskills/key.pem", f"{certs}/client-key.pem")):
            assert placeholder in example, placeholder
            example = example.replace(placeholder, real)
        made = subprocess.run(["bash", "-e", "-c", example], capture_output=True, text=True, check=False,
                              env={**os.environ, "DOCKER_CONFIG": str(config)})
        assert made.returncode == 0, made.stderr
        subprocess.run(["docker", "--config", str(config), "context", "create", "stranger", "--docker",
                        f"host=tcp://127.0.0.1:{port},ca={certs}/ca.pem,cert={certs}/stranger-cert.pem,"
                        f"key={certs}/stranger-key.pem"], capture_output=True, check=True)
        yield {"engine": engine, "config": str(config), "url": f"tcp://127.0.0.1:{port}"}
    finally:
        pool_mod.drain_all()
        db.flush_removals(timeout=30)
        engine.close()
        shutil.rmtree(certs, ignore_errors=True)


@pytest.fixture
def context(tls_engine, monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    # The docker client library talks through requests, for which these name the CA bundle of every
    # HTTPS call, the context's own CA included (README: set them to the engine's CA, or unset them).
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", tls_engine["config"])
    return tls_engine


def test_a_skill_runs_on_a_remote_engine_through_a_tls_context(context, make_skill, monkeypatch):
    monkeypatch.setenv("DOCKER_CONTEXT", "sandbox-engine")
    url, tls = docker_client.engine_endpoint()
    assert url == context["url"] and tls is not None and tls.verify
    skill = make_skill({"scripts/hello.py": "import json, pathlib\n"
                        "print(json.dumps(pathlib.Path('/skill/data/note.txt').read_text()))\n",
                        "data/note.txt": "over TLS\n"}, name="hello")
    backend = DockerBackend()
    result = backend.run(RunRequest(skill_name=skill.name, skill_dir=skill, script="scripts/hello.py",
                                    limits=Limits()))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == "over TLS\n"
    assert result.backend == "docker"
    assert DockerBackend().readiness()[0]
    pool_mod.drain_all()
    assert db.flush_removals(timeout=30)
    assert context["engine"].containers(os.getpid()) == []


def test_without_the_client_certificate_the_engine_refuses(context, monkeypatch):
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    monkeypatch.setenv("DOCKER_HOST", context["url"])  # plain TCP, no certificate
    ok, reason = DockerBackend().readiness()
    assert not ok and context["url"] in reason, reason


def test_a_certificate_from_another_authority_is_refused(context, monkeypatch):
    monkeypatch.setenv("DOCKER_CONTEXT", "stranger")
    ok, reason = DockerBackend().readiness()
    assert not ok and "127.0.0.1" in reason, reason
