"""Rootless Podman for real, shared by test_podman.py and the conformance suite (tests/conformance):
`podman system service` run by an ordinary user (uid 1000) on a socket in a temp folder, with the sandbox
image loaded into that user's store from Docker's. `podman_service()` skips when this machine cannot do
that, and removes everything it made afterwards: the user's containers, the service and Podman's pause
process, the user's store and the temp folder, and any subuid/subgid line added here."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from ipyskills.sandbox.docker import podman
from ipyskills.settings import DEFAULT_IMAGE
from local_helpers import AS_ROOT, USER_UID, as_user, ensure_user

SUBID_FILES = ("/etc/subuid", "/etc/subgid")


def as_podman_user(base: Path, **more_env) -> dict:
    """subprocess keyword arguments that run a program as uid 1000 with Podman's folders under `base`."""
    env = {"XDG_RUNTIME_DIR": str(base / "run"), "XDG_DATA_HOME": str(base / "data"),
           "XDG_CONFIG_HOME": str(base / "config"), "XDG_CACHE_HOME": str(base / "cache"), **more_env}
    return as_user(USER_UID, env=env)


def podman_cli(base: Path, *args, timeout=120, check=True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, check=check,
                          **as_podman_user(base))


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@contextmanager
def podman_service():
    """Yields (base folder, socket URL) of a rootless `podman system service` of uid 1000 (or skips)."""
    if not AS_ROOT:
        pytest.skip("needs root, to act as the ordinary user that runs rootless Podman")
    missing = [tool for tool in ("podman", "newuidmap", "newgidmap", "docker") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"rootless Podman needs {' '.join(missing)} (apt-get install podman uidmap; "
                    "scripts/setup.sh installs them)")
    if subprocess.run(["docker", "image", "inspect", DEFAULT_IMAGE], capture_output=True).returncode:
        pytest.skip(f"the sandbox image {DEFAULT_IMAGE} is not in Docker's store to copy into Podman's")
    ensure_user(USER_UID)
    import pwd

    name = pwd.getpwuid(USER_UID).pw_name
    saved = {path: Path(path).read_text() if os.path.exists(path) else None for path in SUBID_FILES}
    base = Path(tempfile.mkdtemp(prefix="ipyskills-test-podman-", dir="/tmp"))
    service = None
    try:
        for path, text in saved.items():  # rootless Podman maps the container's uids onto these
            if not any(line.split(":")[0] == name for line in (text or "").splitlines()):
                with open(path, "a") as fh:
                    fh.write(f"{name}:200000:65536\n")
        for sub in ("run", "data", "cache", "config/containers"):  # nothing of Podman's in the user's home
            (base / sub).mkdir(parents=True, mode=0o700)
        # Native overlay (kernel >= 5.13 allows it unprivileged); Podman 4.3 picks vfs otherwise, which
        # copies the whole image for every container.
        (base / "config/containers/storage.conf").write_text('[storage]\ndriver = "overlay"\n')
        subprocess.run(["chown", "-R", f"{USER_UID}:{USER_UID}", str(base)], check=True)
        os.chmod(base, 0o755)
        archive = base / "image.tar"
        subprocess.run(["docker", "save", "-o", str(archive), DEFAULT_IMAGE], check=True, timeout=300)
        os.chmod(archive, 0o644)
        loaded = podman_cli(base, "load", "-i", str(archive), timeout=300, check=False)
        archive.unlink()
        if loaded.returncode:
            pytest.skip(f"rootless podman cannot load an image here: {loaded.stderr.strip()[-400:]}")
        sock = base / "run" / "podman.sock"
        service = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{sock}"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                                   **as_podman_user(base))
        for _ in range(100):
            if sock.exists() or service.poll() is not None:
                break
            time.sleep(0.1)
        if not sock.exists():
            pytest.skip(f"podman system service did not start: {service.stderr.read().decode()[-400:]}")
        yield base, f"unix://{sock}"
    finally:
        if base.exists() and shutil.which("podman"):
            podman_cli(base, "rm", "-af", "-t", "0", check=False)
        if service is not None:
            try:
                os.killpg(service.pid, signal.SIGTERM)  # the service's own session (start_new_session)
                service.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                _kill(service.pid)
        pause = base / "run" / "libpod" / "tmp" / "pause.pid"  # Podman's rootless user-namespace holder
        if pause.exists():
            _kill(int(pause.read_text().strip() or 0) or -1)
        if base.exists() and shutil.which("podman"):
            # The store holds files owned by the user's subordinate uids: reset removes them.
            podman_cli(base, "system", "reset", "-f", check=False)
            if pause.exists():
                _kill(int(pause.read_text().strip() or 0) or -1)
        shutil.rmtree(base, ignore_errors=True)
        for path, text in saved.items():
            if text is None:
                Path(path).unlink(missing_ok=True)
            else:
                Path(path).write_text(text)
        podman.forget()
