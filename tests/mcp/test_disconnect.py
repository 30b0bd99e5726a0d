"""A client that dies while a script runs: the server ends the run, removes its container and exits.

The client is a real process (the SDK's stdio_client spawning `python -m ipyskills mcp`), killed with
SIGKILL while its `sleep` script runs in Docker: nothing of it can say goodbye. The server sees its stdin
close; then no container labelled with the server's pid may remain, and the server process is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from .conftest import REPO, server_env

CLIENT = """
import sys, anyio
sys.path.insert(0, {tests!r})
from tests.mcp.conftest import stdio_session

async def main():
    async with stdio_session("--dir", {root!r}, "--backend", "docker", "--timeout", "120") as session:
        print("CONNECTED", flush=True)
        await session.call_tool("execute_skill_script", {{"skill_name": "data-tool",
                                "script_path": "scripts/sleep.py", "args": ["100"]}})
        print("RETURNED", flush=True)

anyio.run(main)
"""


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _containers(owner: int, running_only: bool = False) -> list:
    import docker

    from ipyskills.sandbox.docker.backend import LABEL, LABEL_PID

    client = docker.from_env(timeout=30)
    try:
        found = client.api.containers(all=True, filters={"label": [f"{LABEL}=1", f"{LABEL_PID}={owner}"]})
    finally:
        client.close()
    return [c for c in found if not running_only or c.get("State") == "running"]


@pytest.mark.docker
@pytest.mark.timeout(180)
def test_killing_the_client_mid_run_leaves_nothing(skills_root, docker):
    env = server_env(IPYSKILLS_POOL_SIZE="0")
    client = subprocess.Popen([sys.executable, "-c", CLIENT.format(tests=str(REPO), root=str(skills_root))],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert client.stdout.readline().strip() == "CONNECTED"
        servers = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the server is the client's child; its run's container is labelled
            servers = [p for p in _children(client.pid) if _alive(p)]
            if servers and any(_containers(p, running_only=True) for p in servers):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"no running sandbox container of the server appeared (server pids {servers})")
        server = next(p for p in servers if _containers(p, running_only=True))
        time.sleep(1.0)  # the script is in its sleep
        client.send_signal(signal.SIGKILL)
        client.wait(timeout=10)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (_alive(server) or _containers(server)):
            time.sleep(0.2)
        assert not _alive(server), "the server still runs after its client went away"
        assert not _containers(server), f"containers left: {_containers(server)}"
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
