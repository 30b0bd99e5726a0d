"""A real JupyterLab (from this venv, on a free localhost port, token auth) and headless Chromium.

Both are stopped by fixture finalizers, also when a test fails; every wait is bounded. Tests here skip when
Chromium, Playwright or JupyterLab is missing, unless IPYSKILLS_REQUIRE_BROWSER=1 (scripts/test.sh sets it
when it installed Chromium), which turns the skip into a failure.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SERVER_START_SECONDS = 90
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"


def _missing() -> str:
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (IPYSKILLS_WITH_BROWSER=1 bash scripts/setup.sh installs it)"
    for module in ("playwright", "jupyterlab"):
        try:
            __import__(module)
        except ImportError:
            return f"the {module} package is missing (pip install -e '.[browser]')"
    return ""


@pytest.fixture(scope="session")
def browser_available():
    missing = _missing()
    if missing:
        if os.environ.get("IPYSKILLS_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser tests are required here (IPYSKILLS_REQUIRE_BROWSER=1) but {missing}")
        pytest.skip(missing)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def notebook_json(cells: list[str]) -> str:
    return json.dumps({
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}},
        "cells": [{"cell_type": "code", "id": f"cell-{i}", "metadata": {}, "source": src, "outputs": [],
                   "execution_count": None} for i, src in enumerate(cells)],
    })


class Lab:
    """A running JupyterLab: `url(path)` for pages, `log()` for its output, `stop()` to end it."""

    def __init__(self, tmp: Path, port: int, token: str, proc: subprocess.Popen, log_path: Path):
        self.root, self.port, self.token, self.proc, self.log_path = tmp / "root", port, token, proc, log_path

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}?token={self.token}"

    def api(self, method: str, path: str, timeout: float = 10):
        request = urllib.request.Request(self.url(path), method=method)
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def log(self, tail: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:  # kernels first, so none outlives the server
                for kernel in self.api("GET", "api/kernels"):
                    self.api("DELETE", f"api/kernels/{kernel['id']}", timeout=20)
            except (OSError, ValueError):
                pass
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # anything left in its process group
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(timeout=10)


@pytest.fixture
def lab(browser_available, tmp_path, request):
    """JupyterLab serving a temporary root folder; `lab.root` is where tests put notebooks."""
    (tmp_path / "root").mkdir()
    config = tmp_path / "config"
    settings = config / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # No news or update pop-ups over the page.
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false", "checkForUpdates": false}')
    env = {k: v for k, v in os.environ.items() if not k.startswith("IPYSKILLS_")}
    env.update(HOME=str(tmp_path / "home"), JUPYTER_CONFIG_DIR=str(config), IPYTHONDIR=str(tmp_path / "ipython"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    (tmp_path / "home").mkdir()
    port, token = free_port(), secrets.token_hex(16)
    log_path = tmp_path / "jupyterlab.log"
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
             f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
             f"--ServerApp.root_dir={tmp_path / 'root'}", "--LabApp.expose_app_in_browser=True",
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
             *(["--allow-root"] if os.geteuid() == 0 else [])],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
            start_new_session=True)
    server = Lab(tmp_path, port, token, proc, log_path)
    request.addfinalizer(server.stop)
    deadline = time.monotonic() + SERVER_START_SECONDS
    while True:
        if proc.poll() is not None:
            pytest.fail(f"JupyterLab exited with {proc.returncode}:\n{server.log()}")
        try:
            server.api("GET", "api/status", timeout=2)
            break
        except (OSError, urllib.error.URLError):
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer within {SERVER_START_SECONDS} s:\n{server.log()}")
            time.sleep(0.5)
    return server


@pytest.fixture
def page(browser_available, tmp_path):
    """A page in headless Chromium with a fresh profile; browser and Playwright stop afterwards."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    playwright = sync_playwright().start()
    try:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000})
        try:
            context.set_default_timeout(30_000)
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()
    finally:
        playwright.stop()
