"""`ipyskills sandbox gvisor`: install runsc, register it in the engine's daemon.json as `ipyskills-runsc` with
its arguments, reload the engine and check it with a trial run (see runtime for why those arguments)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from ...errors import SandboxError
from .runtime import BACKPORTS_LIST, DAEMON_JSON, GVISOR_ARGS, GVISOR_RUNTIME, forget_offered, offered


def setup_gvisor(log=print, client=None) -> str:
    """Install runsc (Debian's, from bookworm-backports: its 2024 build has systrap), register it in the
    engine's daemon.json as GVISOR_RUNTIME with GVISOR_ARGS, reload the engine with SIGHUP (running
    containers go on), and check it with a trial run. Returns the trial's isolation line. Root only."""
    from .client import connect

    if os.geteuid() != 0:
        raise SandboxError("setting up gVisor installs a package and edits /etc/docker/daemon.json: run "
                           "`sudo ipyskills sandbox gvisor`")
    runsc = shutil.which("runsc") or _install_runsc(log)
    version = subprocess.run([runsc, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    log(f"runsc: {runsc} ({' '.join(version) or 'version unknown'})")
    changed = register(runsc, DAEMON_JSON)
    client = client or connect()
    if changed:
        log(f"registered {GVISOR_RUNTIME} in {DAEMON_JSON} ({' '.join(GVISOR_ARGS)}); reloading the engine")
        _reload_engine(client)
    else:
        log(f"{GVISOR_RUNTIME} is already registered in {DAEMON_JSON}")
    forget_offered()
    deadline = time.monotonic() + 20
    while GVISOR_RUNTIME not in offered(client):
        if time.monotonic() > deadline:
            raise SandboxError(f"the engine did not pick up {GVISOR_RUNTIME} after a reload: restart it "
                               "(systemctl restart docker) and run `ipyskills sandbox status`")
        time.sleep(0.5)
        forget_offered()
    return trial_run(client, log)


def register(runsc: str, path: Path = DAEMON_JSON) -> bool:
    """Merge our runtime entry into daemon.json, keeping everything else; True when the file changed."""
    try:
        config = json.loads(path.read_text()) if path.exists() and path.read_text().strip() else {}
    except ValueError as exc:
        raise SandboxError(f"{path} is not valid JSON ({exc}): fix it by hand, then run this again") from None
    if not isinstance(config, dict):
        raise SandboxError(f"{path} does not hold a JSON object: fix it by hand, then run this again")
    entry = {"path": runsc, "runtimeArgs": list(GVISOR_ARGS)}
    runtimes = config.setdefault("runtimes", {})
    if runtimes.get(GVISOR_RUNTIME) == entry:
        return False
    runtimes[GVISOR_RUNTIME] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".ipyskills-tmp")
    tmp.write_text(json.dumps(config, indent=2) + "\n")
    os.replace(tmp, path)
    return True


def _install_runsc(log) -> str:
    if shutil.which("apt-get") is None:
        raise SandboxError("runsc is not installed and there is no apt-get here: install gVisor "
                           "(https://gvisor.dev/docs/user_guide/install/) and run this again")
    if not BACKPORTS_LIST.exists():
        BACKPORTS_LIST.write_text("deb http://deb.debian.org/debian bookworm-backports main\n")
        log(f"added bookworm-backports in {BACKPORTS_LIST}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    log("apt-get install -t bookworm-backports runsc")
    for cmd in (["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-qq", "-t", "bookworm-backports", "runsc"]):
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise SandboxError(f"{' '.join(cmd)} failed: {(done.stderr or done.stdout).strip()[-400:]}")
    found = shutil.which("runsc")
    if found is None:
        raise SandboxError("apt-get installed runsc but it is not on PATH")
    return found


def _reload_engine(client) -> None:
    """SIGHUP to dockerd: it reloads daemon.json's runtimes and keeps its containers running."""
    pid = None
    try:
        pid = int(Path("/var/run/docker.pid").read_text().strip())
    except (OSError, ValueError):
        found = subprocess.run(["pidof", "dockerd"], capture_output=True, text=True).stdout.split()
        pid = int(found[0]) if found else None
    if pid is None:
        raise SandboxError("no dockerd process found to reload: restart the engine (systemctl restart docker)")
    os.kill(pid, signal.SIGHUP)


def trial_run(client, log=print) -> str:
    """One sandbox run under gVisor; returns its isolation line, or raises saying what failed."""
    from ..policy import Limits
    from ..request import RunRequest
    from ..scratch import make_scratch_dir, remove_tree
    from .backend import DockerBackend

    folder = make_scratch_dir("gvisor-check")
    try:
        script = folder / "check.py"
        script.write_text("import os, platform\nprint('kernel', platform.release(), 'uid', os.getuid())\n")
        os.chmod(folder, 0o755)
        os.chmod(script, 0o644)
        request = RunRequest(skill_name="gvisor check", skill_dir=folder, script="check.py", args=[],
                             limits=Limits(timeout=60))
        result = DockerBackend(client=client, runtime="runsc").run(request)
    finally:
        remove_tree(folder)
    if result.exit_code != 0:
        raise SandboxError(f"the trial run under gVisor failed (exit {result.exit_code}): "
                           f"{result.stderr.strip()[-500:]}")
    log(f"trial run: {result.stdout.strip()} ({result.duration:.2f} s)")
    return result.isolation
