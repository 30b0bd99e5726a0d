"""Real MCP clients (the SDK's ClientSession over stdio and Streamable HTTP) against `ipyskills mcp`, on
real skill folders; scripts run in the real Docker sandbox where a test says so."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.conftest import ARTIFACT, DANGER, ECHO, FAIL, FLOOD, SLOW, write_skill

REPO = Path(__file__).resolve().parents[2]
SLEEP = """\
import sys, time
print("sleeping", sys.argv[1:], flush=True)
time.sleep(float(sys.argv[1]))
print("woke", sys.argv[2:])
"""
HOST_SECRET = "HOST-SECRET-MCP-51"
BIG_ARTIFACTS = """\
import os
out = os.environ["IPYSKILLS_OUTPUT"]
open(os.path.join(out, "small report.md"), "w").write("# Small\\n")
open(os.path.join(out, "chart.png"), "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + bytes(100))
open(os.path.join(out, "huge.bin"), "wb").write(os.urandom(1536 * 1024))
print("wrote 3 files")
"""


def docker_ready() -> None:
    from ipyskills.sandbox.docker.backend import DockerBackend

    ready, reason = DockerBackend().readiness()
    if not ready:
        if os.environ.get("IPYSKILLS_REQUIRE_DOCKER") == "1":
            pytest.fail(f"Docker is required here but not ready: {reason}")
        pytest.skip(f"no Docker engine: {reason}")


@pytest.fixture
def docker():
    docker_ready()


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    write_skill(root, "data-tool", "Transform and analyse small data sets. Use for JSON or CSV data.",
                "# Data tool\n\nRun scripts/echo.py with the data on stdin.\n", {
                    "references/guide.md": "# Guide\n\nUse --to csv for CSV output.\n",
                    "scripts/echo.py": ECHO, "scripts/fail.py": FAIL, "scripts/flood.py": FLOOD,
                    "scripts/slow.py": SLOW, "scripts/danger.py": DANGER, "scripts/artifact.py": ARTIFACT,
                    "scripts/sleep.py": SLEEP,
                    "scripts/read_input.py": "import sys\nprint(open(sys.argv[1]).read())\n",
                    "scripts/big_artifacts.py": BIG_ARTIFACTS,
                    "assets/logo.png": b"\x89PNG\r\n\x1a\n" + bytes(64),
                }, frontmatter="license: Apache-2.0\nmetadata:\n  author: tests\n")
    write_skill(root, "pdf-processing", "Extract text and tables from PDF files. Use when handling PDFs.",
                "# PDF processing\n\nSee references/forms.md.\n", {"references/forms.md": "# Forms\n"})
    write_skill(root, "secret-ops", "Internal operations runbook.", "# Secret ops\n\nTOP-SECRET-BODY\n",
                {"references/secret.md": "TOP-SECRET-RESOURCE\n"})
    (tmp_path / "secret.txt").write_text(HOST_SECRET)
    return root


@pytest.fixture
def inputs_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "agent-inputs"
    folder.mkdir()
    (folder / "sales.csv").write_text("region,total\nnorth,10\n")
    (folder / "escape.txt").symlink_to(tmp_path / "secret.txt")
    return folder


def server_env(**extra) -> dict:
    """The server's environment: this checkout first on the path, no user settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IPYSKILLS_")}
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["IPYSKILLS_BUNDLED_SKILLS"] = "0"
    env["IPYSKILLS_DEFAULT_ROOTS"] = "0"
    env.update(extra)
    return env


def direct_dispatch(roots, tool: str, arguments: dict, *, env: dict | None = None, **view_options) -> dict:
    """What `registry.dispatch` returns, computed in a fresh process with the server's environment (so
    settings and the engine are the same ones the server sees): {"text", "is_error"}."""
    code = (
        "import json, sys\n"
        "from ipyskills import SkillRegistry\n"
        "roots, tool, arguments, options = json.loads(sys.stdin.read())\n"
        "result = SkillRegistry(roots).dispatch(tool, arguments, **options)\n"
        "print(json.dumps({'text': result.text, 'is_error': result.is_error}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps([[str(r) for r in roots], tool, arguments,
                                                                         view_options]),
                          capture_output=True, text=True, env=env or server_env(), timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def timeless(text: str) -> str:
    """A run report without its durations, the one thing two runs of the same call differ in (when both
    start a fresh container: compare runs with `cold_env()`, as the warm pool is a per-process state the
    Backend line names)."""
    return re.sub(r"\b(in|after) \d+(\.\d+)? s\b", r"\1 N s", text)


def cold_env(**extra) -> dict:
    """server_env without the warm pool, so a server's run and a direct dispatch's run start alike."""
    return server_env(IPYSKILLS_POOL_SIZE="0", **extra)


def stdio_params(*args: str, env: dict | None = None):
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=["-m", "ipyskills", "mcp", *args],
                                 env=env or server_env(), cwd=str(REPO))


@contextlib.asynccontextmanager
async def stdio_session(*args: str, env: dict | None = None, modern: bool = False):
    """A ClientSession on `python -m ipyskills mcp ARGS`, initialized (the 2025-11-25 handshake, or with
    `modern` the 2026-07-28 discover)."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    with open(os.devnull, "w") as errlog:
        async with stdio_client(stdio_params(*args, env=env), errlog=errlog) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=120) as session:
                if modern:
                    await session.discover()
                else:
                    await session.initialize()
                yield session


async def raw_request(session, method: str, params: dict) -> dict:
    """A request the SDK has no method for (skills/list, skills/get), through its own send_request."""
    import mcp_types as types
    from pydantic import TypeAdapter

    class Custom(types.Request):
        method: str
        params: dict

    return await session.send_request(Custom(method=method, params=params), TypeAdapter(dict))


def text_of(result) -> str:
    """The first content item's text: what `dispatch` returned."""
    assert result.content and result.content[0].type == "text", result
    return result.content[0].text
