"""A private Docker engine for fault tests: its own socket, data root, exec root and bridge (no iptables),
started, stopped and restarted at will and removed afterwards. The shared engine is never touched.

Not `--bridge none`: a dockerd started with it deletes the host's `docker0` interface, which the shared
engine's bridge network needs (its network-enabled containers then fail to start). The private engine
gets a bridge interface of its own instead, deleted afterwards.

With `tcp=True` it also listens on tcp://127.0.0.1:<a free port> (`tcp_host`): an engine reached over TCP
is what a remote engine looks like to the client (no shared filesystem). Loopback only, no TLS, for the
test session's lifetime; the unix socket stays for the fault tests and the image load."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from ipyskills.sandbox.docker import backend as db


def free_port() -> int:
    """A loopback port nothing listens on now (the engine binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PrivateEngine:
    _made = 0  # engines made by this process (each gets its own bridge name)

    def __init__(self, root: Path, tcp: bool = False, extra: tuple[str, ...] = ()):
        self.root = root
        self.extra = tuple(extra)  # more dockerd options (test_remote_engine_tls.py: its TLS settings)
        self.host = f"unix://{root}/docker.sock"
        # Chosen once: a restarted engine listens on the same port, so a DOCKER_HOST set earlier still works.
        self.tcp_host = f"tcp://127.0.0.1:{free_port()}" if tcp else None
        self.proc: subprocess.Popen | None = None
        self.log = open(root / "dockerd.log", "ab")  # noqa: SIM115 - closed in close()
        # one bridge per engine: two private engines may be up at once in one test process (the session's
        # and the TLS module's); an interface name holds at most 15 characters
        PrivateEngine._made += 1
        self.bridge = f"ipy{os.getpid() % 100000}e{PrivateEngine._made % 1000}"
        subnet = f"10.254.{random.randrange(1, 250)}"
        for cmd in (["ip", "link", "add", self.bridge, "type", "bridge"],
                    ["ip", "addr", "add", f"{subnet}.1/24", "dev", self.bridge],
                    ["ip", "link", "set", self.bridge, "up"]):
            subprocess.run(cmd, capture_output=True, check=True)

    def load_image(self, image: str) -> None:
        """`docker save` from the shared engine into this one (no registry is reachable)."""
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        load = subprocess.run(["docker", "-H", self.host, "load"], stdin=save.stdout, capture_output=True, check=False)
        save.stdout.close()
        assert save.wait() == 0 and load.returncode == 0, load.stderr

    def start(self, timeout: float = 60.0) -> None:
        hosts = ["--host", self.host] + (["--host", self.tcp_host] if self.tcp_host else [])
        self.proc = subprocess.Popen(
            ["dockerd", *hosts, "--data-root", str(self.root / "data"),
             "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "docker.pid"),
             "--bridge", self.bridge, "--iptables=false", "--ip-masq=false", "--ip-forward=false",
             "--shutdown-timeout", "2", *self.extra],
            stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + timeout
        for host in filter(None, (self.host, None if self.extra else self.tcp_host)):
            while subprocess.run(["docker", "-H", host, "version"], capture_output=True, check=False).returncode != 0:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the private engine did not start on {host}: "
                                       f"{(self.root / 'dockerd.log').read_text()[-2000:]}")
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def containers(self, pid: int | None = None) -> list[str]:
        labels = ["--filter", f"label={db.LABEL}=1"]
        if pid is not None:
            labels += ["--filter", f"label={db.LABEL_PID}={pid}"]
        out = subprocess.run(["docker", "-H", self.host, "ps", "-aq", *labels], capture_output=True, text=True, check=False)
        return out.stdout.split()

    def close(self) -> None:
        self.stop()
        self.log.close()
        subprocess.run(["sh", "-c", f"grep -o ' {self.root}[^ ]*' /proc/mounts | sort -r | xargs -r -n1 umount -l"],
                       capture_output=True, check=False)
        shutil.rmtree(self.root, ignore_errors=True)
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True, check=False)
