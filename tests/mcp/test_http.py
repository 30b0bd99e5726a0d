"""Streamable HTTP on 127.0.0.1 behind a bearer token, with the SDK's own streamable_http_client.

In-process (`HTTPServer`, the one `%skills mcp start` runs, bound to a live registry) and as a command
(`ipyskills mcp --http`)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time

import anyio
import pytest

from ipyskills.errors import SkillError

from .conftest import REPO, server_env, text_of

TOKEN = "test-token-0123456789abcdef"


@contextlib.asynccontextmanager
async def http_session(url: str, token: str | None):
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=120) as session:
                await session.initialize()
                yield session


def status_without(url: str, headers: dict) -> int:
    import httpx

    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    return httpx.post(url, json=body, headers={"Accept": "application/json, text/event-stream", **headers},
                      timeout=10).status_code


@pytest.fixture
def reg(skills_root):
    from ipyskills import SkillRegistry
    from ipyskills.settings import Settings

    return SkillRegistry([skills_root], settings=Settings(default_roots=False, bundled_skills=False,
                                                          backend="docker", timeout=20.0))


@pytest.fixture
def served(reg):
    from ipyskills.agent.mcp.http import HTTPServer
    from ipyskills.agent.mcp.server import build_server

    server = HTTPServer(build_server(reg, disabled=["secret-ops"]), token=TOKEN).start()
    try:
        yield server
    finally:
        server.stop()


def test_the_token_is_required(served):
    assert served.url.startswith("http://127.0.0.1:")
    assert status_without(served.url, {}) == 401
    assert status_without(served.url, {"Authorization": "Bearer wrong-token-wrong-token"}) == 401
    assert status_without(served.url, {"Authorization": TOKEN}) == 401  # not a bearer header
    assert status_without(served.url, {"Authorization": f"Bearer {TOKEN}"}) == 200

    async def refused():
        async with http_session(served.url, "wrong-token-wrong-token") as session:
            await session.list_tools()

    from mcp.shared.exceptions import MCPError

    with pytest.raises(BaseException) as caught:  # the SDK client fails on the 401 (inside task groups)
        anyio.run(refused)
    errors, pending = [], [caught.value]
    while pending:
        exc = pending.pop()
        pending += list(getattr(exc, "exceptions", ()))
        errors.append(exc)
    assert any(isinstance(e, MCPError) for e in errors), errors


def test_a_short_token_is_refused(reg):
    from ipyskills.agent.mcp.http import HTTPServer
    from ipyskills.agent.mcp.server import build_server

    with pytest.raises(SkillError, match="at least 16 characters"):
        HTTPServer(build_server(reg), token="short")


@pytest.mark.docker
def test_tools_reads_runs_and_live_skills(served, reg, skills_root, docker):
    from tests.agent.conftest import write_skill

    async def main():
        async with http_session(served.url, TOKEN) as session:
            tools = (await session.list_tools()).tools
            expected = reg.for_agent(disabled=["secret-ops"]).tool_schemas("anthropic")
            direct = [reg.dispatch("read_skill", {"skill_name": "data-tool"}).text,
                      reg.dispatch("read_skill", {"skill_name": "secret-ops"}, disabled=["secret-ops"]).text]
            read = await session.call_tool("read_skill", {"skill_name": "data-tool"})
            hidden = await session.call_tool("read_skill", {"skill_name": "secret-ops"})
            ran = await session.call_tool("execute_skill_script", {"skill_name": "data-tool",
                                                                   "script_path": "scripts/echo.py",
                                                                   "args": ["x"]})
            # A skill written now (as %%skill does in a notebook) is served at once, by the same server.
            write_skill(skills_root, "fresh-skill", "Written while the server runs. Use in tests.", "# Fresh\n")
            reg.refresh()
            later = (await session.list_tools()).tools
            fresh = await session.call_tool("read_skill", {"skill_name": "fresh-skill"})
            resources = [str(r.uri) for r in (await session.list_resources()).resources]
            return tools, expected, direct, read, hidden, ran, later, fresh, resources

    tools, expected, direct, read, hidden, ran, later, fresh, resources = anyio.run(main)
    assert [(t.name, t.description, t.input_schema) for t in tools] == \
        [(s["name"], s["description"], s["input_schema"]) for s in expected]
    assert [text_of(read), text_of(hidden)] == direct
    assert hidden.is_error
    assert not ran.is_error and "args: ['x']" in text_of(ran) and "Backend: docker" in text_of(ran)
    assert "fresh-skill" in later[0].input_schema["properties"]["skill_name"]["enum"]
    assert text_of(fresh).startswith('<skill_content name="fresh-skill">')
    assert "skill://fresh-skill/SKILL.md" in resources


@pytest.mark.docker
def test_concurrent_calls_over_http(served, docker):
    async def main():
        async with http_session(served.url, TOKEN) as session:
            out = {}

            async def one(i):
                out[i] = await session.call_tool("execute_skill_script", {
                    "skill_name": "data-tool", "script_path": "scripts/sleep.py", "args": ["2", f"h-{i}"]})

            start = time.monotonic()
            async with anyio.create_task_group() as tg:
                for i in range(3):
                    tg.start_soon(one, i)
            return out, time.monotonic() - start

    out, elapsed = anyio.run(main)
    for i in range(3):
        assert not out[i].is_error and f"woke ['h-{i}']" in text_of(out[i])
    assert elapsed < 5.5, f"three 2 s runs took {elapsed:.1f} s"


def test_the_command_serves_http_with_a_generated_token(skills_root):
    proc = subprocess.Popen([sys.executable, "-m", "ipyskills", "mcp", "--http", "--port", "0", "--dir",
                             str(skills_root), "--backend", "local"], cwd=str(REPO), env=server_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        token_line = proc.stderr.readline()
        url_line = proc.stderr.readline()
        token = re.search(r"bearer token \(shown once\): (\S+)", token_line).group(1)
        url = re.search(r"MCP server at (http://127\.0\.0\.1:\d+/mcp)", url_line).group(1)
        time.sleep(0.5)
        assert status_without(url, {}) == 401

        async def main():
            async with http_session(url, token) as session:
                return await session.call_tool("read_skill", {"skill_name": "pdf-processing"})

        deadline = time.monotonic() + 20
        while True:
            try:
                result = anyio.run(main)
                break
            except BaseException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        assert text_of(result).startswith('<skill_content name="pdf-processing">')
        assert token not in proc.stdout.read(0) if proc.stdout else True
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_the_token_from_the_environment_is_not_printed(skills_root):
    env = server_env(IPYSKILLS_MCP_TOKEN=TOKEN)
    proc = subprocess.Popen([sys.executable, "-m", "ipyskills", "mcp", "--http", "--port", "0", "--dir",
                             str(skills_root)], cwd=str(REPO), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        assert "MCP server at http://127.0.0.1:" in line and TOKEN not in line
        url = line.split(" at ", 1)[1].strip()
        deadline = time.monotonic() + 20
        while True:
            try:
                assert status_without(url, {"Authorization": f"Bearer {TOKEN}"}) == 200
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert TOKEN not in err


@pytest.mark.docker
def test_a_client_gone_mid_run_leaves_the_server_serving_and_no_container(reg, docker):
    """Over HTTP the run of a client that went away ends at its own deadline; the server serves on."""
    from ipyskills.agent.mcp.http import HTTPServer
    from ipyskills.agent.mcp.server import build_server
    from ipyskills.sandbox.docker.cleanup import LABEL_POOL
    from tests.mcp.test_disconnect import _containers

    def runs():  # this process's run containers (the warm pool's stand by on purpose)
        return [c for c in _containers(os.getpid()) if (c.get("Labels") or {}).get(LABEL_POOL) != "1"]

    server = HTTPServer(build_server(reg, timeout=3), token=TOKEN).start()
    try:
        async def leave_mid_run():
            with anyio.move_on_after(1.5):
                async with http_session(server.url, TOKEN) as session:
                    await session.call_tool("execute_skill_script", {
                        "skill_name": "data-tool", "script_path": "scripts/sleep.py", "args": ["100"]})

        anyio.run(leave_mid_run)
        assert server.mcp_server.ipyskills.in_flight == 1  # the run goes on without its client
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (runs() or server.mcp_server.ipyskills.in_flight):
            time.sleep(0.2)
        assert not runs() and server.mcp_server.ipyskills.in_flight == 0

        async def again():
            async with http_session(server.url, TOKEN) as session:
                return await session.call_tool("read_skill", {"skill_name": "pdf-processing"})

        assert text_of(anyio.run(again)).startswith('<skill_content name="pdf-processing">')
    finally:
        server.stop()
    assert not server.running
